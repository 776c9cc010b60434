"""The migration report as plain data, which both views read: ``report.py`` (markdown, json, the
command line) and ``report_html.py`` (the page). Merges ledgers (e.g. one per CI shard): calls per
route, fallbacks by reason class, call sites still on the TorchScript route and why, legacy usages
per ONX code, parity verdicts, and the progress over the ledgers' dates (``progress``).

No torch import: this runs in lint jobs and starts fast.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compat.records import call_states
from compat.records.sites import split_site

REMEMBERED = "remembered fallback: "
LEGACY_ONLY = "routed to the TorchScript exporter"


_STR_FIELDS = ("call_site", "route_requested", "route_taken", "fallback_reason", "status", "model",
               "error", "output", "torch_version")


def valid_record(rec: Any) -> bool:
    """A ledger record whose fields have the types the report reads (others are skipped)."""
    if not isinstance(rec, dict):
        return False
    if any(rec.get(k) is not None and not isinstance(rec[k], str) for k in _STR_FIELDS):
        return False
    warnings = rec.get("warnings")
    if warnings is not None and not (isinstance(warnings, list)
                                     and all(isinstance(w, str) for w in warnings)):
        return False
    translations = rec.get("translations")
    if translations is not None and not (isinstance(translations, list)
                                         and all(isinstance(t, dict) for t in translations)):
        return False
    parity = rec.get("parity")
    if parity is not None and not isinstance(parity, dict):
        return False
    return not isinstance(parity, dict) or (isinstance(parity.get("verdict") or "", str)
                                            and isinstance(parity.get("differences") or [], list))


def read_ledgers(paths: Sequence[str]) -> tuple[list[dict[str, Any]], dict[str, int], list[str]]:
    """(valid records, skipped lines per ledger, ledgers that are junk only); raises OSError."""
    records: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    junk: list[str] = []
    for path in paths:
        good = bad = 0
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    rec = None
                if valid_record(rec):
                    records.append(rec)
                    good += 1
                else:
                    bad += 1
        if bad:
            skipped[path] = bad
            if not good:
                junk.append(path)
    return records, skipped, junk


#: `` at c.py:7 `if ...` (fix ...)`` that attempt_logs.reason appends to a reason class
_BLOCKING_LINE = re.compile(r" at [^ ]+\.py:\d+.*$")


#: where attempt_logs.reasons joins its ``route: reason`` parts (a reason may hold "; " itself)
_ROUTE_JOIN = re.compile(r"; (?=(?:dynamo|legacy): )")


def reason_parts(reason: str) -> list[str]:
    """A fallback reason's ``route: reason`` parts; a ``;`` inside one reason does not split it."""
    return _ROUTE_JOIN.split(reason)


def blocking_lines(record: dict[str, Any]) -> list[str]:
    """The model lines a record's fallback reason names (``c.py:7 `if x.mean() > 0:` (fix)``)."""
    reason = str(record.get("fallback_reason") or "").removeprefix(REMEMBERED)
    out: list[str] = []
    for part in reason_parts(reason):
        m = _BLOCKING_LINE.search(part)
        if m and not part.startswith("legacy: "):
            line = m.group(0).removeprefix(" at ")
            if line not in out:
                out.append(line)
    return out


def reason_classes(record: dict[str, Any]) -> list[str]:
    """The reason classes of a record's fallback (``dynamo: X`` → ``X``)."""
    reason = record.get("fallback_reason") or ""
    if not reason:
        return []
    reason = reason.removeprefix(REMEMBERED)
    codes = sorted({t.get("code", "") for t in record.get("translations") or []
                    if isinstance(t, dict) and str(t.get("action", "")).startswith(LEGACY_ONLY)})
    if codes and not reason.startswith(("dynamo:", "legacy:")):
        return [f"option only the TorchScript exporter honours ({c})" for c in codes]
    classes: list[str] = []
    for part in reason_parts(reason):
        route, sep, rest = part.partition(": ")
        cls = rest if sep and route in ("dynamo", "legacy") else part
        cls = _BLOCKING_LINE.sub("", cls)  # group by class; the blocking line is per call site
        if route == "legacy" and sep:
            continue  # the legacy route's own failure is not why the call is on it
        if cls and cls not in classes:
            classes.append(cls)
    return classes or [reason]


