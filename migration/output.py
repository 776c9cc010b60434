"""Finding reports: text (ruff-like: ``concise``, one line each, is the default; ``full`` adds
the source line with carets and the fix hint), json, sarif 2.1.0, GitHub Actions annotations."""

from __future__ import annotations

import json
from collections import Counter

from compat.catalog import BY_CODE, MIGRATE_WITH, NO_FIX, rule_url

from .model import Finding, flagged_width

FORMATS = ("text", "concise", "full", "json", "sarif", "github")
#: the formats for people: a summary line follows them ("text" is "concise")
TEXT_FORMATS = ("text", "concise", "full")
_HINTS = (" " + MIGRATE_WITH, " " + NO_FIX)


def _mark(f: Finding) -> str:
    return " [*]" if f.applicability == "safe" else (" [unsafe fix]" if f.applicability == "unsafe"
                                                     else "")


def text(findings: list[Finding]) -> str:
    lines = [f"{f.path}:{f.where}: {f.code}{_mark(f)} "
             f"{f.message.removeprefix(f.code + ' ')}" for f in findings]
    return "\n".join(lines) + ("\n" if lines else "")


def full(findings: list[Finding]) -> str:
    """ruff's ``full`` text format: the concise line, then the numbered source line with a
    ``|`` gutter and ``^`` under the flagged name, then the fix command as ``= help:``."""
    blocks = []
    for f in findings:
        message, hint = _split_hint(f)
        lines = [f"{f.path}:{f.where}: {f.code}{_mark(f)} {message}"]
        if f.source:
            number = str(f.line)
            gutter = " " * len(number)
            start = max(f.column - 1, 0)
            width = flagged_width(f.source, start)
            pad = "".join(c if c == "\t" else " " for c in f.source[:start])
            lines += [f"{gutter} |", f"{number} | {f.source}",
                      f"{gutter} | {pad}{'^' * width} {f.code}", f"{gutter} |"]
        if hint:
            lines.append(f"{' ' * len(str(f.line)) if f.source else ''} = help: {hint}")
        blocks.append("\n".join(lines) + "\n\n")  # a blank line after each, as ruff
    return "".join(blocks)


def _split_hint(f: Finding) -> tuple[str, str]:
    """The finding's message without its hint (the ``Migrate with:`` command, or what to do
    without a fix), and that hint."""
    message = f.message.removeprefix(f.code + " ")
    note = f" [{f.note}]" if f.note and message.endswith(f" [{f.note}]") else ""
    body = message[:len(message) - len(note)]
    at = max(body.rfind(h) for h in _HINTS)
    if at < 0:
        return message, ""
    return body[:at] + note, body[at + 1:]


def as_json(findings: list[Finding]) -> str:
    return json.dumps([f.to_json() for f in findings], indent=2) + "\n"


def sarif(findings: list[Finding]) -> str:
    codes = sorted({f.code for f in findings} | set(BY_CODE))
    rules = [{
        "id": c,
        "shortDescription": {"text": BY_CODE[c].summary if c in BY_CODE else "syntax error"},
        "fullDescription": {"text": BY_CODE[c].changed if c in BY_CODE else "syntax error"},
        **({"helpUri": rule_url(c)} if c in BY_CODE else {}),
        "properties": {"fix": BY_CODE[c].fix if c in BY_CODE else "none"},
    } for c in codes]
    results = [{
        "ruleId": f.code,
        "level": "error" if f.code == "E999" else "warning",
        "message": {"text": f.message},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": f.path},
            "region": {"startLine": f.line, "startColumn": f.column,
                       "endLine": f.end[0], "endColumn": f.end[1]},
        }}],
        "properties": {"fix_applicability": f.applicability,
                       **({"cell": f.cell} if f.cell is not None else {})},
    } for f in findings]
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "compat.migrate", "rules": rules}},
                  "results": results}],
    }
    return json.dumps(doc, indent=2) + "\n"


def _gh_escape(s: str, prop: bool = False) -> str:
    s = s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return s.replace(":", "%3A").replace(",", "%2C") if prop else s


def github(findings: list[Finding]) -> str:
    out = []
    for f in findings:
        level = "error" if f.code == "E999" else "warning"
        props = (f"title={_gh_escape(f'compat.migrate ({f.code})', True)},"
                 f"file={_gh_escape(f.path, True)},line={f.line},col={f.column}")
        cell = f"cell {f.cell}:{f.line}:{f.column}: " if f.cell is not None else ""
        out.append(f"::{level} {props}::{_gh_escape(f'{cell}{f.code} {f.message}')}")
    return "\n".join(out) + ("\n" if out else "")


def render(fmt: str, findings: list[Finding]) -> str:
    return {"text": text, "concise": text, "full": full, "json": as_json, "sarif": sarif,
            "github": github}[fmt](findings)


def statistics(findings: list[Finding], fmt: str = "text") -> str:
    """Counts per code: text lines, or with ``fmt="json"`` a list of
    ``{code, count, fixable, message}`` (``fixable``: how many have a safe fix)."""
    counts = Counter(f.code for f in findings)
    fixable = Counter(f.code for f in findings if f.applicability == "safe")
    if fmt == "json":
        return json.dumps([{"code": code, "count": n, "fixable": fixable[code],
                            "message": BY_CODE[code].summary if code in BY_CODE
                            else "syntax error"}
                           for code, n in counts.most_common()], indent=2) + "\n"
    lines = []
    for code, n in counts.most_common():
        summary = BY_CODE[code].summary if code in BY_CODE else "syntax error"
        mark = "[*]" if fixable[code] else "   "
        lines.append(f"{n:5d}\t{code}\t{mark} {summary}")
    return "\n".join(lines) + ("\n" if lines else "")
