"""``python -m compat.migrate``: argument parsing, config, parallel run, reports, exit codes.

Exit codes: 0 nothing to migrate (or everything fixed), 1 findings remain (syntax errors count:
they are ``E999`` findings) or ``--diff`` would change files, 2 usage or internal error.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import difflib
import os
import sys
from collections.abc import Sequence

from compat.catalog import is_code_prefix

from . import output
from .discovery import iter_files
from .engine import Options, process_bytes, process_many
from .model import FileResult

CONFIG_TABLE = ("tool", "torch-onnx-compat", "migrate")
PARALLEL_MIN = 24  # below this, process startup costs more than it saves


class UsageError(Exception):
    """Bad command line or config (exit 2)."""


def _codes(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    out = [c.strip().upper() for v in values for c in str(v).split(",") if c.strip()]
    for c in out:
        if not is_code_prefix(c):
            raise UsageError(f"not a rule code or prefix: {c!r} (expected e.g. ONX1 or ONX104)")
    return out


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
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            return {}
    folder = os.path.abspath(start)
    while True:
        cand = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(cand):
            try:
                with open(cand, "rb") as fh:
                    data = tomllib.load(fh)
            except tomllib.TOMLDecodeError as exc:
                raise UsageError(f"{cand}: {exc}") from exc
            for part in CONFIG_TABLE:
                data = data.get(part, {}) if isinstance(data, dict) else {}
            if not isinstance(data, dict):
                return {}
            return {**{k.replace("-", "_"): v for k, v in data.items()}, "__folder__": folder}
        parent = os.path.dirname(folder)
        if parent == folder:
            return {}
        folder = parent


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m compat.migrate",
        description="Rewrite legacy torch.onnx export code to the current API (libcst, "
                    "formatting preserved). Rule codes: python -m compat catalog.",
    )
    p.add_argument("paths", nargs="*", help="files or folders ('-' reads stdin); default '.'")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report; exit 1 if anything to migrate")
    mode.add_argument("--diff", action="store_true", help="print a unified diff, write nothing")
    mode.add_argument("--write", action="store_true", help="rewrite files in place")
    p.add_argument("--select", action="append", help="codes or prefixes, e.g. ONX1,ONX203")
    p.add_argument("--ignore", action="append", help="codes or prefixes to skip")
    p.add_argument("--unsafe-fixes", action="store_true", default=None,
                   help="also apply fixes that may change behaviour")
    p.add_argument("--ledger", action="append", metavar="P",
                   help="ledger(s) of `python -m compat run`: migrate each call site by evidence")
    p.add_argument("--output-format", choices=output.FORMATS, default=None)
    p.add_argument("--statistics", action="store_true", help="counts per rule code")
    p.add_argument("-j", "--jobs", type=int, default=None, help="worker processes")
    p.add_argument("--exclude", action="append", help="gitignore-style patterns to skip")
    p.add_argument("--stdin-filename", help="path to report for '-' (and to match a ledger)")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    return p


def _progress(enabled: bool, done: int, total: int) -> None:
    if enabled:
        sys.stderr.write(f"\rcompat.migrate: {done}/{total} files")
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
        print(f"compat.migrate: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 2


def _main(args: argparse.Namespace) -> int:
    cfg = load_config(os.getcwd())
    known = {"select", "ignore", "exclude", "unsafe_fixes", "jobs", "output_format", "ledger"}
    folder = cfg.pop("__folder__", os.getcwd())
    unknown = set(cfg) - known
    if unknown:
        raise UsageError(f"unknown key(s) in [tool.torch-onnx-compat.migrate]: {sorted(unknown)}")
    select = _codes(args.select) or _codes(_cfg_list(cfg, "select")) or ["ONX"]
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
    opts = Options(tuple(select), tuple(ignore), unsafe, fix=args.diff or args.write,
                   write=args.write, ledger=ledger)
    paths = args.paths or ["."]
    if "-" in paths:
        if len(paths) > 1:
            raise UsageError("'-' (stdin) cannot be combined with other paths")
        return _stdin(args, opts, fmt)
    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"no such file or folder: {p}")
    files = sorted(iter_files(paths, exclude, cfg_exclude))
    progress = (not args.no_progress and sys.stderr.isatty() and not os.environ.get("CI"))
    if ledger is not None and not any(ledger.evidence(f) for f in files):
        print(f"compat.migrate: warning: no record of {', '.join(ledger_paths)} matched a file "
              f"being migrated ({len(ledger.sites)} call site(s) recorded); is it this "
              "project's ledger?", file=sys.stderr)
    results = run_files(files, opts, jobs, progress)
    results.sort(key=lambda r: r.path)
    return _report(results, args, opts, fmt)


def _stdin(args: argparse.Namespace, opts: Options, fmt: str) -> int:
    data = sys.stdin.buffer.read()
    name = args.stdin_filename or "-"
    result = process_bytes(data, name, opts)
    if args.write:
        sys.stdout.buffer.write(result.new_bytes if result.new_bytes is not None else data)
        sys.stderr.write(output.render(fmt, result.findings))
        return 1 if result.findings else 0
    return _report([result], args, opts, fmt)


def _report(results: list[FileResult], args: argparse.Namespace, opts: Options, fmt: str) -> int:
    findings = [f for r in results for f in r.findings]
    errors = [r for r in results if r.error]
    changed = [r for r in results if r.new_bytes is not None]
    for r in results:
        for msg in r.dropped:
            print(f"{r.path}: fix dropped: {msg}", file=sys.stderr)
    for r in errors:
        print(f"compat.migrate: internal error in {r.path}: {r.error}", file=sys.stderr)
    if args.diff:
        sys.stdout.write("".join(_diff(r) for r in changed))
        n = sum(len(r.fixed) for r in changed)
        print(f"Would fix {n} finding(s) in {len(changed)} file(s); "
              f"{len(findings)} would remain.", file=sys.stderr)
        status = 1 if changed or findings else 0
    elif args.statistics:
        sys.stdout.write(output.statistics(findings, fmt))
        status = 1 if findings else 0
    else:
        sys.stdout.write(output.render(fmt, findings))
        if fmt == "text":
            if args.write:
                n = sum(len(r.fixed) for r in results)
                print(f"Fixed {n} finding(s) in {len(changed)} file(s); "
                      f"{len(findings)} remaining.")
            elif findings:
                safe = sum(f.applicability == "safe" for f in findings)
                unsafe = sum(f.applicability == "unsafe" for f in findings)
                print(f"Found {len(findings)} finding(s): {safe} fixable with --write"
                      + (f", {unsafe} more with --unsafe-fixes" if unsafe else "") + ".")
        status = 1 if findings else 0
    return 2 if errors else status
