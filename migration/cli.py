"""``python -m compat.migrate``: argument parsing, config, parallel run, reports, exit codes."""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import difflib
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from compat import commands
from compat.catalog import BY_CODE, is_code_prefix

from . import baseline, outcome, output, pins
from .core import Options
from .discovery import iter_files
from .files import process_many
from .ledger import LedgerIndex
from .model import FileResult
from .sources import process_bytes

CONFIG_TABLE = ("tool", "torch-onnx-compat", "migrate")
PARALLEL_MIN = 24  # below this, process startup costs more than it saves


class UsageError(Exception):
    """Bad command line or config (exit 2)."""


def _codes(values: list[str] | None) -> list[str] | None:
    """Codes or prefixes (``ALL`` is every code); one that names no rule is a usage error."""
    if values is None:
        return None
    out = []
    for c in (c.strip().upper() for v in values for c in str(v).split(",") if c.strip()):
        c = "ONX" if c == "ALL" else c
        if not is_code_prefix(c) or not any(code.startswith(c) for code in BY_CODE):
            raise UsageError(f"not a rule code or a prefix of one: {c!r} (expected ALL, a code such as "
                             f"ONX104 or a prefix such as ONX1; see {commands.CATALOG})")
        out.append(c)
    return out


def _target_torch(value: object) -> tuple[int, int]:
    """``--target-torch 2.9`` as ``(2, 9)``, within the torches the rewriter knows; None: the
    installed torch (read from its metadata, torch is not imported), else the newest known."""
    from compat import torch_apis

    if value is None:
        return torch_apis.default_target()
    low, high = torch_apis.MIN_TARGET, torch_apis.newest_supported()
    expected = f"a torch version from {torch_apis.shown(low)} to {torch_apis.shown(high)}, such as 2.9"
    try:
        target = torch_apis.parse(str(value))
    except ValueError:
        raise UsageError(f"--target-torch / target-torch must be {expected}, not {value!r}") \
            from None
    if not low <= target <= high:
        why = (f"the torch.export-based exporter became the default in torch {torch_apis.shown(low)}"
               if target < low else f"torch {torch_apis.shown(high)} is the newest supported")
        raise UsageError(f"--target-torch / target-torch must be {expected}, not {value!r} "
                         f"({why})")
    return target


def _cfg_list(cfg: dict, key: str) -> list[str] | None:
    """A config list of strings; a string is a comma-separated list."""
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise UsageError(f"[tool.torch-onnx-compat.migrate] {key.replace('_', '-')} must be a list "
                     f"of strings (or a comma-separated string), not {value!r}")


_KIND = {bool: "true or false", int: "an integer", str: "a string"}


def _cfg_value(cfg: dict, key: str, kind: type, default: object) -> object:
    value = cfg.get(key, default)
    if value is not default and (not isinstance(value, kind)
                                 or (kind is int and isinstance(value, bool))):
        raise UsageError(f"[tool.torch-onnx-compat.migrate] {key.replace('_', '-')} must be "
                         f"{_KIND[kind]}, "
                         f"not {value!r}")
    return value


def load_config(start: str) -> dict:
    """``[tool.torch-onnx-compat.migrate]`` of the nearest pyproject.toml above ``start``.

    The folder of that pyproject.toml is ``"__folder__"`` (config ``exclude`` is relative to it).
    """
    from compat.errors import CompatValueError
    from compat.files import find_pyproject
    from compat.policy.config import read_pyproject

    found = find_pyproject(start)
    if found is None:
        return {}
    try:
        data = read_pyproject(found)  # tomli on Python 3.10; non-UTF-8 / bad TOML named
    except CompatValueError as exc:
        raise UsageError(str(exc)) from None
    for part in CONFIG_TABLE:
        data = data.get(part, {}) if isinstance(data, dict) else {}
    if not isinstance(data, dict):
        return {}
    return {**{k.replace("-", "_"): v for k, v in data.items()},
            "__folder__": os.path.dirname(found)}


EXIT_CODES = """exit codes:
  0  nothing to migrate, or everything was fixed (or suppressed by --add-noqa);
     always 0 with --exit-zero, unless 2
  1  findings remain (unfixable, unsafe without --unsafe-fixes, syntax errors),
     or --diff would change files, or --add-noqa could not suppress some
  2  usage error (bad option, unknown rule code, missing path, bad config)
     or an internal error on some file
"""


