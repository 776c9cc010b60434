"""Reads ``python -m compat run`` ledgers (JSONL) into per-call-site route evidence.

Every record counts, failed ones too: a route that failed at a call site (``fallback_reason``
``"dynamo: ...; legacy: ..."`` of an ok or a failed record) is never pinned there, and a route is
pinned only from a successful record of that site.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass, field

from compat.catalog import HF_CACHE_REGISTRATION

ROUTES = ("dynamo", "legacy")
_FAILED = re.compile(r"(?:^|;\s*)(dynamo|legacy):\s")


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in os.path.normpath(path).replace("\\", "/").split("/") if p not in ("", "."))


def shim_only(record: dict) -> list[str]:
    """What the shim did on a successful torch.export-route record that plain torch cannot: the
    transformers cache registration (dynamo/hf_caches.py) and an ONX002 opset it could not reach."""
    out = []
    for t in record.get("translations") or ():
        if not isinstance(t, dict) or not isinstance(t.get("action"), str):
            continue
        if t.get("code") == "ONX001" and HF_CACHE_REGISTRATION[1] in t["action"]:
            out.append("the shim registered transformers' cache classes for torch.export")
        elif t.get("code") == "ONX002":
            out.append(f"the shim wrote opset_version={t['action'].split(';', 1)[0]} at another opset")
    return out


def failed_routes(record: dict) -> set[str]:
    """Routes the record shows failing (from its ``fallback_reason``)."""
    reason = record.get("fallback_reason")
    found = set(_FAILED.findall(reason)) if isinstance(reason, str) else set()
    if record.get("status", "ok") != "ok" and record.get("route_requested") in ROUTES \
            and not found and record.get("route_taken") is None and reason:
        found.add(record["route_requested"])
    return found


@dataclass
class SiteEvidence:
    """What every record of one call site says: routes that exported, routes that failed."""

    ok: dict[str, dict] = field(default_factory=dict)  # route -> its latest successful record
    failed: set[str] = field(default_factory=set)
    shim_only: set[str] = field(default_factory=set)  # of any torch.export-route success here

    def add(self, record: dict) -> None:
        self.failed |= failed_routes(record)
        route = record.get("route_taken")
        if record.get("status", "ok") == "ok" and route in ROUTES:
            self.ok[route] = record
            if route == "dynamo":
                self.shim_only.update(shim_only(record))

    def verdict(self) -> dict:
        """A record-shaped verdict: ``route_taken`` is the route to pin (None: pin nothing from
        the ledger), ``failed_routes`` the routes never to pin. A route that failed here is never
        chosen; a site that exported on both routes (in different runs) counts as legacy."""
        usable = [r for r in ROUTES if r in self.ok and r not in self.failed]
        chosen = "legacy" if "legacy" in usable else usable[0] if usable else None
        base = dict(self.ok[chosen]) if chosen else {"route_taken": None, "status": "failed"}
        base["route_taken"] = chosen
        base["failed_routes"] = sorted(self.failed)
        if chosen == "dynamo" and self.shim_only:  # one call site, many models: any of them
            base["shim_only"] = sorted(self.shim_only)
        return base


@dataclass
class LedgerIndex:
    """Evidence by call site (``(path parts, line)``)."""

    sites: dict[tuple[tuple[str, ...], int], SiteEvidence] = field(default_factory=dict)
    bases: tuple[str, ...] = ()  # folders relative call_site paths may be relative to
    _by_name: dict | None = field(default=None, repr=False, compare=False)

    def add(self, record: dict, base: str) -> None:
        site = str(record.get("call_site") or "")
        path, sep, line = site.rpartition(":")
        if not sep or not line.isdigit():
            return
        if record.get("route_taken") not in ROUTES and not failed_routes(record) \
                and record.get("status", "ok") == "ok":
            return
        if not os.path.isabs(path):
            path = os.path.join(base, path) if os.path.exists(os.path.join(base, path)) else path
        key = (_parts(os.path.realpath(path) if os.path.isabs(path) else path), int(line))
        self._by_name = None
        self.sites.setdefault(key, SiteEvidence()).add(record)

    def evidence(self, path: str) -> dict[int, dict]:
        """Verdicts for ``path`` by line, matched by the longest common path suffix.

        A ledger written elsewhere (CI: ``/builds/x/repo/src/a.py``) still matches a checkout
        (``/home/u/repo/src/a.py``): the file name and its parent folder (when both sides have
        one) must agree; the longest agreeing suffix wins for each line.
        """
        real = _parts(os.path.realpath(path))
        if not real:
            return {}
        best: dict[int, tuple[int, SiteEvidence]] = {}
        for (parts, line), ev in self.by_name().get(real[-1], ()):
            n = 0
            for a, b in zip(reversed(parts), reversed(real)):
                if a != b:
                    break
                n += 1
            if n < min(2, len(parts), len(real)):
                continue
            if line not in best or n > best[line][0]:
                best[line] = (n, ev)
        return {line: ev.verdict() for line, (_, ev) in best.items()}

    def by_name(self) -> dict[str, list[tuple[tuple[tuple[str, ...], int], SiteEvidence]]]:
        """Sites grouped by file name (built once)."""
        if self._by_name is None:
            self._by_name = {}
            for key, ev in self.sites.items():
                if key[0]:
                    self._by_name.setdefault(key[0][-1], []).append((key, ev))
        return self._by_name


def shift_lines(evidence: dict[int, dict] | None, old: str, new: str) -> dict[int, dict] | None:
    """``evidence`` keyed by the lines of ``new``, a rewrite of ``old`` (lines inserted above a
    call move its evidence down; a rewritten call keeps its first line's evidence)."""
    if not evidence:
        return evidence
    a, b = old.splitlines(), new.splitlines()
    moved: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for i in range(i1, i2):
            if tag == "equal":
                moved[i + 1] = j1 + (i - i1) + 1
            elif tag == "replace" and i + 1 in evidence:  # the most similar rewritten line
                moved[i + 1] = 1 + max(range(j1, j2), key=lambda j: difflib.SequenceMatcher(
                    None, a[i], b[j], autojunk=False).ratio())
    return {moved[line]: rec for line, rec in evidence.items() if line in moved}


def read(paths: list[str]) -> LedgerIndex:
    """Load ledgers; malformed lines are skipped (a ledger may be appended to while read)."""
    index = LedgerIndex()
    for p in paths:
        base = os.getcwd()
        with open(p, encoding="utf-8") as fh:
            for raw in fh:
                try:
                    rec = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    index.add(rec, base)
    return index
