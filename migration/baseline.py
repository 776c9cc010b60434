"""The baseline ratchet: ``--baseline FILE`` records today's legacy usages; ``--check
--baseline FILE`` (or config ``baseline``) then fails only on usages not in it, as ruff's and
mypy's baselines do, and says how many remain.

A usage is matched by file (relative to the baseline's folder), code and the text of its line,
not its line number, so edits elsewhere in a file do not make old usages new. Counts are kept
per key: a second copy of a recorded line is new.
"""

from __future__ import annotations

import datetime
import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from .model import IO_ERROR, SYNTAX_ERROR, Finding

VERSION = 1
Key = tuple[str, str, str]


def _key(f: Finding, folder: str) -> Key:
    rel = os.path.relpath(os.path.abspath(f.path), folder) if f.path not in ("", "-") else f.path
    return rel.replace(os.sep, "/"), f.code, " ".join(f.source.split())


def usages(findings: Iterable[Finding]) -> list[Finding]:
    """The findings a baseline counts: legacy usages, not syntax or I/O errors."""
    return [f for f in findings if f.code not in (SYNTAX_ERROR, IO_ERROR)]


def record(path: str, findings: Iterable[Finding]) -> int:
    """Write the baseline (atomically); returns how many usages it holds."""
    folder = os.path.dirname(os.path.abspath(path))
    counts = Counter(_key(f, folder) for f in usages(findings))
    doc = {"version": VERSION, "tool": "compat.migrate",
           "recorded": datetime.date.today().isoformat(),
           "usages": [{"path": p, "code": c, "source": s, "count": n}
                      for (p, c, s), n in sorted(counts.items())]}
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)
    return sum(counts.values())


@dataclass
class Comparison:
    new: list[Finding]  # not in the baseline: what --check fails on
    remaining: int  # baselined usages still in the code
    fixed: int  # baselined usages gone since it was recorded
    recorded: str  # the baseline's date


def load(path: str) -> tuple[Counter[Key], str]:
    """The baseline's counts and date; ValueError when it is not a baseline."""
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("usages"), list):
        raise ValueError(f"{path} is not a compat.migrate baseline (version {VERSION})")
    counts: Counter[Key] = Counter()
    for u in doc["usages"]:
        counts[(str(u["path"]), str(u["code"]), str(u["source"]))] += int(u.get("count", 1))
    return counts, str(doc.get("recorded") or "?")


def compare(path: str, findings: Iterable[Finding]) -> Comparison:
    """Today's findings against the baseline at ``path``."""
    base, recorded = load(path)
    folder = os.path.dirname(os.path.abspath(path))
    left = Counter(base)
    new = []
    for f in usages(findings):
        key = _key(f, folder)
        if left[key] > 0:
            left[key] -= 1
        else:
            new.append(f)
    total = sum(base.values())
    fixed = sum(left.values())
    return Comparison(new, total - fixed, fixed, recorded)
