"""Checks a rewrite before it is written: every line outside the edited spans survives.

Lines are counted as Python's tokenizer counts them (only ``\\n``, ``\\r\\n`` and ``\\r`` end a
line; ``str.splitlines()`` also splits at form feeds, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028/9).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

Pos = tuple[int, int]  # (1-based line, 0-based character column)
_LINE_END = re.compile(r"\r\n|\n|\r")
_SKIP = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT,
         tokenize.ENDMARKER}


def split_lines(text: str) -> list[str]:
    """``text``'s lines with their endings, split where the tokenizer splits."""
    out, start = [], 0
    for m in _LINE_END.finditer(text):
        out.append(text[start:m.end()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


@dataclass(frozen=True)
class Region:
    """What an edit may change in the old text: code between ``start`` and ``end`` (inclusive
    lines touched count as edited), and lines ``dedent`` (first, last) that may lose
    indentation (the body of an unwrapped ``with``)."""

    start: Pos
    end: Pos
    dedent: tuple[int, int] | None = None


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    # the pure-Python tokenizer knows only \n and \r\n: a lone \r becomes \n (columns and line
    # numbers stay the same)
    norm = _LINE_END.sub("\n", text)
    return list(tokenize.generate_tokens(io.StringIO(norm).readline))


def comments(text: str) -> list[str]:
    """The comments of ``text``, in order."""
    return [t.string for t in _tokens(text) if t.type == tokenize.COMMENT]


def _inside(pos: Pos, regions: Sequence[Region]) -> bool:
    return any(r.start <= pos < r.end for r in regions)


def _subsequence(needle: list[tuple[int, str]], hay: list[tuple[int, str]]) -> int | None:
    """Index in ``needle`` of the first item not found in order in ``hay`` (None: all found)."""
    j = 0
    for i, item in enumerate(needle):
        while j < len(hay) and hay[j] != item:
            j += 1
        if j == len(hay):
            return i
        j += 1
    return None


def _same(old: str, new: str, dedent: bool) -> bool:
    if old == new:
        return True
    return dedent and old.endswith(new) and not old[:len(old) - len(new)].strip(" \t\x0c")


def lost(old: str, new: str, regions: Sequence[Region], dropped: Sequence[str] = ()
         ) -> str | None:
    """None when ``new`` keeps everything of ``old`` outside ``regions``; else what it lost.

    Checked: every line not touched by a region appears in ``new`` unchanged and in order (lines
    of a region's ``dedent`` range may lose leading whitespace), every token outside the regions
    appears in order, and every comment of ``old`` is still in ``new`` but those ``dropped``
    with their arguments, which must lie inside a region.
    """
    try:
        old_tokens, new_tokens = _tokens(old), _tokens(new)
    except (tokenize.TokenError, SyntaxError) as exc:
        return f"cannot tokenize: {exc}"
    inside = Counter(t.string for t in old_tokens
                     if t.type == tokenize.COMMENT and _inside(t.start, regions))
    allowed = Counter(dropped) & inside
    missing = Counter(t.string for t in old_tokens if t.type == tokenize.COMMENT) - Counter(
        t.string for t in new_tokens if t.type == tokenize.COMMENT) - allowed
    if missing:
        return f"comment lost: {next(iter(missing))!r}"
    keep = [(t.type, t.string) for t in old_tokens
            if t.type not in _SKIP and not _inside(t.start, regions)]
    at = _subsequence(keep, [(t.type, t.string) for t in new_tokens if t.type not in _SKIP])
    if at is not None:
        return f"code lost: {keep[at][1]!r}"
    edited = {n for r in regions for n in range(r.start[0], r.end[0] + 1)}
    dedent = {n for r in regions if r.dedent for n in range(r.dedent[0], r.dedent[1] + 1)}
    old_lines, new_lines = split_lines(old), split_lines(new)
    runs: list[list[int]] = []
    for n in range(1, len(old_lines) + 1):
        if n in edited:
            continue
        if runs and runs[-1][-1] == n - 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    pos = 0
    for run in runs:
        while pos + len(run) <= len(new_lines) and not all(
                _same(old_lines[n - 1], new_lines[pos + k], n in dedent)
                for k, n in enumerate(run)):
            pos += 1
        if pos + len(run) > len(new_lines):
            return f"line {run[0]} lost or changed: {old_lines[run[0] - 1].rstrip()!r}"
        pos += len(run)
    return None
