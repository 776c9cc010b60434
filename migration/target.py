"""``--target-torch``: a fix that would write an API the target torch lacks is held back.

The finding stays (reported, exit 1) without its fix, and its note names the API and the torch
(``compat.torch_apis`` is the table). ``fallback=`` is the other way round: torch 2.9-2.10 still
take it, so there its removal is not advised (``rules/onx2.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from compat import torch_apis

from .model import Edit, Finding

#: edit kinds whose first argument is a keyword the edit writes on the export call (``rename``:
#: the second), and those that write no code
_KEYWORD_AT = {"rename": 1, "set": 0, "add": 0, "to_kw": 1}
_NO_CODE = {"comment", "drop", "drop_import", "drop_stmt"}


def written(edits: Iterable[Edit], generated: Iterable = ()) -> tuple[set[str], str]:
    """The export-call keywords and the code that ``edits`` (and the ``generated`` module
    entries of the same fix) write."""
    keywords: set[str] = set()
    code: list[str] = []
    for e in edits:
        if e.kind in _NO_CODE:
            continue
        at = _KEYWORD_AT.get(e.kind)
        if at is not None and len(e.args) > at and isinstance(e.args[at], str):
            keywords.add(e.args[at])
        if e.kind == "dynamo_export":  # export(m, a, kwargs=kw, dynamo=True)
            keywords.add("dynamo")
        code += [a for a in e.args if isinstance(a, str)]
    for entry in generated:
        code += [entry.code, *entry.imports]
    return keywords, "\n".join(code)


def hold_back(findings: Iterable[Finding], target: torch_apis.Version) -> None:
    """Strip the fix of each finding that writes an API torch ``target`` lacks; its note says
    which and why."""
    for f in findings:
        if not f.edits:
            continue
        lacking = torch_apis.lacking(*written(f.edits, f.generated), target)
        if not lacking:
            continue
        why = "; ".join(a.why_not(target) for a in lacking)
        note = f"fix unavailable for target torch {torch_apis.shown(target)}: {why}"
        f.note = f"{f.note}; {note}" if f.note else note
        f.edits, f.applicability, f.held, f.generated = (), "none", "none", ()
