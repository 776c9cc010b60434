"""``compat report --format html``: the migration report as one self-contained HTML page.

Inline CSS and inline SVG bar charts only: no script, no font, no image, nothing fetched, so the
file can be archived as a CI artifact and opened anywhere. Every bar is an SVG ``<rect>`` with
``data-chart``, ``data-label`` and ``data-value`` attributes (what the tests count in a rendered
page). No torch import.
"""

from __future__ import annotations

import html
import os
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Any

from compat.tools.report_model import STATE_NAMES

ROUTE_NAMES = {"dynamo": "torch.export", "legacy": "TorchScript", "failed": "failed"}
ROUTE_COLOURS = {"dynamo": "#2e7d32", "legacy": "#ef6c00", "failed": "#c62828"}
VERDICT_COLOURS = {"equivalent": "#2e7d32", "differs": "#c62828", "one-route-only": "#f9a825"}
DEFAULT_COLOUR = "#546e7a"
ROUTE_ORDER = ("dynamo", "legacy", "failed")

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1c2833;
background:#f4f6f8}
main{max-width:1100px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:0 0 10px}
.sub{color:#566573;margin:0 0 18px}
section{background:#fff;border:1px solid #d5dbe0;border-radius:8px;padding:16px 20px;margin:0 0 16px}
.tiles{display:flex;gap:12px;flex-wrap:wrap;margin:0 0 16px}
.tile{background:#fff;border:1px solid #d5dbe0;border-radius:8px;padding:10px 14px;flex:1 1 0;min-width:110px}
.tile b{display:block;font-size:22px}.tile span{color:#566573;font-size:12px}
table{border-collapse:collapse;width:100%;margin-top:10px;font-size:13px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e5e8eb;vertical-align:top}
th{background:#f4f6f8;font-weight:600}td.n,th.n{text-align:right;white-space:nowrap}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f4f6f8;padding:1px 4px;
border-radius:3px;overflow-wrap:anywhere}
td{overflow-wrap:break-word}
a{color:#1565c0}.none{color:#566573;font-style:italic}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
pre{white-space:pre-wrap;font:12px ui-monospace,monospace;max-height:320px;overflow:auto}
summary{cursor:pointer}
svg text{font:12px system-ui,sans-serif;fill:#1c2833}
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def bar_chart(chart: str, items: Sequence[tuple[str, int, str]], *, width: int = 640,
              label_width: int = 300) -> str:
    """Horizontal bars, one per (label, value, colour); empty string when there is nothing."""
    items = [i for i in items if i[1] > 0]
    if not items:
        return ""
    row, top = 26, 4
    bar_space = width - label_width - 60
    most = max(v for _, v, _ in items)
    parts = [(f'<svg class="chart" data-chart="{_e(chart)}" width="{width}" '
             f'height="{top + row * len(items)}" role="img" aria-label="{_e(chart)} chart">')]
    for i, (label, value, colour) in enumerate(items):
        y = top + i * row
        w = max(2, round(bar_space * value / most))
        short = _fit(label, label_width)
        parts.append(f'<text x="4" y="{y + 16}">{_e(short)}'
                     f'<title>{_e(label)}</title></text>')
        parts.append(f'<rect x="{label_width}" y="{y + 3}" width="{w}" height="18" rx="2" '
                     f'fill="{colour}" data-chart="{_e(chart)}" data-label="{_e(label)}" '
                     f'data-value="{value}"><title>{_e(label)}: {value}</title></rect>')
        parts.append(f'<text x="{label_width + w + 6}" y="{y + 16}">{value}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _fit(label: str, width: int) -> str:
    """``label`` cut (with …) to what the label column shows at 12px (a char is at most ~8px):
    the start (the ONX code) always shows, never clipped at the SVG's left edge."""
    most = max(4, (width - 12) // 8)
    return label if len(label) <= most else label[: most - 1] + "…"


def progress_chart(runs: Sequence[dict[str, Any]], *, width: int = 640, label_width: int = 220) -> str:
    """One stacked bar per run (ledger): its calls by route, as shares of that run's calls."""
    runs = [r for r in runs if r["calls"]]
    if not runs:
        return ""
    row, top = 28, 4
    bar_space = width - label_width - 20
    parts = [(f'<svg class="chart" data-chart="progress" width="{width}" '
             f'height="{top + row * len(runs)}" role="img" aria-label="progress chart">')]
    for i, run in enumerate(runs):
        y, x = top + i * row, float(label_width)
        parts.append(f'<text x="4" y="{y + 17}">{_e(_fit(run["label"], label_width))}'
                     f'<title>{_e(run["label"])}</title></text>')
        for route in _routes(run["by_route"]):
            count = run["by_route"][route]
            w = bar_space * count / run["calls"]
            name = ROUTE_NAMES.get(route, route)
            parts.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="20" '
                         f'fill="{ROUTE_COLOURS.get(route, DEFAULT_COLOUR)}" data-chart="progress" '
                         f'data-run="{_e(run["label"])}" data-label="{_e(route)}" data-value="{count}">'
                         f'<title>{_e(run["label"])}: {_e(name)} {count} of {run["calls"]}</title></rect>')
            x += w
    parts.append("</svg>")
    return "".join(parts)


STATE_COLOURS = {"finished": "#2e7d32", "finished_post_step": "#66bb6a", "pinned": "#6d4c41",
                 "on_shim": "#ef6c00"}


def call_sites_chart(runs: Sequence[dict[str, Any]], *, width: int = 640, label_width: int = 220) -> str:
    """One stacked bar per run: its call sites finished / pinned / on the shim, in counts (the
    longest bar is the run with the most call sites)."""
    runs = [r for r in runs if sum(r["call_sites"].values())]
    if not runs:
        return ""
    row, top = 28, 4
    bar_space = width - label_width - 20
    most = max(sum(r["call_sites"].values()) for r in runs)
    parts = [(f'<svg class="chart" data-chart="call-sites" width="{width}" '
             f'height="{top + row * len(runs)}" role="img" aria-label="call sites chart">')]
    for i, run in enumerate(runs):
        y, x = top + i * row, float(label_width)
        parts.append(f'<text x="4" y="{y + 17}">{_e(_fit(run_title(run), label_width))}'
                     f'<title>{_e(run_title(run))}</title></text>')
        for state, count in run["call_sites"].items():
            if not count:
                continue
            w = bar_space * count / most
            parts.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="20" '
                         f'fill="{STATE_COLOURS.get(state, DEFAULT_COLOUR)}" data-chart="call-sites" '
                         f'data-run="{_e(run["label"])}" data-label="{_e(state)}" data-value="{count}">'
                         f'<title>{_e(run_title(run))}: {_e(STATE_NAMES.get(state, state))} {count}'
                         f'</title></rect>')
            x += w
    parts.append("</svg>")
    return "".join(parts)


def run_title(run: dict[str, Any]) -> str:
    return f'{run["date"]} {run["label"]}'


def _routes(by_route: dict[str, int]) -> list[str]:
    known = [r for r in ROUTE_ORDER if by_route.get(r)]
    return known + sorted(r for r in by_route if r not in ROUTE_ORDER and by_route[r])


def _site_link(site: str) -> str:
    """``file:line`` as link text, pointing at the file (``file://`` for absolute paths)."""
    path, _, line = site.rpartition(":")
    if not (path and line.isdigit()):
        return f"<code>{_e(site)}</code>"
    href = ("file://" if os.path.isabs(path) else "") + urllib.parse.quote(path)
    return f'<a href="{_e(href)}#L{line}"><code>{_e(site)}</code></a>'


def _sites(sites: Iterable[str], limit: int = 8) -> str:
    sites = list(sites)
    shown = "<br>".join(_site_link(s) for s in sites[:limit])
    return shown + (f"<br>and {len(sites) - limit} more" if len(sites) > limit else "")


def _table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Rows of already-escaped cells; a header ending in ``:`` is a numeric column."""
    th = "".join(f'<th class="n">{_e(h[:-1])}</th>' if h.endswith(":") else f"<th>{_e(h)}</th>"
                 for h in head)
    numeric = [h.endswith(":") for h in head]
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if n else f"<td>{c}</td>"
                                    for c, n in zip(row, numeric)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _long(text: str, limit: int = 240) -> str:
    """Long text (a torch error): its first line shown, the whole of it one click away."""
    first = " ".join(text.strip().split("\n", 1)[0].split())
    if len(first) <= limit and "\n" not in text.strip():
        return _e(first)
    short = first if len(first) <= limit else first[: limit - 1] + "…"
    return f"<details><summary>{_e(short)}</summary><pre>{_e(text)}</pre></details>"


def _section(ident: str, title: str, *body: str) -> str:
    return f'<section id="{ident}"><h2>{_e(title)}</h2>{"".join(body)}</section>'


def _none(text: str) -> str:
    return f'<p class="none">{_e(text)}</p>'


def to_html(report: dict[str, Any], runs: Sequence[dict[str, Any]] | None = None) -> str:
    """The page for ``report`` (``report_model.build_report``) and, with two or more runs (its
    ``progress``, or ``runs``: ``report_model.run_summary`` per ledger), their progress."""
    n = report["calls"]
    by_route = report["by_route"]
    ledgers = report["ledgers"]
    tiles = [(n, "export calls"), (len(ledgers), "ledgers"),
             (_share(by_route.get("dynamo", 0), n), "on torch.export"),
             (len(report["legacy_call_sites"]), "call sites on TorchScript"),
             (report["fallbacks"]["calls"], "fallbacks"),
             (len(report["failures"]), "failed exports")]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        "<title>torch.onnx export migration report</title>", f"<style>{_CSS}</style></head>",
        "<body><main>", "<h1>torch.onnx export migration report</h1>",
        f'<p class="sub">{n} export call(s) from {len(ledgers)} ledger(s): '
        + ", ".join(f"<code>{_e(os.path.basename(p))}</code>" for p in ledgers) + "</p>",
        '<div class="tiles">' + "".join(f'<div class="tile"><b>{_e(v)}</b><span>{_e(k)}</span></div>'
                                        for v, k in tiles) + "</div>",
    ]
    route_items = [(f"{ROUTE_NAMES.get(r, r)} ({r})", by_route[r], ROUTE_COLOURS.get(r, DEFAULT_COLOUR))
                   for r in _routes(by_route)]
    parts.append(_section(
        "routes", "Route shares",
        bar_chart("routes", route_items) or _none("No export calls recorded."),
        _table(("route taken", "calls:", "share:"),
               [(_e(label), str(v), _share(v, n)) for label, v, _ in route_items]) if n else ""))
    if runs is None:
        runs = report.get("progress") or []
    if len(runs) > 1:
        legend = "".join(f'<span><i style="background:{ROUTE_COLOURS[r]}"></i>{_e(ROUTE_NAMES[r])}</span>'
                         for r in ROUTE_ORDER)
        states = "".join(f'<span><i style="background:{STATE_COLOURS[k]}"></i>{_e(v)}</span>'
                         for k, v in STATE_NAMES.items())
        parts.append(_section(
            "progress", "Progress across runs",
            '<p class="sub">One bar per ledger, oldest first by the date of its records (else of its '
            "file); routes as shares of that run's calls.</p>",
            f'<div class="legend">{legend}</div>', progress_chart(runs) or _none("No calls in any run."),
            "<h3>Burn-down: legacy usages</h3>",
            '<p class="sub">Per run, the call sites × ONX codes warned (each counted once).</p>',
            bar_chart("burn-down", [(run_title(r), r["legacy_usages"], "#6a1b9a") for r in runs],
                      label_width=220) or _none("No legacy usage in any run."),
            "<h3>Call sites: finished, finished with a post-step, pinned, on the shim</h3>",
            f'<div class="legend">{states}</div>', call_sites_chart(runs) or _none("No call sites."),
            _table(("date (UTC)", "run", "calls:", "torch.export:", "TorchScript:", "failed:",
                    "fallbacks:", "legacy usages:", *(f"{n}:" for n in STATE_NAMES.values())),
                   [(_e(r["date"]), _e(r["label"]), str(r["calls"]),
                     _share(r["by_route"].get("dynamo", 0), r["calls"]),
                     _share(r["by_route"].get("legacy", 0), r["calls"]), str(r["by_route"].get("failed", 0)),
                     str(r["fallbacks"]), str(r["legacy_usages"]),
                     *(str(r["call_sites"][k]) for k in STATE_NAMES)) for r in runs])))
    fb = report["fallbacks"]["by_reason"]
    parts.append(_section(
        "fallbacks", "Fallbacks to the TorchScript route, by cause",
        (f'<p class="sub">{report["fallbacks"]["calls"]} auto-routed call(s) took the TorchScript route.</p>'
         + bar_chart("fallbacks", [(g["reason"], g["calls"], ROUTE_COLOURS["legacy"]) for g in fb])
         + _table(("cause", "calls:", "remembered:", "model lines", "call sites"),
                  [(_e(g["reason"]), str(g["calls"]), str(g["remembered"]),
                    "<br>".join(f"<code>{_e(m)}</code>" for m in g.get("model_lines", [])) or "-",
                    _sites(g["call_sites"])) for g in fb])) if fb else _none("None.")))
    sites = report["legacy_call_sites"]
    parts.append(_section(
        "legacy-sites", "Call sites still on the TorchScript route",
        _table(("call site", "model", "calls:", "why"),
               [(_site_link(s["call_site"]), ", ".join(f"<code>{_e(m)}</code>" for m in s["models"]),
                 str(s["calls"]), _e("; ".join(s["reasons"]) or "-")) for s in sites])
        if sites else _none("None: every successful call took the torch.export route." if n
                            else "None: no export calls recorded.")))
    usages = report["legacy_usages"]
    translations = report.get("translations", [])
    parts.append(_section(
        "codes", "Warnings and translations per code",
        "<h3>Legacy-usage warnings</h3>",
        (bar_chart("warnings", [(f"{u['code']} {u['title']}".strip(), u["calls"], "#6a1b9a") for u in usages])
         + _table(("code", "usage", "calls:", "call sites"),
                  [(_e(u["code"]), _e(u["title"]), str(u["calls"]), _sites(u["call_sites"])) for u in usages]))
        if usages else _none("None."),
        "<h3>Translations applied</h3>",
        (bar_chart("translations", [(f"{t['code']} {t['option']}".strip(), t["calls"], "#00838f")
                                    for t in translations])
         + _table(("code", "option", "calls:", "what the shim did"),
                  [(_e(t["code"]), f"<code>{_e(t['option'])}</code>", str(t["calls"]),
                    "<br>".join(f"{_e(a)} ({c})" for a, c in sorted(t["actions"].items())))
                   for t in translations]))
        if translations else _none("None.")))
    from compat.tools.report_model import ROUTE_TITLES, place_name

    baked = report.get("baked", [])
    parts.append(_section(
        "baked", "Branches and values baked at the example's values",
        ('<p class="sub">The exported graph follows the example here (torch.export: ONX003; '
         "TorchScript: a TracerWarning).</p>"
         + _table(("model line", "source", "route", "what", "calls:", "call sites"),
                  [(_site_link(f"{b['file']}:{b['line']}") if b.get("file") else _e(place_name(b)),
                    f"<code>{_e(b['source'])}</code>" if b.get("source") else "-",
                    _e(ROUTE_TITLES.get(b["route"], b["route"])), _e(b.get("detail") or "-"),
                    str(b["calls"]), _sites(b["call_sites"])) for b in baked]))
        if baked else _none("None.")))
    parity = report["parity"]
    parts.append(_section(
        "parity", "Parity of the two routes",
        (bar_chart("parity", [(v, c, VERDICT_COLOURS.get(v, DEFAULT_COLOUR))
                              for v, c in sorted(parity["by_verdict"].items())])
         + f'<p class="sub">{parity["checked"]} compared call(s).</p>'
         + (_table(("call site", "model", "verdict", "differences"),
                   [(_site_link(f["call_site"]), f"<code>{_e(f['model'])}</code>", _e(f["verdict"]),
                     "<br>".join([_e(d) for d in f["differences"][:5]]
                                 + [f"note: {_e(d)}" for d in f.get("notes", [])[:3]]) or "-")
                    for f in parity["findings"]]) if parity["findings"] else ""))
        if parity["checked"] else _none("No call was compared (run with --compare).")))
    third = report.get("third_party_usages") or []
    if third:
        parts.append(_section(
            "third-party", "Third-party legacy usage",
            '<p class="sub">Legacy torch.onnx APIs used by installed libraries, not by your code '
            "(nothing to migrate; not counted in the warnings above).</p>",
            _table(("distribution", "version", "usage", "code"),
                   [(f"<code>{_e(t['distribution'])}</code>", _e(t["version"] or "-"),
                     _e(t["line"].split(": ", 1)[-1]),
                     _e(", ".join(dict.fromkeys(u["code"] for u in t["usages"])))) for t in third])))
    if report["failures"]:
        parts.append(_section(
            "failures", "Failed exports",
            _table(("call site", "model", "error"),
                   [(_site_link(f["call_site"]), f"<code>{_e(f['model'])}</code>", _long(f["error"] or ""))
                    for f in report["failures"]])))
    parts.append("</main></body></html>\n")
    return "\n".join(parts)