def _version() -> str:
    """``torch-onnx-migrate 0.1.0``, or ``python -m compat.migrate 0.1.0``: as typed."""
    from compat import __version__

    return f"{commands.MIGRATE} {__version__}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=commands.MIGRATE,
        description="Rewrite legacy torch.onnx export code to the current API (libcst, "
                    f"formatting preserved). Rule codes: {commands.CATALOG}; one rule: "
                    f"{commands.RULE} CODE.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="*", help="files or folders ('-' reads stdin); default '.'")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report; exit 1 if anything to migrate")
    mode.add_argument("--diff", action="store_true", help="print a unified diff, write nothing")
    mode.add_argument("--write", "--fix", dest="write", action="store_true",
                      help="rewrite files in place (--fix is an alias)")
    mode.add_argument("--add-noqa", action="store_true",
                      help="add a `# noqa: CODE` to each line with a finding left (as ruff "
                           "check --add-noqa)")
    p.add_argument("--select", action="append",
                   help="codes or prefixes, e.g. ONX1,ONX203; ALL for every rule")
    p.add_argument("--extend-select", action="append", metavar="CODES",
                   help="codes or prefixes to add to the selection")
    p.add_argument("--ignore", action="append", help="codes or prefixes to skip")
    p.add_argument("--unsafe-fixes", action="store_true", default=None,
                   help="also apply fixes that may change behaviour")
    p.add_argument("--ledger", action="append", metavar="P",
                   help=f"ledger(s) of `{commands.RUN}`: migrate each call site by evidence")
    p.add_argument("--target-torch", metavar="X.Y",
                   help="the torch the code will run (2.9 to the newest supported; default: the "
                        "installed torch): a fix writing an API it lacks is not applied, and the "
                        "finding says why (config: target-torch)")
    p.add_argument("--drop-legacy-symbolics", action="store_true", default=None,
                   help="remove the register_custom_op_symbolic calls whose symbolics the rewrite "
                        "translated (kept by default for TorchScript users)")
    p.add_argument("--baseline", metavar="FILE",
                   help="alone: record today's legacy usages in FILE; with --check: fail only on "
                        "usages not in FILE and say how many remain (config: baseline)")
    p.add_argument("--pin-expires", metavar="DATE",
                   help="give each pin the rewriter writes (dynamo=False, a kept compat.export) an "
                        "expiry date in its comment (YYYY-MM-DD or +DAYS); --check fails after it "
                        "(config: pin-expires)")
    p.add_argument("--output-format", choices=output.FORMATS, default=None,
                   help="text (= concise, one line per finding; the default), full (with the "
                        "source line, a caret and the fix), json, sarif, github")
    p.add_argument("--statistics", action="store_true", help="counts per rule code")
    p.add_argument("--show-fixes", action="store_true",
                   help="list the fixes applied (--fix) or that would be (--diff)")
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 even when findings remain (2 still reports errors)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print findings only: no summary, no 'All checks passed!'")
    p.add_argument("-j", "--jobs", type=int, default=None, help="worker processes")
    p.add_argument("--exclude", action="append", help="gitignore-style patterns to skip")
    p.add_argument("--stdin-filename", help="path to report for '-' (and to match a ledger)")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.add_argument("--version", action="version", version=_version())
    return p


def _progress(enabled: bool, done: int, total: int) -> None:
    if enabled:
        sys.stderr.write(f"\r{commands.MIGRATE}: {done}/{total} files")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run_files(files: list[str], opts: Options, jobs: int, progress: bool) -> list[FileResult]:
    """Process files, in ``jobs`` processes when there are enough of them."""
    show = progress and len(files) >= 200
    if jobs <= 1 or len(files) < PARALLEL_MIN:
        out = []
        for i, f in enumerate(files, 1):
            out.extend(process_many([f], opts))
            if show and (i % 50 == 0 or i == len(files)):
                _progress(True, i, len(files))
        return out
    size = max(8, len(files) // (jobs * 8))
    chunks = [files[i:i + size] for i in range(0, len(files), size)]
    results: list[FileResult] = []
    with cf.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(process_many, c, opts) for c in chunks]
        for fut in cf.as_completed(futures):
            results.extend(fut.result())
            _progress(show, len(results), len(files))
    return results