def usage_codes(record: Mapping[str, Any]) -> list[str]:
    """The ONX codes a record warned, each once (a code warned twice by one call counts once)."""
    return list(dict.fromkeys(record.get("warnings") or []))


def baked_places(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Where a record's exported graph follows the example rather than the model: the torch.export
    route's ``baked`` places and the TorchScript tracer's ``tracer_warnings`` (``{file, line,
    source, route, detail}``; entries of other shapes are skipped)."""
    out: list[dict[str, Any]] = []
    for place in record.get("baked") or []:
        if isinstance(place, dict):
            out.append({"file": place.get("file"), "line": place.get("line"),
                        "source": str(place.get("source") or ""), "route": "dynamo",
                        "detail": str(place.get("guard") or "")})
    for warning in record.get("tracer_warnings") or []:
        if isinstance(warning, dict):
            out.append({"file": warning.get("file"), "line": warning.get("line"), "source": "",
                        "route": "legacy", "detail": str(warning.get("message") or "").split("\n")[0]})
    return out


def build(records: Iterable[dict[str, Any]], sources: Sequence[str] = ()) -> dict[str, Any]:
    """The report as plain data (what ``--format json`` prints)."""
    calls = 0
    status: Counter[str] = Counter()
    by_route: Counter[str] = Counter()
    fallbacks: dict[str, dict[str, Any]] = {}
    legacy_sites: dict[str, dict[str, Any]] = {}
    usages: dict[str, dict[str, Any]] = {}
    translations: dict[tuple[str, str], dict[str, Any]] = {}
    verdicts: Counter[str] = Counter()
    parity_findings: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    third_party: dict[tuple[str, str, str, str], int] = {}
    baked: dict[tuple[Any, ...], dict[str, Any]] = {}
    fallback_calls = 0
    for rec in records:
        if not valid_record(rec):
            continue
        for key, count in _third_party(rec):
            third_party[key] = max(third_party.get(key, 0), count)
        calls += 1
        site = str(rec.get("call_site") or "<unknown>")
        ok = rec.get("status", "ok") == "ok"
        status[rec.get("status") or "ok"] += 1
        route = rec.get("route_taken") if ok else None
        by_route[route or "failed"] += 1
        if not ok:
            failures.append({"call_site": site, "model": rec.get("model"), "error": rec.get("error")})
        reasons = reason_classes(rec) if route == "legacy" or not ok else []
        remembered = str(rec.get("fallback_reason") or "").startswith(REMEMBERED)
        if route == "legacy" and rec.get("route_requested") == "auto":
            fallback_calls += 1
            for cls in reasons:
                g = fallbacks.setdefault(cls, {"reason": cls, "calls": 0, "remembered": 0, "call_sites": [],
                                               "model_lines": []})
                g["calls"] += 1
                g["remembered"] += remembered
                if site not in g["call_sites"]:
                    g["call_sites"].append(site)
                g["model_lines"] += [m for m in blocking_lines(rec) if m not in g["model_lines"]]
        if route == "legacy":
            why = reasons if rec.get("route_requested") == "auto" else [
                "plain torch, dynamo=False as called (run --observe)" if rec.get("mode") == "observe"
                else f"route '{rec.get('route_requested')}' requested (call, environment or pyproject)"]
            s = legacy_sites.setdefault(site, {"call_site": site, "models": [], "calls": 0, "reasons": []})
            s["calls"] += 1
            if rec.get("model") and rec["model"] not in s["models"]:
                s["models"].append(rec["model"])
            s["reasons"] += [r for r in why if r not in s["reasons"]]
        for code in usage_codes(rec):
            u = usages.setdefault(code, {"code": code, "calls": 0, "call_sites": []})
            u["calls"] += 1
            if site not in u["call_sites"]:
                u["call_sites"].append(site)
        seen: set[tuple[str, str]] = set()
        for t in rec.get("translations") or []:
            key = (str(t.get("code") or ""), str(t.get("option") or ""))
            tr = translations.setdefault(key, {"code": key[0], "option": key[1], "calls": 0, "actions": {}})
            tr["calls"] += key not in seen  # a call translates an option once, in steps (plan, result)
            seen.add(key)
            action = str(t.get("action") or "")
            tr["actions"][action] = tr["actions"].get(action, 0) + 1
        for place in baked_places(rec) if ok else []:
            key = (place["route"], place["file"], place["line"], place["file"] or place["detail"])
            b = baked.setdefault(key, {**place, "calls": 0, "call_sites": []})
            b["calls"] += 1
            if site not in b["call_sites"]:
                b["call_sites"].append(site)
        parity = rec.get("parity")
        if isinstance(parity, dict) and parity.get("verdict"):
            verdicts[parity["verdict"]] += 1
            if parity["verdict"] != "equivalent":
                parity_findings.append({
                    "call_site": site, "model": rec.get("model"), "verdict": parity["verdict"],
                    "differences": list(parity.get("differences") or []),
                    "notes": list(parity.get("notes") or []),
                    "max_route_diff": _worst_route_difference(parity),
                    "compare_ratio": parity.get("compare_ratio"),
                })
    titles = _titles(usages)
    for code, u in usages.items():
        u["title"] = titles.get(code, "")
    return {
        "ledgers": list(sources),
        "calls": calls,
        "status": dict(status),
        "by_route": dict(by_route),
        "fallbacks": {
            "calls": fallback_calls,
            "by_reason": sorted(fallbacks.values(), key=lambda g: (-g["calls"], g["reason"])),
        },
        "legacy_call_sites": sorted(legacy_sites.values(), key=lambda s: (-s["calls"], s["call_site"])),
        "legacy_usages": [usages[c] for c in sorted(usages)],
        "translations": [translations[k] for k in sorted(translations)],
        "parity": {"checked": sum(verdicts.values()), "by_verdict": dict(verdicts), "findings": parity_findings},
        "failures": failures,
        "third_party_usages": _third_party_report(third_party),
        "baked": sorted(baked.values(), key=lambda b: (-b["calls"], str(b["file"]), b["line"] or 0)),
    }


def _third_party(record: Mapping[str, Any]) -> Iterable[tuple[tuple[str, str, str, str], int]]:
    """``((distribution, version, code, api), count)`` of a record's ``third_party`` field (the
    recording process's usages so far: merged across records by the largest count)."""
    entries = record.get("third_party")
    for u in entries if isinstance(entries, list) else ():
        if isinstance(u, dict) and isinstance(u.get("distribution"), str) \
                and isinstance(u.get("count"), int):
            yield ((u["distribution"], str(u.get("version") or ""), str(u.get("code") or ""),
                    str(u.get("api") or "")), u["count"])


def _third_party_report(found: Mapping[tuple[str, str, str, str], int]) -> list[dict[str, Any]]:
    """One entry per distribution: its usages and the line ``compat run`` prints for it."""
    from compat.policy.third_party import line

    by_dist: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for (dist, version, code, api), count in sorted(found.items()):
        by_dist.setdefault((dist, version), []).append({"code": code, "api": api, "count": count})
    return [{"distribution": dist, "version": version, "usages": usages,
             "line": line(dist, version, usages)}
            for (dist, version), usages in by_dist.items()]


def run_summary(path: str, records: Iterable[dict[str, Any]], label: str | None = None) -> dict[str, Any]:
    """One ledger as one run of the progress: its date (the latest ``recorded_at`` of its records,
    else the file's modification time), calls by route, fallbacks, TorchScript call sites, legacy
    usages (one per call site and ONX code) and its call sites by state (``call_site_states``)."""
    records = [r for r in records if valid_record(r)]
    data = build(records, [path])
    stamps = sorted(str(r["recorded_at"]) for r in records if isinstance(r.get("recorded_at"), str))
    if stamps:
        when, dated_by = stamps[-1], "records"
    else:
        try:
            mtime = datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc)
            when, dated_by = mtime.isoformat(timespec="seconds"), "file"
        except OSError:
            when, dated_by = "", "none"
    date = when[:16].replace("T", " ") or "-"
    usages = {(str(r.get("call_site") or ""), code) for r in records for code in usage_codes(r)}
    return {"label": label or os.path.basename(path), "path": path, "date": date, "recorded_at": when,
            "dated_by": dated_by,
            "calls": data["calls"], "by_route": data["by_route"], "fallbacks": data["fallbacks"]["calls"],
            "legacy_call_sites": len(data["legacy_call_sites"]), "legacy_usages": len(usages),
            "call_sites": call_site_states(records)}


