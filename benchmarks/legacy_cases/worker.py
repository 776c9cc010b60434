"""A worker process of the case runner: ``python -m legacy_cases.worker LOG [--extra FILE]``.

Reads requests from stdin, one JSON object a line (``{"case": name, "failed": {contender:
reason}}``); for each writes ``{"step": ...}`` before every step of the case and then the case's
result (``{"case": name, ...}``) as JSON lines on its protocol stream (the stdout it was started
with). Its own
file descriptors 1 and 2 point at ``LOG`` from the start, so what torch and onnxruntime print
(from Python or C++) stays out of the protocol and off the terminal. ``--extra FILE`` adds the
``CASES`` list of a Python file to the known cases (the tests' crash and timeout cases).
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib.util
import json
import os
import sys
import warnings
from typing import Any


def _protocol_stream(log: str) -> Any:
    """A private copy of the original stdout for results; fds 1 and 2 then go to ``log``."""
    sys.stdout.flush()
    sys.stderr.flush()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return proto


def _extra_cases(path: str) -> list[Any]:
    spec = importlib.util.spec_from_file_location("legacy_cases_extra", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return list(module.CASES)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("log")
    p.add_argument("--extra", help="a Python file with more CASES")
    p.add_argument("--contenders", default="", help="comma-separated; default: all")
    p.add_argument("--workdir", help="where each case's temp folder goes")
    ns = p.parse_args(argv)
    proto = _protocol_stream(ns.log)
    faulthandler.enable()  # a crash leaves its traceback in the log
    warnings.simplefilter("ignore")

    from . import all_cases
    from .harness import CONTENDERS, evaluate

    cases = {c.name: c for c in all_cases()}
    if ns.extra:
        cases.update({c.name: c for c in _extra_cases(ns.extra)})
    contenders = tuple(ns.contenders.split(",")) if ns.contenders else CONTENDERS
    print(json.dumps({"ready": True}), file=proto)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        name = request["case"]
        print(f"\n===== case {name}", flush=True)

        def step(what: str) -> None:
            print(f"----- {what}", flush=True)
            print(json.dumps({"step": what}), file=proto)

        try:
            row = evaluate(cases[name], contenders, workdir=ns.workdir, failed=request.get("failed"), progress=step)
        except Exception as exc:  # noqa: BLE001 - the harness must report, not die
            row = {"case": name, "case_error": f"harness: {type(exc).__name__}: {exc}"}
        print(json.dumps(row, default=str), file=proto)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
