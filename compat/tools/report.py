"""``python -m compat report LEDGER... [--format markdown|json|html]``: merge export ledgers (e.g.
one per CI shard) into a migration report: calls per route, fallbacks by reason class, call sites
still on the TorchScript route and why, legacy usages per ONX code, parity verdicts; the HTML page
(report_html.py) also shows the progress across the ledgers given (one run each, oldest first).

No torch import: this runs in lint jobs and starts fast.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compat import commands

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


def blocking_lines(record: dict[str, Any]) -> list[str]:
    """The model lines a record's fallback reason names (``c.py:7 `if x.mean() > 0:` (fix)``)."""
    reason = str(record.get("fallback_reason") or "").removeprefix(REMEMBERED)
    out: list[str] = []
    for part in reason.split("; "):
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
    for part in reason.split("; "):
        route, sep, rest = part.partition(": ")
        cls = rest if sep and route in ("dynamo", "legacy") else part
        cls = _BLOCKING_LINE.sub("", cls)  # group by class; the blocking line is per call site
        if route == "legacy" and sep:
            continue  # the legacy route's own failure is not why the call is on it
        if cls and cls not in classes:
            classes.append(cls)
    return classes or [reason]


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
        for code in rec.get("warnings") or []:
            u = usages.setdefault(code, {"code": code, "calls": 0, "call_sites": []})
            u["calls"] += 1
            if site not in u["call_sites"]:
                u["call_sites"].append(site)
        for t in rec.get("translations") or []:
            key = (str(t.get("code") or ""), str(t.get("option") or ""))
            tr = translations.setdefault(key, {"code": key[0], "option": key[1], "calls": 0, "actions": {}})
            tr["calls"] += 1
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
    """One ledger as one run of the progress chart: its calls by route, fallbacks, TorchScript sites."""
    data = build(records, [path])
    try:
        mtime = datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc)
        modified = mtime.strftime("%Y-%m-%d %H:%M")
    except OSError:
        modified = "-"
    return {"label": label or os.path.basename(path), "path": path, "modified": modified,
            "calls": data["calls"], "by_route": data["by_route"], "fallbacks": data["fallbacks"]["calls"],
            "legacy_call_sites": len(data["legacy_call_sites"])}


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


