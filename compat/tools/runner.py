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
from compat.errors import CompatError, LegacyExportWarning
from compat.policy import config
from compat.records.call_history import one_line, route_cause  # noqa: F401 - moved there, named here too

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
    head = f"{history.total} export call(s)" + (f", {history.failed} failed" if history.failed else "")
    print(f"\ntorch-onnx-compat: {head}", file=stream)
    if history.dropped:
        print(f"  ({history.dropped} earlier call(s) not shown)", file=stream)
    for call in history:
        site, outcome = call.call_site, call.outcome
        if outcome is None:
            print(f"  {site}  FAILED {call.error}", file=stream)
            for route, cause in call.route_causes:
                print(f"    {route}: {cause}", file=stream)
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