def _diff(r: FileResult) -> str:
    def lines(b: bytes | None) -> list[str]:
        return (b or b"").decode("utf-8", "replace").splitlines(keepends=True)

    return "".join(difflib.unified_diff(lines(r.old_bytes), lines(r.new_bytes),
                                        r.path, r.path))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help is 0, errors are 2
        return int(exc.code or 0)
    try:
        return _main(args)
    except UsageError as exc:
        print(f"{commands.MIGRATE}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 2


def _main(args: argparse.Namespace) -> int:
    cfg = load_config(os.getcwd())
    known = {"select", "extend_select", "ignore", "exclude", "unsafe_fixes", "jobs",
             "output_format", "ledger", "target_torch", "baseline", "pin_expires",
             "drop_legacy_symbolics"}
    folder = cfg.pop("__folder__", os.getcwd())
    unknown = set(cfg) - known
    if unknown:
        raise UsageError(f"unknown key(s) in [tool.torch-onnx-compat.migrate]: {sorted(unknown)}")
    select = _codes(args.select) or _codes(_cfg_list(cfg, "select")) or ["ONX"]
    select += (_codes(_cfg_list(cfg, "extend_select")) or []) + (_codes(args.extend_select) or [])
    ignore = _codes(args.ignore) or _codes(_cfg_list(cfg, "ignore")) or []

    def split(values: list[str]) -> list[str]:
        return [e.strip() for v in values for e in v.split(",") if e.strip()]

    exclude = split(args.exclude or [])
    # config patterns are relative to the folder of the pyproject.toml they come from
    cfg_exclude = [(folder, split(_cfg_list(cfg, "exclude") or []))]
    unsafe = bool(args.unsafe_fixes if args.unsafe_fixes is not None
                  else _cfg_value(cfg, "unsafe_fixes", bool, False))
    fmt = args.output_format or _cfg_value(cfg, "output_format", str, "text")
    if fmt not in output.FORMATS:
        raise UsageError(f"unknown output format {fmt!r} (expected one of {output.FORMATS})")
    jobs = args.jobs if args.jobs is not None else _cfg_value(cfg, "jobs", int, None)
    jobs = os.cpu_count() or 1 if jobs is None else jobs
    if jobs < 1:
        raise UsageError("-j/--jobs must be at least 1")
    ledger_cfg = _cfg_value(cfg, "ledger", str, None)
    ledger_paths = args.ledger or ([os.path.join(folder, ledger_cfg)] if ledger_cfg else [])
    ledger = None
    if ledger_paths:
        from .ledger import read

        for p in ledger_paths:
            if not os.path.isfile(p):
                raise UsageError(f"ledger not found: {p}")
        ledger = read(ledger_paths)
    target = _target_torch(args.target_torch if args.target_torch is not None
                           else _cfg_value(cfg, "target_torch", str, None))
    opts = Options(tuple(select), tuple(ignore), unsafe, fix=args.diff or args.write,
                   write=args.write or args.add_noqa, ledger=ledger, target_torch=target,
                   add_noqa=args.add_noqa, pin_expires=_pin_expires(args, cfg),
                   drop_legacy_symbolics=bool(
                       args.drop_legacy_symbolics if args.drop_legacy_symbolics is not None
                       else _cfg_value(cfg, "drop_legacy_symbolics", bool, False)))
    args.baseline_file = _baseline_file(args, cfg, folder)
    paths = args.paths or ["."]
    if "-" in paths:
        if args.add_noqa:
            raise UsageError("--add-noqa edits files in place; it cannot read stdin ('-')")
        if len(paths) > 1:
            raise UsageError("'-' (stdin) cannot be combined with other paths")
        return _stdin(args, opts, fmt)
    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"no such file or folder: {p}")
    files = sorted(iter_files(paths, exclude, cfg_exclude))
    progress = (not args.no_progress and sys.stderr.isatty() and not os.environ.get("CI"))
    if ledger is not None:
        ledger.tree_roots = tuple(os.path.abspath(p) if os.path.isdir(p) else
                                  os.path.dirname(os.path.abspath(p)) for p in paths)
        if not ledger.describes(files):
            raise UsageError(_unmatched_ledger(ledger, ledger_paths, files))
    results = run_files(files, opts, jobs, progress)
    results.sort(key=lambda r: r.path)
    return _report(results, args, opts, fmt)


def _pin_expires(args: argparse.Namespace, cfg: dict) -> datetime.date | None:
    value = args.pin_expires or _cfg_value(cfg, "pin_expires", str, None)
    if value is None:
        return None
    try:
        return pins.parse_date(str(value))
    except ValueError:
        raise UsageError(f"--pin-expires / pin-expires must be a date (YYYY-MM-DD) or +DAYS, "
                         f"not {value!r}") from None


def _baseline_file(args: argparse.Namespace, cfg: dict, folder: str) -> str | None:
    """The baseline to record (``--baseline`` alone) or compare with (``--check``)."""
    if args.baseline:
        if args.diff or args.write or args.add_noqa or args.statistics:
            raise UsageError("--baseline records (alone) or compares (with --check); it does not "
                             "combine with --diff, --fix, --add-noqa or --statistics")
        return args.baseline
    configured = _cfg_value(cfg, "baseline", str, None)
    return os.path.join(folder, str(configured)) if configured and args.check else None


