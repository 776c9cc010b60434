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

from compat.catalog import DRAFT_DEFERRED, HF_CACHE_REGISTRATION, SHIM_ONLY_TRANSLATIONS
from compat.files import find_project_root

ROUTES = ("dynamo", "legacy")
#: how ``shim_only`` says the shim registered transformers' cache classes
CACHES = "the shim registered transformers' cache classes for torch.export"
_FAILED = re.compile(r"(?:^|;\s*)(dynamo|legacy):\s")


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in os.path.normpath(path).replace("\\", "/").split("/") if p not in ("", "."))


def shim_only(record: dict) -> list[str]:
    """What the shim did on a successful torch.export-route record that plain torch cannot: the
    transformers cache registration (dynamo/hf_caches.py), an ONX002 opset it could not reach, a
    draft capture that baked data-dependent branches (``baked``) and the translations the catalog
    lists as the shim's own (``SHIM_ONLY_TRANSLATIONS``)."""
    out = []
    if record.get("baked"):  # torch.onnx.export(dynamo=True) stops at these data-dependent guards
        out.append("the shim baked data-dependent branches with torch.export.draft_export")
    for t in record.get("translations") or ():
        if not isinstance(t, dict) or not isinstance(t.get("action"), str):
            continue
        if t.get("code") == "ONX001" and HF_CACHE_REGISTRATION[1] in t["action"]:
            out.append(CACHES)
        elif t.get("code") == "ONX002":
            out.append(f"the shim wrote opset_version={t['action'].split(';', 1)[0]} at another opset")
        else:
            out += [why for option, start, why in SHIM_ONLY_TRANSLATIONS
                    if t.get("option") == option and t["action"].startswith(start)]
    return list(dict.fromkeys(out))


def after_deferral(record: dict) -> bool:
    """The record's TorchScript export came after auto deferred the torch.export route's draft
    capture: it says nothing of what that route does (not a failure of it either)."""
    return DRAFT_DEFERRED in str(record.get("fallback_reason") or "")


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
    records: list[dict] = field(default_factory=list)  # every record, for migration/evidence.py
    #: every TorchScript-route success here came after auto deferred the draft capture
    legacy_by_deferral: bool = True

    def add(self, record: dict) -> None:
        self.records.append(record)
        deferred = after_deferral(record)
        # a deferred draft capture is no failure of the torch.export route: it was not finished
        self.failed |= failed_routes(record) - ({"dynamo"} if deferred else set())
        route = record.get("route_taken")
        if record.get("status", "ok") == "ok" and route in ROUTES:
            self.ok[route] = record
            if route == "legacy" and not deferred:
                self.legacy_by_deferral = False
            if route == "dynamo":
                self.shim_only.update(shim_only(record))

    def verdict(self) -> dict:
        """A record-shaped verdict: ``route_taken`` is the route to pin (None: pin nothing from
        the ledger), ``failed_routes`` the routes never to pin. A route that failed here is never
        chosen; a site that exported on both routes (in different runs) counts as legacy, unless
        its TorchScript exports came only after auto deferred the draft capture (``compat run
        --route dynamo`` then recorded what the torch.export route does). ``draft_deferred``:
        the TorchScript route is chosen, and only from such exports."""
        usable = [r for r in ROUTES if r in self.ok and r not in self.failed]
        if "dynamo" in usable and self.legacy_by_deferral:
            usable = [r for r in usable if r != "legacy"]
        chosen = "legacy" if "legacy" in usable else usable[0] if usable else None
        base = dict(self.ok[chosen]) if chosen else {"route_taken": None, "status": "failed"}
        base["route_taken"] = chosen
        base["failed_routes"] = sorted(self.failed)
        base["draft_deferred"] = chosen == "legacy" and self.legacy_by_deferral
        if chosen == "dynamo" and self.shim_only:  # one call site, many models: any of them
            base["shim_only"] = sorted(self.shim_only)
        base["records"] = list(self.records)
        return base


