"""``python -m compat report LEDGER... [--format markdown|json|html]``: merge export ledgers (e.g.
one per CI shard) into a migration report (the data: report_model.py): calls per route, fallbacks
by reason class, call sites still on the TorchScript route and why, legacy usages per ONX code,
parity verdicts, and the burn-down of legacy usages and call sites over the ledgers' dates.

No torch import: this runs in lint jobs and starts fast.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from compat import commands
from compat.tools.report_model import (  # noqa: F401  (the report's data, as this module's before)
    LEGACY_ONLY,
    REMEMBERED,
    ROUTE_TITLES,
    STATE_NAMES,
    baked_places,
    blocking_lines,
    build,
    build_report,
    place_name,
    read_ledgers,
    reason_classes,
    run_labels,
    run_summary,
    valid_record,
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def to_markdown(report: dict[str, Any]) -> str:
    """What a team pastes into its migration tracking issue."""
    n = report["calls"]
    lines = ["## torch.onnx export migration report", ""]
    lines.append(f"{n} export call(s) from {len(report['ledgers'])} ledger(s)." if n else
                 f"No export calls recorded in {len(report['ledgers'])} ledger(s).")
    lines += ["", "| route taken | calls | share |", "|---|---:|---:|"]
    for route, count in sorted(report["by_route"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {route} | {count} | {count / n:.0%} |" if n else f"| {route} | {count} | - |")
    sites = report.get("call_sites")
    if sites and sum(sites.values()):
        lines += ["", "Call sites: " + ", ".join(f"{sites[k]} {name}" for k, name in STATE_NAMES.items())
                  + "."]
        lines += [f"- pinned ({n}): {_cell(why)}" for why, n in
                  (report.get("pinned_reasons") or {}).items()]
    runs = report.get("progress") or []
    if len(runs) > 1:
        lines += ["", "### Progress over the ledgers' dates (oldest first)", ""]
        lines += _table(("date (UTC)", "ledger", "calls:", "torch.export:", "legacy usages:",
                         *(f"{name}:" for name in STATE_NAMES.values())), [
            (r["date"], f"`{r['label']}`", r["calls"], _share(r["by_route"].get("dynamo", 0), r["calls"]),
             r["legacy_usages"], *(r["call_sites"][k] for k in STATE_NAMES)) for r in runs])
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



def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    """Markdown table lines; a header ending in ``:`` is a right-aligned (numeric) column."""
    names = [h.rstrip(":") for h in header]
    rule = ["---:" if h.endswith(":") else "---" for h in header]
    return ["| " + " | ".join(names) + " |", "|" + "|".join(rule) + "|",
            *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)]


def _cell(text: str, limit: int = 200) -> str:
    text = " ".join(_ANSI.sub("", str(text)).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def _sites(sites: list[str], limit: int = 5) -> str:
    shown = ", ".join(f"`{s}`" for s in sites[:limit])
    return shown + (f" and {len(sites) - limit} more" if len(sites) > limit else "")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=commands.REPORT,
                                description="Merge export ledgers into a migration report.")
    p.add_argument("ledgers", nargs="+", metavar="LEDGER", help="JSONL ledgers (e.g. one per CI shard)")
    p.add_argument("--format", choices=("markdown", "json", "html"), default="markdown",
                   help="html: one self-contained page with charts, and the progress across the "
                   "ledgers given, oldest first by their records' dates")
    p.add_argument("--output", "-o", metavar="PATH", help="write the report to PATH instead of stdout")
    commands.add_version(p)
    ns = commands.parse_args(p, argv)
    if isinstance(ns, int):
        return ns
    try:
        _, skipped, junk = read_ledgers(ns.ledgers)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{commands.REPORT}: cannot read ledger: {exc}", file=sys.stderr)
        return 2
    for path, n in skipped.items():
        print(f"{commands.REPORT}: warning: {path}: skipped {n} invalid line(s) or "
              "record(s)", file=sys.stderr)
    if junk:
        print(f"{commands.REPORT}: no valid record in {', '.join(junk)}", file=sys.stderr)
        return 2
    report = build_report(ns.ledgers)
    if ns.format == "html":
        from compat.tools.report_html import to_html

        text = to_html(report)
    elif ns.format == "json":
        text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    else:
        text = to_markdown(report)
    if ns.output:
        try:
            with open(ns.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            print(f"{commands.REPORT}: error: --output: cannot write {ns.output!r} "
                  f"({exc.strerror or exc})", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    return 0