def _unmatched_ledger(ledger: LedgerIndex, ledger_paths: list[str], files: list[str]) -> str:
    """Why a ledger matched nothing: where its call sites were recorded, where the tree is."""
    names = ", ".join(ledger_paths)
    if not ledger.sites:
        return f"the ledger {names} holds no export call record; record one with `{commands.RUN} --ledger`"
    shown = sorted(ledger.roots, key=lambda r: -ledger.roots[r])[:3]
    more = f" and {len(ledger.roots) - 3} more" if len(ledger.roots) > 3 else ""
    trees = sorted({ledger.root_of(f) for f in files} or set(ledger.tree_roots))
    return (f"no call site of the ledger {names} matches a file being migrated: it recorded "
            f"{len(ledger.sites)} call site(s) under {', '.join(shown)}{more}; the tree being "
            f"migrated is rooted at {', '.join(trees[:3]) or '(no Python file)'}. Call sites match "
            "by their path relative to the project root (the nearest pyproject.toml or .git), "
            "then by path suffix: migrate the tree the ledger was recorded in, or record it again "
            f"here with `{commands.RUN} --ledger`")


def _stdin(args: argparse.Namespace, opts: Options, fmt: str) -> int:
    data = sys.stdin.buffer.read()
    name = args.stdin_filename or "-"
    result = process_bytes(data, name, opts)
    if args.write:
        sys.stdout.buffer.write(result.new_bytes if result.new_bytes is not None else data)
        sys.stderr.write(output.render(fmt, result.findings))
        return 1 if result.findings and not args.exit_zero else 0
    return _report([result], args, opts, fmt)


def _report(results: list[FileResult], args: argparse.Namespace, opts: Options, fmt: str) -> int:
    findings = [f for r in results for f in r.findings]
    errors = [r for r in results if r.error]
    changed = [r for r in results if r.new_bytes is not None]
    for r in results:
        for msg in r.dropped:
            print(f"{r.path}: fix dropped: {msg}", file=sys.stderr)
    for r in errors:
        print(f"{commands.MIGRATE}: internal error in {r.path}: {r.error}", file=sys.stderr)
    quiet = args.quiet or fmt not in output.TEXT_FORMATS
    if fmt == "json" and not (args.write or args.diff or args.add_noqa):
        _attach_text_edits(results, opts)
    if getattr(args, "baseline_file", None) and not errors:
        return _ratchet(results, findings, args, fmt, quiet)
    if args.add_noqa:
        return _report_noqa(results, errors, args)
    if args.diff:
        sys.stdout.write("".join(_diff(r) for r in changed))
        n = sum(len(r.fixed) for r in changed)
        if args.show_fixes:
            _show_fixes(results, "Would fix", sys.stderr)
        if not args.quiet:
            print(f"Would fix {n} finding(s) in {len(changed)} file(s); "
                  f"{len(findings)} would remain.", file=sys.stderr)
        status = 1 if changed or findings else 0
    elif args.statistics:
        sys.stdout.write(output.statistics(findings, fmt))
        status = 1 if findings else 0
    else:
        sys.stdout.write(output.render(fmt, findings))
        expired = [] if args.write else _expired_pins(results)
        for e in expired:
            print(e.message())
        if args.show_fixes and args.write:
            _show_fixes(results, "Fixed", sys.stdout)
        if not quiet:
            if args.write:
                n = sum(len(r.fixed) for r in results)
                print(f"Fixed {n} finding(s) in {len(changed)} file(s); "
                      f"{len(findings)} remaining.")
                states = outcome.summary(_texts(results))
                if states:
                    print(states)
            elif findings:
                safe = sum(f.applicability == "safe" for f in findings)
                unsafe = sum(f.applicability == "unsafe" for f in findings)
                print(f"Found {len(findings)} finding(s): {safe} fixable with --fix"
                      + (f", {unsafe} more with --unsafe-fixes" if unsafe else "") + ".")
            if expired:
                print(f"{len(expired)} pin(s) expired.")
            elif not findings and not errors:
                print("All checks passed!")
        status = 1 if findings or expired else 0
    if args.exit_zero:
        status = 0
    return 2 if errors else status


