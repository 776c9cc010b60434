"""Edits applied to the smallest enclosing top-level statements, spliced back by line offsets.

The analysis sees the whole module (stdlib ``ast``); libcst only ever sees the top-level
statements holding an edit, so the work of a rewrite grows with the edited code, not the file,
and text outside those statements is byte-identical by construction. Each rewritten piece is
compiled and verified (:mod:`migration.verify`) before it is spliced back.
"""

from __future__ import annotations
import __future__

import ast
import bisect
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from .import_order import insertions
from .model import Edit, Key
from .verify import Region, lost, split_lines


class UnsafeRewrite(Exception):
    """A rewrite would change code outside its edits (a fixer bug): nothing is written."""


class FixFailed(Exception):
    """A piece could not be rewritten (libcst error, or the result does not compile)."""


@dataclass
class Piece:
    """A run of top-level statements (whole lines ``first``..``last``) and its edits."""

    first: int
    last: int
    stmts: list[ast.stmt]
    edits: list[Edit] = field(default_factory=list)


class Layout:
    """Line offsets and top-level statement groups of one module."""

    def __init__(self, text: str, tree: ast.Module) -> None:
        self.text = text
        self.tree = tree
        self.lines = split_lines(text)
        self.offsets = list(accumulate(map(len, self.lines), initial=0))
        self.groups: list[Piece] = []  # statements sharing a line form one group
        for stmt in tree.body:
            decorators = getattr(stmt, "decorator_list", None) or []
            first = min([stmt.lineno, *(d.lineno for d in decorators)])
            last = stmt.end_lineno or stmt.lineno
            if self.groups and first <= self.groups[-1].last:
                group = self.groups[-1]
                group.last = max(group.last, last)
                group.stmts.append(stmt)
            else:
                self.groups.append(Piece(first, last, [stmt]))
        self._starts = [g.first for g in self.groups]
        first = self.lines[0] if self.lines else ""
        self.newline = first[len(first.rstrip("\r\n")):] or "\n"  # the file's line ending

    def group_of(self, line: int) -> int:
        i = bisect.bisect_right(self._starts, line) - 1
        if i < 0 or self.groups[i].last < line:
            raise FixFailed(f"line {line} is not inside a statement")
        return i

    def span(self, first: int, last: int) -> tuple[int, int]:
        return self.offsets[first - 1], self.offsets[min(last, len(self.lines))]

    def future_flags(self) -> int:
        flags = 0
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                for alias in stmt.names:
                    feature = getattr(__future__, alias.name, None)
                    flags |= getattr(feature, "compiler_flag", 0)
            elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                break
        return flags


def _char_col(line: str, col: int) -> int:
    return col if line.isascii() else len(line.encode("utf-8")[:col].decode("utf-8", "replace"))


def _targets(layout: Layout, piece: Piece) -> dict[Key, list[ast.AST]]:
    """The nodes edits can target in ``piece``, by their (line, character column) key."""
    out: dict[Key, list[ast.AST]] = {}
    for stmt in piece.stmts:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Call, ast.With, ast.Import, ast.ImportFrom, ast.Expr)):
                line = layout.lines[node.lineno - 1]
                out.setdefault((node.lineno, _char_col(line, node.col_offset)), []).append(node)
    return out


def _end(layout: Layout, node: ast.AST) -> tuple[int, int]:
    line = node.end_lineno  # type: ignore[attr-defined]
    return line, _char_col(layout.lines[line - 1], node.end_col_offset)  # type: ignore[attr-defined]


def _colon(layout: Layout, node: ast.With) -> tuple[int, int]:
    """The position of the ``:`` ending a ``with`` header."""
    line, col = _end(layout, node.items[-1].optional_vars or node.items[-1].context_expr)
    while line <= len(layout.lines):
        text = layout.lines[line - 1]
        while col < len(text):
            ch = text[col]
            if ch == ":":
                return line, col
            if ch == "#":
                break
            col += 1
        line, col = line + 1, 0
    raise FixFailed("no colon after the with items")


def _last_line_with_trailing_comments(layout: Layout, last: int, limit: int) -> int:
    while last < limit:
        text = layout.lines[last].strip()
        if text and not text.startswith("#"):
            break
        last += 1
    return last


