"""``# noqa``: which findings a comment suppresses, and ``--add-noqa`` (adding the comments that
suppress the findings left), so the two agree by construction.

A finding is suppressed by a ``# noqa`` (bare, or naming its code) on its reported line or on one
of its other lines (``Finding.lines``: the first line of the export call); for a line that cannot
end with a comment, on the end of its multi-line string or backslash continuation
(:class:`Directives`). ``--add-noqa`` puts the comment on the first of those lines that can take
it, merging the codes into a ``# noqa:`` already there.
"""

from __future__ import annotations

import bisect
import io
import re
import tokenize

from .model import SYNTAX_ERROR, Finding

NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*))?",
                  re.IGNORECASE)
_LINE_END = re.compile(r"\r\n|\r|\n")


def _codes(match: re.Match) -> set[str] | None:
    """The codes a ``# noqa`` match names (None: a bare ``# noqa``, every code)."""
    codes = match.group("codes")
    return None if not codes else {c.strip().upper() for c in codes.split(",")}


def suppresses(line: str, code: str) -> bool:
    """Whether a ``# noqa`` on ``line`` (any of them) suppresses ``code``."""
    for m in NOQA.finditer(line):
        codes = _codes(m)
        if codes is None or code in codes:
            return True
    return False


class Directives:
    """Where the ``# noqa`` comments of one module's text apply.

    A line that cannot end with a comment (it ends inside a multi-line string, or with a
    backslash continuation) takes its noqa from the next line that can: the end of that string
    or continuation, as in ruff. The text is tokenized only when it has a noqa comment at all.
    """

    def __init__(self, text: str, lines: list[str]) -> None:
        self.text, self.lines = text, lines
        self.present = NOQA.search(text) is not None
        self._comments: dict[int, int | None] | None = None
        self._sorted: list[int] = []

    @property
    def comments(self) -> dict[int, int | None]:
        """``commentable_lines`` of the text (computed once)."""
        if self._comments is None:
            self._comments = commentable_lines(self.text)
            self._sorted = sorted(self._comments)
        return self._comments

    def lines_of(self, finding: Finding) -> list[int]:
        """The 1-based lines where a ``# noqa`` applies to ``finding``: its own lines, each
        followed by the next line that can take a comment when it cannot."""
        out: list[int] = []
        for ln in (finding.line, *finding.lines):
            if not 0 < ln <= len(self.lines) or ln in out:
                continue
            out.append(ln)
            if ln not in self.comments:
                at = bisect.bisect_right(self._sorted, ln)
                if at < len(self._sorted) and self._sorted[at] not in out:
                    out.append(self._sorted[at])
        return out

    def suppressed(self, finding: Finding) -> bool:
        """Whether a ``# noqa`` on one of the finding's lines suppresses it."""
        if not self.present:
            return False
        own = [ln for ln in (finding.line, *finding.lines) if 0 < ln <= len(self.lines)]
        if any(suppresses(self.lines[ln - 1], finding.code) for ln in own):
            return True  # without tokenizing the text
        return any(suppresses(self.lines[ln - 1], finding.code)
                   for ln in self.lines_of(finding) if ln not in own)


def commentable_lines(text: str) -> dict[int, int | None]:
    """The 1-based lines whose end is outside any string and not a backslash continuation
    (where a comment may be appended without changing the code), each with the column of its
    comment (None: it has none)."""
    out: dict[int, int | None] = {}
    try:
        # the tokenize module ends lines only at \n: CR and CRLF become \n (same lines, columns)
        plain = _LINE_END.sub("\n", text)
        for tok in tokenize.generate_tokens(io.StringIO(plain).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.start[1]
            elif tok.type in (tokenize.NEWLINE, tokenize.NL):
                out.setdefault(tok.start[0], None)
    except (tokenize.TokenError, SyntaxError):
        pass  # the lines seen so far stay usable; the file parsed, so this is not expected
    return out


def add_noqa(text: str, findings: list[Finding]) -> tuple[str, int, list[Finding]]:
    """``text`` with a ``# noqa: CODES`` on the lines of ``findings`` (a file's findings that
    remain): (new text, directives added or extended, findings no line could take)."""
    pieces = _LINE_END.split(text)
    ends = _LINE_END.findall(text)
    where = Directives(text, pieces)
    ok = where.comments
    wanted: dict[int, list[str]] = {}
    placed_nowhere = []
    for f in findings:
        if f.code == SYNTAX_ERROR:
            placed_nowhere.append(f)
            continue
        line = next((ln for ln in where.lines_of(f) if ln in ok), None)
        if line is None:
            placed_nowhere.append(f)
        elif f.code not in wanted.setdefault(line, []):
            wanted[line].append(f.code)
    added = 0
    for line, codes in wanted.items():
        new = _with_codes(pieces[line - 1], [c for c in codes
                                             if not suppresses(pieces[line - 1], c)],
                          ok[line])
        if new != pieces[line - 1]:
            pieces[line - 1] = new
            added += 1
    out = "".join(p + e for p, e in zip(pieces, [*ends, ""]))
    return out, added, placed_nowhere


def _with_codes(line: str, codes: list[str], comment: int | None) -> str:
    """``line`` with ``codes`` merged into the last ``# noqa: ...`` of its comment (which starts
    at column ``comment``), or in a new ``# noqa`` at its end."""
    if not codes:
        return line
    last = None
    for m in NOQA.finditer(line):
        last = m
    if last is not None and last.group("codes") and comment is not None \
            and last.start() >= comment:
        merged = [c.strip() for c in last.group("codes").split(",")]
        merged += [c for c in codes if c not in {m.upper() for m in merged}]
        return f"{line[:last.start()]}# noqa: {', '.join(merged)}{line[last.end():]}"
    kept = line.rstrip(" \t")
    return f"{kept}  # noqa: {', '.join(codes)}"
