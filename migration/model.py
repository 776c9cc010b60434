"""Findings and edits shared by the analysis (stdlib ``ast``) and the fixer (libcst)."""

from __future__ import annotations

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
    lines: tuple[int, ...] = ()  # other lines where a `# noqa` also applies (e.g. the call's line)
    cell: int | None = None  # notebooks: 1-based cell number; ``line`` counts within the cell
    needs: tuple[str, ...] = ()  # codes whose edits this fix shares: its hint selects them too
    #: the fix's applicability when it is held back because it shares the edits of a finding
    #: not selected (``needs`` selects it); "none" otherwise
    held: Applicability = "none"
    source: str = field(default="", compare=False, repr=False)  # the reported line's text

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

    def to_json(self) -> dict:
        """The JSON shape of the CLI contract (``cell`` only for notebook findings)."""
        out = {
            "code": self.code,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "fix_applicability": self.applicability,
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

    def not_written(self, reason: str, code: str = IO_ERROR) -> FileResult:
        """This result as it stands when its rewrite is not written: nothing was fixed, and
        a ``code`` finding says why."""
        self.findings = sorted([*self.fixed, *self.findings],
                               key=lambda f: (f.cell or 0, f.line, f.column, f.code))
        self.findings.append(Finding(code, 1, 1, "none", path=self.path,
                                     note=f"not written: {reason}"))
        self.fixed, self.new_bytes = [], None
        return self
