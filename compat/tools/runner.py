"""``python -m compat run``: run a script exactly as ``python script.py`` would, under the shim."""

from __future__ import annotations

import argparse
import builtins
import os
import re
import sys
import types
import warnings
from collections.abc import Sequence
from typing import TextIO

from compat import commands
from compat.errors import CompatError, ExportFailed, LegacyExportWarning
from compat.policy import config

PROG = commands.RUN
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Run an unchanged export script with torch.onnx patched by torch-onnx-compat.",
    )
    p.add_argument("--route", choices=("auto", "dynamo", "legacy"), help="force a route")
    p.add_argument("--strict", action="store_true", help="legacy usages raise instead of warning")
    p.add_argument("--ledger", metavar="PATH", help="append one JSON record per export to PATH")
    p.add_argument("--compare", action="store_true",
                   help="also export on both routes and record the parity verdict")
    p.add_argument("--quiet", "-q", action="store_true", help="no summary at exit")
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    return p


def main(argv: Sequence[str]) -> int:
    ns = build_parser().parse_args(list(argv))
    if not os.path.isfile(ns.script):
        print(f"{PROG}: can't open file {ns.script!r}", file=sys.stderr)
        return 2
    from compat.installed.runtime_extra import require_runtime

    try:
        require_runtime(PROG)
    except CompatError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    # Environment, so that subprocesses the script starts with the shim see the same settings.
    if ns.route:
        os.environ[config.ENV_ROUTE] = ns.route
    if ns.strict:
        os.environ[config.ENV_STRICT] = "1"
    if ns.ledger:
        os.environ[config.ENV_LEDGER] = os.path.abspath(ns.ledger)
    if ns.compare:
        os.environ[config.ENV_COMPARE] = "1"
    return run_script(ns.script, ns.args, summary=not ns.quiet)


def run_script(script: str, args: Sequence[str], summary: bool = True) -> int:
    """Run ``script`` as ``__main__`` with ``sys.argv``/``sys.path[0]`` as python sets them;
    in compare mode (``--compare``, or inherited from a parent ``compat run``) every export is
    also compared."""
    from compat.tools import compare_hook, patching

    path = os.path.abspath(script)
    old_argv, old_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = [script, *args]
    if sys.path:
        sys.path[0] = os.path.dirname(path)
    else:
        sys.path.insert(0, os.path.dirname(path))
    code = 0
    if not sys.warnoptions:
        # DeprecationWarnings show by default only from __main__; a legacy export inside an
        # imported wrapper module must warn too (an explicit -W option wins)
        warnings.filterwarnings("default", category=LegacyExportWarning)
    compare = compare_hook.enabled()
    if compare:
        compare_hook.install()
    patching.install()
    try:
        _exec_as_main(path)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    finally:
        patching.uninstall()
        if compare:
            compare_hook.uninstall()
        sys.argv = old_argv
        if old_path0 is not None:
            sys.path[0] = old_path0
        if summary:
            print_summary()
            compare_hook.print_parity_table()
    return code


def _exec_as_main(path: str) -> None:
    """What ``python path`` does: a fresh ``__main__`` with ``__file__`` set (absolute, as
    Python >= 3.9 has it) while ``sys.argv[0]`` stays as typed (runpy would overwrite it)."""
    with open(path, "rb") as fh:
        source = fh.read()
    code = compile(source, path, "exec")
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=builtins, __cached__=None)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)  # noqa: S102 - running the user's script is the point
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def print_summary(stream: TextIO | None = None) -> None:
    """One line per export of this process: where, which route, what was translated; a failed
    export also gets one line per route with that route's cause."""
    from compat.api import history

    stream = stream or sys.stderr
    if not history:
        return
    failed = sum(1 for _, outcome, _ in history if outcome is None)
    head = f"{len(history)} export call(s)" + (f", {failed} failed" if failed else "")
    print(f"\ntorch-onnx-compat: {head}", file=stream)
    for site, outcome, error in history:
        if outcome is None:
            first = one_line(str(error))
            print(f"  {site}  FAILED {type(error).__name__}: {first}", file=stream)
            if isinstance(error, ExportFailed):
                for route, failure in error.failures.items():
                    print(f"    {route}: {route_cause(failure)}", file=stream)
            continue
        parts = [f"route={outcome.route}"]
        if outcome.fallback_reason:
            parts.append(f"why: {outcome.fallback_reason}")
        if outcome.warnings:
            parts.append("legacy: " + ",".join(outcome.warnings))
        if outcome.translations:
            parts.append("translated: " + "; ".join(f"{t.code} {t.option}: {t.action}" for t in outcome.translations))
        parts.append(f"-> {outcome.output}")
        print(f"  {site}  " + "  ".join(parts), file=stream)


def one_line(text: str, limit: int = 200) -> str:
    """The first non-empty line of ``text``, without terminal colour codes, at most ``limit``."""
    lines = [line.strip() for line in _ANSI.sub("", text).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def route_cause(failure: BaseException) -> str:
    """``reason: Cause: message`` of one route's failure, on one line. torch.export errors put
    the root cause in an "Exception summary" (``<class 'x.DispatchError'>: ...``): that is used."""
    reason = getattr(failure, "reason", "")
    cause = getattr(failure, "cause", None)
    if cause is None:
        return one_line(str(failure))
    text = _ANSI.sub("", str(cause))
    summary = re.search(r"<class '(?:[\w.]*\.)?(\w+)'>: *(.+)", text)
    detail = f"{summary.group(1)}: {summary.group(2)}" if summary else f"{type(cause).__name__}: {text}"
    return one_line(f"{reason}: {detail}" if reason else detail)
