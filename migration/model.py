"""Findings and edits shared by the analysis (stdlib ``ast``) and the fixer (libcst)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from compat.catalog import BY_CODE

Applicability = Literal["safe", "unsafe", "none"]
Key = tuple[int, int]  # (1-based line, 0-based character column) of the node an edit targets

SYNTAX_ERROR = "E999"
IO_ERROR = "E902"  # a rewrite that may not be written (read-only file, link out of the tree)
SAFETY_CHECK = "E903"  # a rewrite that would change code outside its edits (not written)


@dataclass(frozen=True)
class Edit:
    """One primitive change at the node starting at ``key``; see ``fixer.py`` for the kinds."""

    kind: str
    key: Key
    args: tuple = ()


@dataclass
class Finding:
    """A legacy usage at a place in a file, with the edits that migrate it (if any)."""

    code: str
    line: int
    column: int  # 1-based, like ruff
    applicability: Applicability = "none"
    edits: tuple[Edit, ...] = ()
    note: str = ""
    path: str = ""
    lines: tuple[int, ...] = ()  # other lines where a noqa comment also applies (e.g. the call's line)
    cell: int | None = None  # notebooks: 1-based cell number; ``line`` counts within the cell
    needs: tuple[str, ...] = ()  # codes whose edits this fix shares: its hint selects them too
    #: the fix's applicability when it is held back because it shares the edits of a finding
    #: not selected (``needs`` selects it); "none" otherwise
    held: Applicability = "none"
    source: str = field(default="", compare=False, repr=False)  # the reported line's text
    #: ruff's fix edits (``{content, location, end_location}``), set for the JSON output
    text_edits: tuple[dict, ...] = field(default=(), compare=False, repr=False)
    #: definitions this fix puts in the generated module beside the file (``generated.Entry``)
    generated: tuple = field(default=(), compare=False, repr=False)

    @property
    def message(self) -> str:
        """The catalog's message (so runtime warnings and findings agree), plus a site note;
        without the leading code (every format shows ``code`` on its own). Its hint is the
        command that applies this finding's fix, as printed, or what to do without one."""
        entry = BY_CODE.get(self.code)
        fix = self.applicability if self.edits else self.held
        select = ",".join((*self.needs, self.code)) if fix != "none" else None
        base = entry.message(self.path or "PATH", select, fix).removeprefix(self.code + " ") \
            if entry else self.note
        if entry and self.note:
            return f"{base} [{self.note}]"
        return base

    @property
    def where(self) -> str:
        """``line:col``, or ``cell N:line:col`` in a notebook (ruff's convention)."""
        at = f"{self.line}:{self.column}"
        return f"cell {self.cell}:{at}" if self.cell is not None else at

    @property
    def end(self) -> tuple[int, int]:
        """(row, column) just after the flagged code on its line (ruff's ``end_location``)."""
        if not self.source:
            return self.line, self.column
        return self.line, self.column + flagged_width(self.source, max(self.column - 1, 0))

    def to_json(self) -> dict:
        """The JSON shape of the CLI contract (``cell`` only for notebook findings)."""
        from compat.catalog import rule_url

        end_line, end_column = self.end
        applies = self.applicability if self.edits else "none"
        out = {
            "code": self.code,
            "path": self.path,
            "filename": self.path,
            "line": self.line,
            "column": self.column,
            "location": {"row": self.line, "column": self.column},
            "end_location": {"row": end_line, "column": end_column},
            "message": self.message,
            "fix_applicability": self.applicability,
            "fix": None if applies == "none" else {
                "applicability": applies, "message": f"{self.code}: {BY_CODE[self.code].replacement}"
                if self.code in BY_CODE else "", "edits": list(self.text_edits)},
            "url": rule_url(self.code) if self.code in BY_CODE else None,
            "noqa_row": self.line,
        }
        if self.cell is not None:
            out["cell"] = self.cell
        return out


@dataclass
class FileResult:
    """What processing one file produced."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)
    new_bytes: bytes | None = None  # set when the file changes
    old_bytes: bytes | None = None
    error: str | None = None  # internal error (exit 2)
    dropped: list[str] = field(default_factory=list)  # fixes dropped because they broke the file
    noqa_added: int = 0  # --add-noqa: directives added or extended
    #: the generated module beside the file (``generated.py``): its path and new text, written
    #: before the file that imports it
    generated: dict[str, str] = field(default_factory=dict)

    def not_written(self, reason: str, code: str = IO_ERROR) -> FileResult:
        """This result as it stands when its rewrite is not written: nothing was fixed, and
        a ``code`` finding says why."""
        self.findings = sorted([*self.fixed, *self.findings],
                               key=lambda f: (f.cell or 0, f.line, f.column, f.code))
        self.findings.append(Finding(code, 1, 1, "none", path=self.path,
                                     note=f"not written: {reason}"))
        self.fixed, self.new_bytes, self.generated = [], None, {}
        return self


_WORD = re.compile(r"[\w.]+")
_OPEN, _CLOSE = "([{", ")]}"


def flagged_width(line: str, start: int) -> int:
    """How many ``^`` mark the flagged code at ``start``: a dotted name, a bracketed literal
    or a string when it ends on this line, else one character."""
    word = _WORD.match(line, start)
    if word:
        return len(word.group())
    depth, quote, i = 0, "", start
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
                if depth == 0:
                    return i - start + 1
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth <= 0:
                return i - start + 1 if depth == 0 else 1
        elif depth == 0:
            return 1
        i += 1
    return 1
