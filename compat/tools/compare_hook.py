"""``python -m compat run --compare``: every export call also runs ``compat.compare``.

``compat.routing.dispatch`` calls ``maybe_compare(req, outcome)`` after a successful export and records
the result under ``parity`` in the ledger; the runner prints ``print_parity_table`` at exit.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from compat.policy.config import ENV_COMPARE, env_compare

__all__ = ["ENV_COMPARE", "enabled", "maybe_compare", "print_parity_table", "results"]
from compat.request import ExportRequest, Outcome

#: (call site, model, parity summary) of every compared call in this process
results: list[tuple[str, str, dict[str, Any]]] = []


def enabled() -> bool:
    return env_compare()


def maybe_compare(req: ExportRequest, outcome: Outcome) -> dict[str, Any] | None:
    """The parity summary of ``req`` when compare mode is on (never raises), else None."""
    if not enabled():
        return None
    from compat.tools.parity import compare_request, in_compare

    if in_compare():
        return None
    cls = type(req.model)
    model = f"{cls.__module__}.{cls.__qualname__}"
    try:
        summary = compare_request(req).summary()
    except Exception as exc:  # noqa: BLE001 - a broken compare must not break the user's export
        summary = {"verdict": "error", "differences": [f"compare failed: {type(exc).__name__}: {exc}"],
                   "routes": {}}
    summary["route_taken"] = outcome.route
    results.append((req.call_site, model, summary))
    return summary


def print_parity_table(stream: IO[str] | None = None) -> None:
    """One row per compared call: verdict, per-route status/export time, first difference."""
    stream = stream or sys.stderr
    if not results:
        return
    print(f"\ntorch-onnx-compat: parity of {len(results)} export(s)", file=stream)
    rows = [("call site", "model", "verdict", "legacy", "dynamo", "first difference")]
    for site, model, s in results:
        cells = []
        for route in ("legacy", "dynamo"):
            r = s.get("routes", {}).get(route)
            if not r:
                cells.append("-")
            elif r["status"] != "ok":
                cells.append("failed")
            else:
                bad = r.get("failed_probes") or []
                cells.append(f"ok {r['export_s']:.2f}s" + (f", fails at {len(bad)} size(s)" if bad else ""))
        diffs = s.get("differences") or []
        first = diffs[0] if diffs else ""
        rows.append((site, model.rsplit(".", 1)[-1], s["verdict"], *cells, first[:90] + ("…" if len(first) > 90 else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1], file=stream)
