"""``python -m compat run``: run a script (or ``-m module``) exactly as python would, under the shim."""

from __future__ import annotations

import argparse
import builtins
import importlib.util
import os
import re
import runpy
import sys
import traceback
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from compat import commands
from compat.errors import CompatError, LegacyExportWarning, StrictModeError
from compat.policy import config, notices
from compat.records.call_history import one_line, route_cause  # noqa: F401 - moved there, named here too

PROG = commands.RUN
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: ``run``'s own options that take a value (the token after them is not the script)
_VALUE_OPTIONS = ("--route", "--ledger")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [options] (script.py | -m module) [args ...]",
        description="Run an unchanged export script with torch.onnx patched by torch-onnx-compat.",
    )
    p.add_argument("--route", choices=("auto", "dynamo", "legacy"), help="force a route")
    p.add_argument("--strict", action="store_true", help="legacy usages raise instead of warning")
    p.add_argument("--ledger", metavar="PATH", help="append one JSON record per export to PATH")
    p.add_argument("--compare", action="store_true",
                   help="also export on both routes and record the parity verdict")
    p.add_argument("--observe", action="store_true",
                   help="no shim: torch.onnx.export runs as plain torch runs it, and each call is "
                        "recorded in the --ledger (for verify-migration)")
    p.add_argument("--quiet", "-q", action="store_true", help="no summary at exit")
    p.add_argument("--explain", action="store_true",
                   help="the long text of each legacy usage (why, the replacement, the migrate "
                        "command) instead of one line")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="also show what torch warns and logs while a route is tried")
    p.add_argument("-m", dest="module", metavar="MODULE",
                   help="run a library module as a script, as python -m MODULE (the rest of the "
                        "arguments are its own)")
    p.add_argument("script", nargs="?", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script or module")
    return p


def split_module(argv: Sequence[str]) -> tuple[list[str], str | None, list[str]] | None:
    """``(run's options, module, the module's arguments)`` when ``-m MODULE`` comes before any
    script (everything after the module is its own, as for python); None otherwise."""
    argv = list(argv)
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--" or not token.startswith("-"):
            return None
        if token == "-m":
            return argv[:i], (argv[i + 1] if i + 1 < len(argv) else None), argv[i + 2:]
        if token.startswith("-m") and not token.startswith("--"):
            return argv[:i], token[2:], argv[i + 1:]
        i += 2 if token in _VALUE_OPTIONS else 1
    return None


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    split = split_module(argv)
    if split is not None:
        before, module, module_args = split
        if module is None:
            parser.error("argument -m: expected one argument")
        ns = parser.parse_args([*before, "-m", module])
        ns.args = module_args
    else:
        ns = parser.parse_args(list(argv))
        if ns.script is None:
            parser.error("the following arguments are required: script (or -m module)")
    if ns.module is None and not os.path.isfile(ns.script):
        print(f"{PROG}: can't open file {ns.script!r}", file=sys.stderr)
        return 2
    if ns.observe:
        clash = [o for o, on in (("--route", ns.route), ("--strict", ns.strict),
                                 ("--compare", ns.compare)) if on]
        if clash:
            parser.error(f"--observe runs plain torch: {', '.join(clash)} does not apply")
        if not (ns.ledger or config.env_ledger()):
            parser.error(f"--observe records into a ledger: give --ledger PATH (or set {config.ENV_LEDGER})")
    ledger = ns.ledger or config.env_ledger()
    if ledger:
        problem = ledger_problem(ledger)
        if problem:
            source = "--ledger" if ns.ledger else config.ENV_LEDGER
            print(f"{PROG}: error: {source}: {problem}", file=sys.stderr)
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
    if ns.explain:
        os.environ[config.ENV_EXPLAIN] = "1"
    if ns.verbose:
        os.environ[config.ENV_VERBOSE] = "1"
    if ns.module is not None:
        return run_module(ns.module, ns.args, summary=not ns.quiet, observe=ns.observe)
    return run_script(ns.script, ns.args, summary=not ns.quiet, observe=ns.observe)


def ledger_problem(path: str) -> str | None:
    """Why the ledger at ``path`` cannot be written (one line), or None: checked before the script
    runs, so a run that records nothing does not pass for one that recorded (exit 2)."""
    from compat.records.ledger import check_path

    try:
        full = check_path(path)
    except CompatError as exc:
        return str(exc).removeprefix(f"{config.ENV_LEDGER}: ")
    existed = os.path.exists(full)
    try:
        fd = os.open(full, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        return f"the ledger path {full!r} cannot be written ({exc.strerror or exc})"
    os.close(fd)
    if not existed:
        os.unlink(full)
    return None


def run_script(script: str, args: Sequence[str], summary: bool = True, observe: bool = False) -> int:
    """Run ``script`` as ``__main__`` with ``sys.argv``/``sys.path[0]`` as python sets them;
    in compare mode (``--compare``, or inherited from a parent ``compat run``) every export is
    also compared; with ``observe`` on plain torch, every export recorded."""
    path = os.path.abspath(script)
    return _run(lambda: _exec_as_main(path), [script, *args], os.path.dirname(path), summary, observe)


def run_module(module: str, args: Sequence[str], summary: bool = True, observe: bool = False) -> int:
    """Run ``module`` as ``python -m module`` would: ``sys.argv[0]`` its file, ``sys.path[0]``
    the current folder; under the shim as ``run_script``."""
    sys.path.insert(0, os.getcwd())  # before the lookup: the cwd's own modules, as for python -m
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    finally:
        sys.path.pop(0)
    if found is None:
        print(f"{PROG}: error: No module named {module!r}", file=sys.stderr)
        return 1

    def run() -> None:
        runpy.run_module(module, run_name="__main__", alter_sys=True)

    return _run(run, ["-m", *args], os.getcwd(), summary, observe)


def _run(run: Callable[[], None], argv: list[str], path0: str, summary: bool,
         observe: bool = False) -> int:
    if observe:
        return _run_observed(run, argv, path0, summary)
    from compat.tools import compare_hook, patching

    code = 0
    strict_error: str | None = None
    if not sys.warnoptions:
        # DeprecationWarnings show by default only from __main__; a legacy export inside an
        # imported wrapper module must warn too (an explicit -W option wins)
        warnings.filterwarnings("default", category=LegacyExportWarning)
    compare = compare_hook.enabled()
    if compare:
        compare_hook.install()
    patching.install()
    notices.set_note_listener(_print_note)
    notices.hold_third_party(True)  # one line per distribution at exit instead
    try:
        with _as_script(argv, path0), _output_facts(), _one_line_warnings(not notices.explain()):
            run()
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except StrictModeError as exc:
        code, strict_error = 1, _strict_line(exc)
    finally:
        notices.set_note_listener(None)
        notices.hold_third_party(False)
        patching.uninstall()
        if compare:
            compare_hook.uninstall()
        if summary:
            print_summary()
            compare_hook.print_parity_table()
            for line in notices.third_party_lines():
                print(line, file=sys.stderr)
    if strict_error is not None:
        print(strict_error, file=sys.stderr)
    return code


@contextmanager
def _as_script(argv: list[str], path0: str) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as python sets them for the script, restored after."""
    old_argv, old_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = argv
    if sys.path:
        sys.path[0] = path0
    else:
        sys.path.insert(0, path0)
    try:
        yield
    finally:
        sys.argv = old_argv
        if old_path0 is not None:
            sys.path[0] = old_path0


@contextmanager
def _output_facts() -> Iterator[None]:
    """With a ledger, each shim export's record also gets what ``verify-migration`` compares
    (``compat.records.output_facts``)."""
    if not config.env_ledger():
        yield
        return
    from compat import api
    from compat.records import output_facts

    api.add_observer(output_facts.shim_observer)
    try:
        yield
    finally:
        api.remove_observer(output_facts.shim_observer)


def _run_observed(run: Callable[[], None], argv: list[str], path0: str, summary: bool) -> int:
    """``--observe``: the script on plain torch (warnings, routes and options untouched), each
    ``torch.onnx.export`` call recorded; ``compat.export`` calls as written, recorded too."""
    from compat.tools import observe

    code = 0
    observe.install()
    try:
        with _as_script(argv, path0), _output_facts():
            run()
    except SystemExit as exc:
        code = _exit_code(exc.code)
    finally:
        observe.uninstall()
        if summary:
            _print_observed(observe.calls)
            print_summary()
    return code


def _print_observed(calls: Sequence[tuple[str, str, str | None]], stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    if not calls:
        return
    print(f"\ntorch-onnx-compat: {len(calls)} torch.onnx.export call(s) observed (plain torch), "
          f"recorded in {config.env_ledger()}", file=stream)
    for site, status, what in calls:
        print(f"  {site}  {'-> ' + str(what) if status == 'ok' else 'FAILED ' + str(what)}", file=stream)


def _print_note(call_site: str, note: str) -> None:
    print(f"{call_site}: {commands.SCRIPT}: {note}", file=sys.stderr)


def _strict_line(exc: StrictModeError) -> str:
    """The one error line a strict-mode stop ends ``compat run`` with: where, what, how to read
    more (the long texts with --explain keep their own lines)."""
    site = next((f"{f.filename}:{f.lineno}: " for f in reversed(traceback.extract_tb(exc.__traceback__))
                 if not notices.is_own_file(f.filename)), "")
    more = "" if notices.explain() else f" (the fixes: {commands.RULE} CODE, or {PROG} --explain)"
    return f"{PROG}: error: {site}{exc}{more}"


@contextmanager
def _one_line_warnings(enabled: bool) -> Iterator[None]:
    """Show LegacyExportWarnings on one line each (``file:line: Category: text``, no source
    line); other warnings as before."""
    if not enabled:
        yield
        return
    previous = warnings.formatwarning

    def formatwarning(message: Any, category: type[Warning], filename: str, lineno: int,
                      line: str | None = None) -> str:
        if issubclass(category, LegacyExportWarning):
            return f"{filename}:{lineno}: {category.__name__}: {message}\n"
        return previous(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning
    try:
        yield
    finally:
        if warnings.formatwarning is formatwarning:
            warnings.formatwarning = previous


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
        verbose = config.env_verbose()
        if outcome.fallback_reason:
            why = " ".join(outcome.fallback_reason.split())
            parts.append(f"why: {why if verbose or len(why) <= 120 else why[:119] + '…'}")
        if outcome.warnings:
            parts.append("legacy: " + ",".join(outcome.warnings))
        if outcome.translations and verbose:
            parts.append("translated: " + "; ".join(f"{t.code} {t.option}: {t.action}" for t in outcome.translations))
        elif outcome.translations:  # what each did is in the ledger and with -v: one short line
            parts.append("translated: " + ",".join(dict.fromkeys(
                f"{t.code} {t.option}" for t in outcome.translations)))
        if outcome.tracer_warnings and not config.env_verbose():
            parts.append(f"{len(outcome.tracer_warnings)} tracer warning(s) in the ledger "
                         "(tracer_warnings; -v shows them)")
        parts.append(f"-> {outcome.output}")
        print(f"  {site}  " + "  ".join(parts), file=stream)
    if not notices.explain() and any(call.outcome is not None and call.outcome.warnings for call in history):
        print(f"  legacy usages: the full texts with {PROG} --explain, or {commands.RULE} CODE",
              file=stream)