def to_markdown(report: dict[str, Any]) -> str:
    """What a team pastes into its migration tracking issue."""
    n = report["calls"]
    lines = ["## torch.onnx export migration report", ""]
    lines.append(f"{n} export call(s) from {len(report['ledgers'])} ledger(s)." if n else
                 f"No export calls recorded in {len(report['ledgers'])} ledger(s).")
    lines += ["", "| route taken | calls | share |", "|---|---:|---:|"]
    for route, count in sorted(report["by_route"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {route} | {count} | {count / n:.0%} |" if n else f"| {route} | {count} | - |")
    fb = report["fallbacks"]["by_reason"]
    lines += ["", "### Fallbacks to the TorchScript route, by reason", ""]
    if fb:
        lines += [f"{report['fallbacks']['calls']} auto-routed call(s) took the TorchScript route.", ""]
        lines += _table(("reason", "calls:", "of which remembered:", "call sites"), [
            (_cell(g["reason"]), g["calls"], g["remembered"], _sites(g["call_sites"])) for g in fb])
    else:
        lines.append("None.")
    lines += ["", "### Call sites still on the TorchScript route", ""]
    if report["legacy_call_sites"]:
        lines += _table(("call site", "model", "calls:", "why"), [
            (f"`{c['call_site']}`", ", ".join(f"`{m}`" for m in c["models"]), c["calls"],
             _cell("; ".join(c["reasons"]) or "-")) for c in report["legacy_call_sites"]])
    elif not n:
        lines.append("None: no export calls recorded.")
    elif not report["status"].get("ok"):
        lines.append("None: no export call succeeded.")
    else:
        lines.append("None: every successful call took the torch.export route.")
    lines += ["", "### Legacy usages (ONX codes)", ""]
    if report["legacy_usages"]:
        lines += _table(("code", "usage", "calls:", "call sites"), [
            (u["code"], _cell(u["title"]), u["calls"], _sites(u["call_sites"])) for u in report["legacy_usages"]])
    else:
        lines.append("None.")
    lines += ["", "### Branches and values baked at the example's values", ""]
    if report.get("baked"):
        lines += [("The exported graph follows the example here (torch.export: ONX003; TorchScript: "
                   "a TracerWarning); an input that takes the other branch gets the example's."), ""]
        lines += _table(("model line", "source", "route", "what", "calls:", "call sites"), [
            (f"`{place_name(b)}`", f"`{_cell(b['source'])}`" if b["source"] else "-",
             ROUTE_TITLES.get(b["route"], b["route"]), _cell(b["detail"] or "-"), b["calls"],
             _sites(b["call_sites"])) for b in report["baked"]])
    else:
        lines.append("None.")
    parity = report["parity"]
    lines += ["", "### Parity of the two routes", ""]
    if parity["checked"]:
        lines.append(", ".join(f"{v}: {c}" for v, c in sorted(parity["by_verdict"].items()))
                     + f" (of {parity['checked']} compared call(s)).")
        for f in parity["findings"]:
            lines.append(f"- `{f['call_site']}` (`{f['model']}`): **{f['verdict']}**")
            lines += [f"  - {_cell(d, 300)}" for d in f["differences"][:5]]
            lines += [f"  - note: {_cell(d, 300)}" for d in f.get("notes", [])[:3]]
            if f.get("max_route_diff") is not None:
                lines.append(f"  - max abs difference between the routes' models: {f['max_route_diff']:.3g}")
    else:
        lines.append(f"No call was compared (run with `{commands.RUN} --compare`).")
    if report.get("third_party_usages"):
        intro = ("Legacy torch.onnx APIs used by installed libraries, not by your code (nothing to "
                 "migrate; not counted in the usages above):")
        lines += ["", "### Third-party legacy usage", "", intro, ""]
        lines += [f"- {_cell(t['line'], 300)}" for t in report["third_party_usages"]]
    if report["failures"]:
        lines += ["", "### Failed exports", ""]
        lines += [f"- `{f['call_site']}` (`{f['model']}`): {_cell(f['error'] or '', 300)}" for f in report["failures"]]
    lines.append("")
    return "\n".join(lines)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
ROUTE_TITLES = {"dynamo": "torch.export", "legacy": "TorchScript"}


def place_name(place: Mapping[str, Any]) -> str:
    """``file.py:LINE`` of a baked place (``?`` when torch named no model frame)."""
    if not place.get("file"):
        return "?"
    return f"{os.path.basename(str(place['file']))}:{place.get('line')}"


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    """Markdown table lines; a header ending in ``:`` is a right-aligned (numeric) column."""
    names = [h.rstrip(":") for h in header]
    rule = ["---:" if h.endswith(":") else "---" for h in header]
    return ["| " + " | ".join(names) + " |", "|" + "|".join(rule) + "|",
            *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)]


def _cell(text: str, limit: int = 200) -> str:
    text = " ".join(_ANSI.sub("", str(text)).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _sites(sites: list[str], limit: int = 5) -> str:
    shown = ", ".join(f"`{s}`" for s in sites[:limit])
    return shown + (f" and {len(sites) - limit} more" if len(sites) > limit else "")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=commands.REPORT,
                                description="Merge export ledgers into a migration report.")
    p.add_argument("ledgers", nargs="+", metavar="LEDGER", help="JSONL ledgers (e.g. one per CI shard)")
    p.add_argument("--format", choices=("markdown", "json", "html"), default="markdown",
                   help="html: one self-contained page with charts, and the progress across the "
                   "ledgers given (oldest first)")
    p.add_argument("--output", "-o", metavar="PATH", help="write the report to PATH instead of stdout")
    commands.add_version(p)
    ns = commands.parse_args(p, argv)
    if isinstance(ns, int):
        return ns
    try:
        records, skipped, junk = read_ledgers(ns.ledgers)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{commands.REPORT}: cannot read ledger: {exc}", file=sys.stderr)
        return 2
    for path, n in skipped.items():
        print(f"{commands.REPORT}: warning: {path}: skipped {n} invalid line(s) or "
              "record(s)", file=sys.stderr)
    if junk:
        print(f"{commands.REPORT}: no valid record in {', '.join(junk)}", file=sys.stderr)
        return 2
    report = build(records, ns.ledgers)
    if ns.format == "html":
        from compat.tools.report_html import to_html

        runs = [run_summary(path, read_ledgers([path])[0], label)
                for path, label in zip(ns.ledgers, run_labels(ns.ledgers))]
        text = to_html(report, runs)
    elif ns.format == "json":
        text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    else:
        text = to_markdown(report)
    if ns.output:
        with open(ns.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0
