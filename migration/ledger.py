"""Reads ``python -m compat run`` ledgers (JSONL) into per-call-site route evidence."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in os.path.normpath(path).replace("\\", "/").split("/") if p not in ("", "."))


@dataclass
class LedgerIndex:
    """Records by call site; a site that ever needed the TorchScript route counts as legacy."""

    sites: dict[tuple[tuple[str, ...], int], dict] = field(default_factory=dict)
    bases: tuple[str, ...] = ()  # folders relative call_site paths may be relative to
    _by_name: dict | None = field(default=None, repr=False, compare=False)

    def add(self, record: dict, base: str) -> None:
        site = str(record.get("call_site") or "")
        path, sep, line = site.rpartition(":")
        if not sep or not line.isdigit() or record.get("status", "ok") != "ok":
            return
        if record.get("route_taken") not in ("dynamo", "legacy"):
            return
        if not os.path.isabs(path):
            path = os.path.join(base, path) if os.path.exists(os.path.join(base, path)) else path
        key = (_parts(os.path.realpath(path) if os.path.isabs(path) else path), int(line))
        old = self.sites.get(key)
        self._by_name = None
        if old is None or (old.get("route_taken") == "dynamo" and record["route_taken"] == "legacy"):
            self.sites[key] = record

    def evidence(self, path: str) -> dict[int, dict]:
        """Records for ``path`` by line, matched by the longest common path suffix.

        A ledger written elsewhere (CI: ``/builds/x/repo/src/a.py``) still matches a checkout
        (``/home/u/repo/src/a.py``): the file name and its parent folder (when both sides have
        one) must agree; the longest agreeing suffix wins for each line.
        """
        real = _parts(os.path.realpath(path))
        if not real:
            return {}
        best: dict[int, tuple[int, dict]] = {}
        for (parts, line), rec in self.by_name().get(real[-1], ()):
            n = 0
            for a, b in zip(reversed(parts), reversed(real)):
                if a != b:
                    break
                n += 1
            if n < min(2, len(parts), len(real)):
                continue
            if line not in best or n > best[line][0]:
                best[line] = (n, rec)
        return {line: rec for line, (_, rec) in best.items()}

    def by_name(self) -> dict[str, list[tuple[tuple[tuple[str, ...], int], dict]]]:
        """Sites grouped by file name (built once)."""
        if self._by_name is None:
            self._by_name = {}
            for key, rec in self.sites.items():
                if key[0]:
                    self._by_name.setdefault(key[0][-1], []).append((key, rec))
        return self._by_name


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