#: a call site's state in one run (``compat.records.call_states``): its migration is done (on plain
#: torch, or with a post-step after the call), it is pinned to the TorchScript route on purpose
#: (``dynamo=False`` / ``route="legacy"`` as called), or it still leans on the shim
STATES = call_states.STATES
#: how the reports name each state
STATE_NAMES = {call_states.FINISHED: "finished", call_states.POST_STEP: "finished with a post-step",
               call_states.PINNED: "pinned", call_states.ON_SHIM: "left on the shim"}


def call_site_states(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many call sites are in each of ``STATES`` (the last record of each, post-step records
    merged into their call's as ``verify-migration`` reads them)."""
    counts = dict.fromkeys(STATES, 0)
    for rec in call_states.last_by_site(records).values():
        counts[call_states.state(rec, usage_codes)] += 1
    return counts


def pinned_reasons(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """How many pinned call sites give each reason (the rewriter's comment above the call, in
    the file as it is now), most first."""
    reasons: Counter[str] = Counter()
    for site, rec in call_states.last_by_site(records).items():
        if call_states.state(rec, usage_codes) == call_states.PINNED:
            reasons[_pin_reason(site) or "no reason written"] += 1
    return dict(reasons.most_common())


def _pin_reason(call_site: str) -> str:
    """The reason of the ``dynamo=False`` comment above the call (the file as it is now)."""
    found = split_site(call_site)
    if found is None:
        return ""
    try:
        with open(found[0], encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return ""
    from migration.outcome import pin_comment

    return pin_comment(lines, found[1])


def progress(paths: Sequence[str]) -> list[dict[str, Any]]:
    """One ``run_summary`` per ledger, oldest first by date (ties keep the order given): the
    burn-down of legacy usages and call sites finished / pinned / on the shim."""
    runs = [run_summary(path, read_ledgers([path])[0], label)
            for path, label in zip(paths, run_labels(paths))]
    return sorted(runs, key=lambda r: r["recorded_at"])


def build_report(paths: Sequence[str]) -> dict[str, Any]:
    """``build`` over every ledger's records plus ``progress`` (what ``--format json`` prints)."""
    records = [r for path in paths for r in read_ledgers([path])[0]]
    return {**build(records, paths), "call_sites": call_site_states(records),
            "pinned_reasons": pinned_reasons(records), "progress": progress(paths)}


def run_labels(paths: Sequence[str]) -> list[str]:
    """Short names for ledgers: the file name, with its folder where two share one (CI shards)."""
    names = [os.path.basename(p) for p in paths]
    return [os.path.join(os.path.basename(os.path.dirname(os.path.abspath(p))), n) if names.count(n) > 1
            else n for p, n in zip(paths, names)]


def _worst_route_difference(parity: Mapping[str, Any]) -> float | None:
    """The largest max abs difference between the two routes' models in a parity record."""
    values = [n["legacy_vs_dynamo"]["max_abs"] for n in parity.get("numbers") or []
              if isinstance(n, dict) and isinstance(n.get("legacy_vs_dynamo"), dict)
              and isinstance(n["legacy_vs_dynamo"].get("max_abs"), (int, float))]
    return max(values) if values else None


def _titles(codes: Iterable[str]) -> dict[str, str]:
    from compat import catalog

    out: dict[str, str] = {}
    for code in codes:
        try:
            out[code] = catalog.get(code).summary
        except KeyError:  # a code from an older or newer compat
            out[code] = ""
    return out



ROUTE_TITLES = {"dynamo": "torch.export", "legacy": "TorchScript"}


def place_name(place: Mapping[str, Any]) -> str:
    """``file.py:LINE`` of a baked place (``?`` when torch named no model frame)."""
    if not place.get("file"):
        return "?"
    return f"{os.path.basename(str(place['file']))}:{place.get('line')}"

