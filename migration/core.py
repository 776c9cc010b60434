"""The text core: one module's source text in, its findings and the fixed text out.

The byte prefilter, the ``ast`` pass (the rules the registry holds), ``# noqa`` and the
selection, and the libcst fixes run to a fixpoint. Nothing here reads or writes a file: the
per-suffix file layer (``sources.py`` for Python files, ``notebook.py`` for notebooks,
``files.py`` for the disk) decodes the bytes, calls this, and encodes and writes the result.
"""

from __future__ import annotations

import ast
import datetime
from collections import Counter
from dataclasses import dataclass, field

from compat.catalog import prefilter_tokens

from .analysis import Context, _splitlines, analyze
from .generated import module_name
from .ledger import LedgerIndex, shift_lines
from .model import SYNTAX_ERROR, Finding
from .noqa import Directives
from .rules import RULES
from .splice import FixFailed, Layout, UnsafeRewrite, plan, rewrite_piece, splice
from .target import hold_back

TOKENS = prefilter_tokens()
MAX_ROUNDS = 4


@dataclass(frozen=True)
class Options:
    """What to report and what to fix."""

    select: tuple[str, ...] = ("ONX",)
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    fix: bool = False  # compute the rewritten text (--diff / --write)
    write: bool = False
    add_noqa: bool = False  # --add-noqa: a noqa comment for each finding left (with write)
    ledger: LedgerIndex | None = field(default=None, compare=False)
    #: the torch the code will run (``--target-torch``): fixes writing APIs it lacks are held
    #: back (``target.py``); None: every fix (the CLI's default is the installed torch)
    target_torch: tuple[int, int] | None = None
    pin_expires: datetime.date | None = None  # --pin-expires: the date a pin's comment gives
    drop_legacy_symbolics: bool = False  # remove registrations whose symbolics were translated

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


def check_text(text: str, path: str, opts: Options, evidence: dict | None = None,
               tree: ast.Module | None = None, preamble: ast.Module | None = None
               ) -> list[Finding]:
    """Findings of one module's text (a syntax error is one ``E999`` finding)."""
    if tree is None:
        parsed = parse(text, path)
        if isinstance(parsed, Finding):
            return [_with_source(parsed, _splitlines(text))]
        tree = parsed
    try:
        ctx = Context(text, tree, path, evidence, preamble)
    except (RecursionError, MemoryError):
        return [_too_deep(path)]
    ctx.facts["target_torch"] = opts.target_torch
    ctx.facts["pin_expires"] = opts.pin_expires
    ctx.facts["drop_legacy_symbolics"] = opts.drop_legacy_symbolics
    lines = ctx.lines
    noqa = Directives(text, lines)
    ctx.enabled = lambda code, line, *more: opts.wanted(code) and not noqa.suppressed(
        Finding(code, line, 1, lines=more))
    ctx.suppressed = lambda code, line, *more: noqa.suppressed(Finding(code, line, 1, lines=more))
    try:
        found = analyze(ctx, RULES)
    except (RecursionError, MemoryError):
        return [_too_deep(path)]
    if opts.target_torch is not None:
        hold_back(found, tuple(opts.target_torch))  # type: ignore[arg-type]
    out, off = [], []
    for f in found:
        (out if opts.wanted(f.code) and not noqa.suppressed(f) else off).append(f)
    # edits belong to the finding that makes them: a fix that needs a suppressed or unselected
    # finding's edits (e.g. ONX001's dynamo=, ONX206's keywords) is reported without a fix; its
    # hint selects the unselected ones (a suppressed one stays suppressed: no fix then)
    foreign = {e for f in off for e in f.edits if e.kind != "import"}
    if foreign:
        muted = {e for f in off if noqa.suppressed(f) for e in f.edits if e.kind != "import"}
        for f in out:
            if foreign.intersection(f.edits):
                f.held = "none" if muted.intersection(f.edits) else f.applicability
                f.edits, f.applicability = (), "none"
    out.sort(key=lambda f: (f.line, f.column, f.code))
    return [_with_source(f, lines) for f in out]


def _with_source(finding: Finding, lines: list[str]) -> Finding:
    """``finding`` with the text of its line (for ``--output-format full``)."""
    if 0 < finding.line <= len(lines):
        finding.source = lines[finding.line - 1].rstrip("\r\n")
    return finding


def _too_deep(path: str) -> Finding:
    return Finding(SYNTAX_ERROR, 1, 1, "none", path=path,
                   note="the code is nested too deeply to analyse (RecursionError)")


def parse(text: str, path: str) -> ast.Module | Finding:
    """The module's ast, or the ``E999`` finding saying why there is none."""
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        return Finding(SYNTAX_ERROR, exc.lineno or 1, (exc.offset or 0) or 1, "none",
                       note=f"SyntaxError: {exc.msg}", path=path)
    except (RecursionError, MemoryError):
        return _too_deep(path)