def _ratchet(results: list[FileResult], findings: list, args: argparse.Namespace, fmt: str,
             quiet: bool) -> int:
    """``--baseline FILE``: record it; with ``--check``: report only the usages not in it and
    the pins whose date has passed, and say how many baselined usages remain."""
    path = args.baseline_file
    if not args.check:
        try:
            n = baseline.record(path, findings)
        except OSError as exc:
            raise UsageError(f"cannot write the baseline {path}: {exc.strerror or exc}") from None
        if not args.quiet:
            print(f"Recorded {n} legacy usage(s) in {path}; `{commands.MIGRATE} --check "
                  f"--baseline {path}` now fails only on new ones.")
        return 0
    try:
        cmp = baseline.compare(path, findings)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read the baseline {path}: {exc}") from None
    expired = _expired_pins(results)
    sys.stdout.write(output.render(fmt, cmp.new))
    for e in expired:
        print(e.message())
    if not quiet:
        head = (f"Found {len(cmp.new)} new legacy usage(s) not in the baseline {path}"
                if cmp.new else f"No new legacy usages against the baseline {path}")
        print(f"{head}; {cmp.remaining} baselined usage(s) remain ({cmp.fixed} fixed since "
              f"{cmp.recorded})" + (f"; {len(expired)} pin(s) expired." if expired else "."))
    return 0 if args.exit_zero else int(bool(cmp.new or expired))


def _attach_text_edits(results: list[FileResult], opts: Options) -> None:
    """ruff's ``fix.edits`` for the JSON output: the file's fixed text (as ``--diff`` computes it)
    against its text now, each changed range given to the finding on (or just below) its lines."""
    import dataclasses

    fixing = dataclasses.replace(opts, fix=True, write=False, add_noqa=False)
    for r in results:
        fixable = [f for f in r.findings if f.edits]
        if not fixable or r.path.endswith(".ipynb"):
            continue
        old = _read(r.path)
        new = process_bytes(old, r.path, fixing).new_bytes
        if new is None:
            continue
        a = old.decode("utf-8", "replace").splitlines(keepends=True)
        b = new.decode("utf-8", "replace").splitlines(keepends=True)
        hunks = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
                 if op[0] != "equal"]
        for f in fixable:
            rows = {f.line, *f.lines}
            mine = [op for op in hunks if any(op[1] < row <= max(op[2], op[1] + 1) for row in rows)]
            f.text_edits = tuple({"content": "".join(b[j1:j2]),
                                  "location": {"row": i1 + 1, "column": 1},
                                  "end_location": {"row": i2 + 1, "column": 1}}
                                 for _, i1, i2, j1, j2 in mine)


def _expired_pins(results: list[FileResult]) -> list[pins.ExpiredPin]:
    return [e for r in results for e in pins.expired(
        r.path, (r.old_bytes or _read(r.path)).decode("utf-8", "replace").splitlines())]


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _texts(results: list[FileResult]) -> list[str]:
    """The Python text of each file as it stands after the run (notebooks are left out)."""
    out = []
    for r in results:
        data = r.new_bytes if r.new_bytes is not None else r.old_bytes
        if data is not None and not r.path.endswith(".ipynb"):
            out.append(data.decode("utf-8", "replace"))
    return out


def _report_noqa(results: list[FileResult], errors: list[FileResult], args: argparse.Namespace
                 ) -> int:
    """``--add-noqa``: ruff's summary (``Added N noqa directives.``, on stderr); 0, or 1 when a
    finding could not be suppressed (a syntax error, a notebook, a file not written)."""
    left = 0
    for r in results:
        not_written = next((f.note for f in r.findings if f.code == "E902"), None)
        for f in r.findings:
            why = (not_written if not_written
                   else "notebook cells are not edited" if f.path.endswith(".ipynb")
                   else "a syntax error cannot be suppressed" if f.code == "E999"
                   else "no line of it can take a comment")
            if f.code != "E902":
                left += 1
                print(f"{f.path}:{f.where}: {f.code}: no noqa directive added ({why})",
                      file=sys.stderr)
    n = sum(r.noqa_added for r in results if r.new_bytes is not None)
    if n and not args.quiet:
        print(f"Added {n} noqa directive{'' if n == 1 else 's'}.", file=sys.stderr)
    return 2 if errors else 0 if args.exit_zero or not left else 1


def _show_fixes(results: list[FileResult], verb: str, stream: TextIO) -> None:
    """``--show-fixes``: per file, how many findings of each code were (or would be) fixed."""
    lines = []
    for r in results:
        counts: dict[str, int] = {}
        for f in r.fixed:
            counts[f.code] = counts.get(f.code, 0) + 1
        for code, n in sorted(counts.items()):
            lines.append(f"    {r.path}: {n} x {code}")
    total = sum(len(r.fixed) for r in results)
    if lines:
        print(f"{verb} {total} finding(s):\n" + "\n".join(lines), file=stream)
    else:
        print("No fixes available.", file=stream)