@dataclass
class LedgerIndex:
    """Evidence by call site (``(path parts, line)``).

    A call site is matched to a file being migrated relative to its project root first (the
    record's ``call_site_rel``, written since the ledger learnt it, or the recorded path's own
    project root where that path still exists), then by the longest common path suffix. Records
    of ``compat run --observe`` (plain torch running the migrated code) are not evidence.
    """

    sites: dict[tuple[tuple[str, ...], int], SiteEvidence] = field(default_factory=dict)
    bases: tuple[str, ...] = ()  # folders relative call_site paths may be relative to
    #: the folders being migrated (a file without a pyproject.toml / .git above it counts its
    #: path from the one holding it)
    tree_roots: tuple[str, ...] = ()
    rels: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)  # parts -> rel parts
    roots: dict[str, int] = field(default_factory=dict)  # the ledger's project roots (or folders)
    _by_name: dict | None = field(default=None, repr=False, compare=False)
    _marked: dict[str, str | None] = field(default_factory=dict, repr=False, compare=False)

    def add(self, record: dict, base: str) -> None:
        site = str(record.get("call_site") or "")
        path, sep, line = site.rpartition(":")
        if not sep or not line.isdigit() or record.get("mode") == "observe":
            return
        if record.get("route_taken") not in ROUTES and not failed_routes(record) \
                and record.get("status", "ok") == "ok":
            return
        if not os.path.isabs(path):
            path = os.path.join(base, path) if os.path.exists(os.path.join(base, path)) else path
        parts = _parts(os.path.realpath(path) if os.path.isabs(path) else path)
        key = (parts, int(line))
        self._by_name = None
        self.sites.setdefault(key, SiteEvidence()).add(record)
        rel, root = _recorded_rel(record, path)
        if rel:
            self.rels.setdefault(parts, rel)
        root = root or (os.path.dirname(path) if os.path.isabs(path) else None)
        if root:
            self.roots[root] = self.roots.get(root, 0) + 1

    def root_of(self, path: str) -> str:
        """The project root of a file being migrated: its nearest pyproject.toml / .git folder,
        else the folder being migrated that holds it, else its own folder."""
        real = os.path.realpath(path)
        folder = os.path.dirname(real)
        if folder not in self._marked:  # one walk up per folder, not per file
            self._marked[folder] = find_project_root(folder)
        found = self._marked[folder]
        if found is not None:
            return found
        holding = [r for r in self.tree_roots if _under(real, os.path.realpath(r))]
        return os.path.realpath(max(holding, key=len)) if holding else os.path.dirname(real)

    def evidence(self, path: str) -> dict[int, dict]:
        """Verdicts for ``path`` by line.

        The recorded path relative to its project root equal to ``path``'s wins; else the
        recorded relative path as a suffix of ``path``; else the longest common suffix of the
        absolute paths, where the file name and its parent folder (when both sides have one)
        must agree (a ledger written by CI, ``/builds/x/repo/src/a.py``, matches a checkout,
        ``/home/u/repo/src/a.py``).
        """
        real = _parts(os.path.realpath(path))
        if not real:
            return {}
        here = _parts(os.path.relpath(os.path.realpath(path), self.root_of(path)))
        best: dict[int, tuple[int, SiteEvidence]] = {}
        for (parts, line), ev in self.by_name().get(real[-1], ()):
            score = _score(parts, self.rels.get(parts), real, here)
            if score is None:
                continue
            if line not in best or score > best[line][0]:
                best[line] = (score, ev)
        return {line: ev.verdict() for line, (_, ev) in best.items()}

    def describes(self, files: list[str]) -> bool:
        """True when a recorded call site is one of ``files`` or a file of their project roots
        (a ledger of this tree, even if the files given now hold none of its calls)."""
        if any(self.evidence(f) for f in files):
            return True
        roots = {self.root_of(f) for f in files}
        for parts, _ in self.sites:
            rel = self.rels.get(parts)
            for root in roots:
                if rel and os.path.isfile(os.path.join(root, *rel)):
                    return True
                absolute = os.sep + os.path.join(*parts) if parts else ""
                if os.path.isfile(absolute) and _under(absolute, root):
                    return True
        return False

    def by_name(self) -> dict[str, list[tuple[tuple[tuple[str, ...], int], SiteEvidence]]]:
        """Sites grouped by file name (built once)."""
        if self._by_name is None:
            self._by_name = {}
            for key, ev in self.sites.items():
                if key[0]:
                    self._by_name.setdefault(key[0][-1], []).append((key, ev))
        return self._by_name


def _under(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:
        return False


def _suffix(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(reversed(a), reversed(b)):
        if x != y:
            break
        n += 1
    return n


def _score(parts: tuple[str, ...], rel: tuple[str, ...] | None, real: tuple[str, ...],
           here: tuple[str, ...]) -> int | None:
    """How well a recorded site (absolute ``parts``, ``rel`` to its project root) names the
    file ``real`` (``here`` relative to its root); None: not at all."""
    if rel and rel == here:
        return 10_000 + len(rel)
    n = _suffix(parts, real)
    if rel and _suffix(rel, real) == len(rel):
        return max(n, len(rel))
    return n if n >= min(2, len(parts), len(real)) else None


def _recorded_rel(record: dict, path: str) -> tuple[tuple[str, ...] | None, str | None]:
    """(the call site's path relative to its project root, that root) as recorded
    (``call_site_rel``, ``project_root``), or found from the recorded path if it still exists."""
    given = record.get("call_site_rel")
    root = record.get("project_root") if isinstance(record.get("project_root"), str) else None
    if isinstance(given, str):
        rel_path, sep, line = given.rpartition(":")
        rel = _parts(rel_path) if sep and line.isdigit() else ()
        if rel and not os.path.isabs(rel_path) and ".." not in rel:
            return rel, root
    if os.path.isabs(path) and os.path.isfile(path):
        found = find_project_root(os.path.dirname(path))
        if found is not None:
            return _parts(os.path.relpath(os.path.realpath(path), os.path.realpath(found))), found
    return None, root


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