def regions(layout: Layout, piece: Piece) -> list[Region]:
    """What the edits of ``piece`` may change, in the piece's own line numbers."""
    nodes = _targets(layout, piece)
    shift = piece.first - 1
    out: list[Region] = []
    for e in piece.edits:
        if e.kind in ("before", "after", "follow", "comment", "import"):
            continue  # insertions: nothing of the old text goes
        wanted = {"with_unwrap": ast.With, "importfrom_module": ast.ImportFrom,
                  "drop_import": (ast.Import, ast.ImportFrom),
                  "drop_stmt": ast.Expr}.get(e.kind, ast.Call)
        key = (e.key[0] + shift, e.key[1])
        node = next((n for n in nodes.get(key, ()) if isinstance(n, wanted)), None)
        if node is None:
            raise FixFailed(f"no {getattr(wanted, '__name__', 'import')} at line {key[0]}")
        start = (node.lineno - shift, _char_col(layout.lines[node.lineno - 1], node.col_offset))  # type: ignore[attr-defined]
        if isinstance(node, ast.With):
            colon = _colon(layout, node)
            body_end = _last_line_with_trailing_comments(layout, node.end_lineno, piece.last)  # type: ignore[arg-type]
            out.append(Region(start, (colon[0] - shift, colon[1] + 1),
                              (colon[0] + 1 - shift, body_end - shift)))
        else:
            end = _end(layout, node)
            out.append(Region(start, (end[0] - shift, end[1])))
    return out


def plan(layout: Layout, edits: Iterable[Edit]) -> tuple[list[Piece], list[str]]:
    """The pieces holding ``edits`` (keys made relative to each piece) and the imports to add."""
    pieces: dict[int, Piece] = {}
    imports: list[str] = []
    for e in edits:
        if e.kind == "import":
            if e.args[0] not in imports:
                imports.append(e.args[0])
            continue
        i = layout.group_of(e.key[0])
        g = layout.groups[i]
        piece = pieces.setdefault(i, Piece(g.first, g.last, g.stmts))
        moved = Edit(e.kind, (e.key[0] - g.first + 1, e.key[1]), e.args)
        if moved not in piece.edits:
            piece.edits.append(moved)
    return [pieces[i] for i in sorted(pieces)], imports


def rewrite_piece(layout: Layout, piece: Piece, path: str, flags: int) -> str:
    """The new text of ``piece``: libcst on the piece alone, then compiled and verified.

    Raises FixFailed when the edits fail or the result does not compile, UnsafeRewrite when the
    result loses code or comments outside the edited spans.
    """
    start, end = layout.span(piece.first, piece.last)
    old = layout.text[start:end]
    gone: list[str] = []  # comments that went with their dropped arguments
    try:
        from .fixer import apply_edits  # libcst: a check never imports it

        new = apply_edits(old, piece.edits, newline=layout.newline, dropped=gone)
    except RecursionError as exc:
        raise FixFailed("the statement is nested too deeply to rewrite") from exc
    except Exception as exc:
        raise FixFailed(f"{type(exc).__name__}: {exc}") from exc
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(new, path, "exec", flags=flags | layout.future_flags(), dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        msg = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
        raise FixFailed(f"the result does not compile ({msg})") from exc
    problem = lost(old, new, regions(layout, piece), gone)
    if problem is not None:
        raise UnsafeRewrite(f"lines {piece.first}-{piece.last}: {problem}")
    return new


def splice(layout: Layout, new_pieces: Sequence[tuple[Piece, str]], imports: Sequence[str],
           path: str, beside: Iterable[str] = ()) -> str:
    """The module with each piece replaced by its new text and ``imports`` inserted where
    ruff's isort puts them (:mod:`migration.import_order`; ``beside``: the modules to be written
    beside the file)."""
    cuts: list[tuple[int, int, str]] = [(*layout.span(p.first, p.last), new)
                                        for p, new in new_pieces]
    cuts += [(at, at, text) for at, text in insertions(layout, imports, path, beside)]
    cuts.sort(key=lambda c: (c[0], c[1]))
    out, pos = [], 0
    for start, end, new in cuts:
        out.append(layout.text[pos:start])
        out.append(new)
        pos = end
    out.append(layout.text[pos:])
    return "".join(out)
