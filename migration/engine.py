"""One file in, findings (and possibly new bytes) out: prefilter, ast pass, libcst fixes."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

from compat.catalog import prefilter_tokens

from .analysis import Context, analyze
from .fixer import apply_edits
from .ledger import LedgerIndex
from .model import SYNTAX_ERROR, FileResult, Finding
from .textio import atomic_write, decode, encode

TOKENS = prefilter_tokens()
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?", re.IGNORECASE)
MAX_ROUNDS = 4


@dataclass(frozen=True)
class Options:
    """What to report and what to fix."""

    select: tuple[str, ...] = ("ONX",)
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    fix: bool = False  # compute the rewritten text (--diff / --write)
    write: bool = False
    ledger: LedgerIndex | None = field(default=None, compare=False)

    def wanted(self, code: str) -> bool:
        if code == SYNTAX_ERROR:
            return True
        return code.startswith(self.select) and not code.startswith(self.ignore) \
            if self.ignore else code.startswith(self.select)

    def applies(self, f: Finding) -> bool:
        return bool(f.edits) and (f.applicability == "safe"
                                  or (self.unsafe_fixes and f.applicability == "unsafe"))


def might_need_migration(data: bytes) -> bool:
    """The byte prefilter: no catalog token, no legacy usage."""
    return any(tok in data for tok in TOKENS)


def _noqa(finding: Finding, lines: list[str]) -> bool:
    for ln in (finding.line, *finding.lines):
        if 0 < ln <= len(lines):
            m = _NOQA.search(lines[ln - 1])
            if m and (not m.group("codes") or finding.code in
                      {c.strip().upper() for c in m.group("codes").split(",")}):
                return True
    return False


def check_text(text: str, path: str, opts: Options, evidence: dict | None = None,
               tree: ast.Module | None = None, preamble: ast.Module | None = None
               ) -> list[Finding]:
    """Findings of one module's text (a syntax error is one ``E999`` finding)."""
    if tree is None:
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            return [Finding(SYNTAX_ERROR, exc.lineno or 1, (exc.offset or 0) or 1, "none",
                            note=f"SyntaxError: {exc.msg}", path=path)]
    ctx = Context(text, tree, path, evidence, preamble)
    lines = ctx.lines
    ctx.enabled = lambda code, line, *more: opts.wanted(code) and not _noqa(
        Finding(code, line, 1, lines=more), lines)
    found = analyze(ctx)
    out, off = [], []
    for f in found:
        (out if opts.wanted(f.code) and not _noqa(f, lines) else off).append(f)
    # edits belong to the finding that makes them: a fix that needs a suppressed or unselected
    # finding's edits (e.g. ONX001's dynamo=, ONX206's keywords) is reported without a fix
    foreign = {e for f in off for e in f.edits if e.kind != "import"}
    if foreign:
        for f in out:
            if foreign.intersection(f.edits):
                f.edits, f.applicability = (), "none"
    out.sort(key=lambda f: (f.line, f.column, f.code))
    return out


def _valid(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def _apply(text: str, fixes: list[Finding], dropped: list[str]) -> tuple[str, list[Finding]]:
    """Apply all fixes; if the result does not parse, keep only the fixes that do not break it."""
    try:
        new = apply_edits(text, [e for f in fixes for e in f.edits])
        if _valid(new):
            return new, fixes
    except Exception:  # noqa: BLE001, S110 - failing fixes are sorted out one by one below
        pass
    kept: list[Finding] = []
    for f in fixes:
        try:
            cand = apply_edits(text, [e for k in (*kept, f) for e in k.edits])
        except Exception:  # noqa: BLE001
            cand = None
        if cand is not None and _valid(cand):
            kept.append(f)
        else:
            dropped.append(f"{f.code} at line {f.line}: the fix did not produce valid Python")
    if not kept:
        return text, []
    return apply_edits(text, [e for k in kept for e in k.edits]), kept


def fix_text(text: str, path: str, opts: Options, evidence: dict | None = None,
             preamble: ast.Module | None = None
             ) -> tuple[str, list[Finding], list[Finding], list[str]]:
    """(new text, fixed findings, remaining findings, dropped-fix messages); runs to a fixpoint."""
    fixed: list[Finding] = []
    dropped: list[str] = []
    findings = check_text(text, path, opts, evidence, preamble=preamble)
    for _ in range(MAX_ROUNDS):
        todo = [f for f in findings if opts.applies(f)]
        if not todo:
            break
        new, done = _apply(text, todo, dropped)
        if new == text:
            break
        fixed.extend(done)
        text = new
        # line numbers moved: ledger evidence no longer lines up; the route is written now
        findings = check_text(text, path, opts, None, preamble=preamble)
    return text, fixed, findings, dropped


def process_bytes(data: bytes, path: str, opts: Options) -> FileResult:
    """Check (and with ``opts.fix`` rewrite) one Python source given as bytes."""
    result = FileResult(path, old_bytes=data)
    if not might_need_migration(data):
        return result
    try:
        src = decode(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        result.findings = [Finding(SYNTAX_ERROR, 1, 1, "none", note=f"cannot decode: {exc}",
                                   path=path)]
        return result
    evidence = opts.ledger.evidence(path) if opts.ledger and path != "-" else None
    if not opts.fix:
        result.findings = check_text(src.text, path, opts, evidence)
        return result
    new, result.fixed, result.findings, result.dropped = fix_text(src.text, path, opts, evidence)
    if new != src.text:
        result.new_bytes = encode(new, src)
    return result


def process_path(path: str, opts: Options) -> FileResult:
    """Process one file on disk; writes it back atomically with ``opts.write``."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if path.endswith(".ipynb"):
            from .notebook import process_notebook

            result = process_notebook(data, path, opts)
        else:
            result = process_bytes(data, path, opts)
        if opts.write and result.new_bytes is not None and result.new_bytes != data:
            atomic_write(path, result.new_bytes)
        return result
    except Exception as exc:  # noqa: BLE001 - reported as an internal error, the run goes on
        return FileResult(path, error=f"{type(exc).__name__}: {exc}")


def process_many(paths: list[str], opts: Options) -> list[FileResult]:
    """Worker entry for a chunk of files (one process handles many, to amortise startup)."""
    return [process_path(p, opts) for p in paths]


def realpath(path: str) -> str:
    return os.path.realpath(path)
