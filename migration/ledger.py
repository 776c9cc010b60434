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
        if old is None or (old.get("route_taken") == "dynamo" and record["route_taken"] == "legacy"):
            self.sites[key] = record

    def evidence(self, path: str) -> dict[int, dict]:
        """Records for ``path`` by line, matched by resolved path or by a relative-path suffix."""
        real = _parts(os.path.realpath(path))
        out: dict[int, dict] = {}
        for (parts, line), rec in self.sites.items():
            if parts and real[-len(parts):] == parts:
                out[line] = rec
        return out


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