def _apply(text: str, tree: ast.Module, fixes: list[Finding], dropped: list[str], path: str,
           flags: int = 0, failed: dict | None = None) -> tuple[str, list[Finding]]:
    """Apply ``fixes`` to the top-level statements they edit; a fix that fails or makes its
    statement not compile is left out (and noted in ``dropped`` and ``failed``).

    Raises UnsafeRewrite when a rewritten statement loses code outside its edits.
    """
    layout = Layout(text, tree)
    live: list[Finding] = []
    groups: dict[int, set[int]] = {}
    for f in fixes:
        try:
            groups[id(f)] = {layout.group_of(e.key[0]) for e in f.edits if e.kind != "import"}
            live.append(f)
        except FixFailed as exc:
            _drop(f, str(exc), dropped, failed)
    while True:
        pieces, imports = plan(layout, [e for f in live for e in f.edits])
        done: list[tuple] = []
        bad: list[Finding] = []
        for piece in pieces:
            try:
                done.append((piece, rewrite_piece(layout, piece, path, flags)))
                continue
            except FixFailed:
                pass
            group = layout.group_of(piece.first)
            kept: list[Finding] = []
            for f in (f for f in live if group in groups[id(f)]):
                sub = [p for p in plan(layout, [e for k in (*kept, f) for e in k.edits])[0]
                       if p.first == piece.first]
                try:
                    rewrite_piece(layout, sub[0], path, flags)
                    kept.append(f)
                except FixFailed as exc:
                    bad.append(f)
                    _drop(f, str(exc), dropped, failed)
        if not bad:
            break
        live = [f for f in live if f not in bad]
    if not done and not imports:
        return text, []
    return splice(layout, done, imports, path, (module_name(path),)), live


def _signature(f: Finding) -> tuple:
    return (f.code, tuple((e.kind, e.args) for e in f.edits))


def _drop(f: Finding, reason: str, dropped: list[str], failed: dict | None) -> None:
    dropped.append(f"{f.code} at line {f.line}: {reason}")
    if failed is not None:
        failed[_signature(f)] = reason


def _drop_unused_imports(text: str, tree: ast.Module, read_before: Counter, path: str,
                         flags: int) -> str:
    """``text`` without the imports its fixes left unused (``unused_imports.py``); as it
    was when there are none or their removal does not check out (e.g. an emptied block)."""
    import libcst as cst  # the fix path only: a check never pays for importing libcst

    from . import unused_imports

    names = unused_imports.newly_unread(read_before, tree)
    if not names or path.replace("\\", "/").rsplit("/", 1)[-1] == "__init__.py":
        return text  # a package's names are its API
    try:
        edits = unused_imports.drop_edits(text, names)
        if not edits:
            return text
        cleanup = Finding("import", edits[0].key[0], 1, "safe", tuple(edits), path=path)
        new, _ = _apply(text, tree, [cleanup], [], path, flags)
    except (UnsafeRewrite, RecursionError, cst.ParserSyntaxError):
        return text
    return new


def fix_text(text: str, path: str, opts: Options, evidence: dict | None = None,
             preamble: ast.Module | None = None, flags: int = 0
             ) -> tuple[str, list[Finding], list[Finding], list[str]]:
    """(new text, fixed findings, remaining findings, dropped-fix messages); runs to a fixpoint.

    ``flags`` are extra ``compile()`` flags for the check of rewritten statements (notebooks
    allow top-level ``await``). Raises UnsafeRewrite (nothing may be written) when a rewrite
    would change code outside its edits.
    """
    fixed: list[Finding] = []
    dropped: list[str] = []
    failed: dict[tuple, str] = {}  # fixes that did not work, not tried again
    tree = parse(text, path)
    if isinstance(tree, Finding):
        return text, [], [tree], []
    findings = check_text(text, path, opts, evidence, tree=tree, preamble=preamble)
    read_before = None
    for _ in range(MAX_ROUNDS):
        todo = [f for f in findings if opts.applies(f) and _signature(f) not in failed]
        if not todo:
            break
        if read_before is None:
            from . import unused_imports  # libcst: imported on the fix path only

            read_before = unused_imports.reads(tree)
        new, done = _apply(text, tree, todo, dropped, path, flags, failed)
        if new == text:
            break
        fixed.extend(done)
        evidence = shift_lines(evidence, text, new)  # a call keeps its ledger evidence
        text = new
        del tree  # one module's ast at a time
        tree = parse(text, path)
        if isinstance(tree, Finding):  # cannot happen: every rewritten statement compiled
            raise UnsafeRewrite(f"the rewritten file does not parse: {tree.note}")
        findings = check_text(text, path, opts, evidence, tree=tree, preamble=preamble)
    if fixed and read_before is not None and preamble is None:
        new = _drop_unused_imports(text, tree, read_before, path, flags)
        if new != text:  # lines moved: the findings left are found again where they now are
            evidence = shift_lines(evidence, text, new)
            text = new
            del tree
            tree = parse(text, path)
            if isinstance(tree, Finding):
                raise UnsafeRewrite(f"the rewritten file does not parse: {tree.note}")
            findings = check_text(text, path, opts, evidence, tree=tree, preamble=preamble)
    for f in findings:
        reason = failed.get(_signature(f))
        if reason is not None and opts.applies(f):
            f.applicability = "none"
            f.note = f"{f.note}; fix not applied: {reason}" if f.note else \
                f"fix not applied: {reason}"
    return text, fixed, findings, dropped
