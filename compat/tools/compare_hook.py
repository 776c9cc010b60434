"""``python -m compat run --compare``: every export call also runs ``compat.compare``.

The runner registers ``observe`` (``install``) as an export observer (``compat.api.add_observer``)
while compare mode is on (``TORCH_ONNX_COMPAT_COMPARE``, set by ``--compare``): after each successful
export ``compat.routing.dispatch`` calls it and records its result under ``parity`` in the
ledger, with what the compare cost: ``compare_s`` and ``compare_ratio`` (compare time over the
call's own export time, ``export_s``). ``compare``'s own exports run with no observers, so they
never recurse. The runner prints ``print_parity_table`` at exit.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from typing import IO, Any

from compat import api
from compat.policy.config import ENV_COMPARE, env_compare, env_ledger
from compat.request import ExportRequest, Outcome

__all__ = ["ENV_COMPARE", "enabled", "install", "maybe_compare", "observe", "print_parity_table",
           "results", "uninstall"]

#: the rows ``print_parity_table`` prints: (call site, model class, parity summary) of the latest
#: ``LIMIT`` compared calls (text and numbers only: no model, program or tensor)
LIMIT = 1000
results: deque[tuple[str, str, dict[str, Any]]] = deque(maxlen=LIMIT)
_dropped = 0  # compared calls older than the rows kept
_results_lock = threading.Lock()


def enabled() -> bool:
    """Compare mode is on (``TORCH_ONNX_COMPAT_COMPARE``)."""
    return env_compare()


def install() -> None:
    """Compare every export call of this process from now on (while compare mode is on)."""
    api.add_observer(observe)


def uninstall() -> None:
    api.remove_observer(observe)


def observe(req: ExportRequest, outcome: Outcome) -> dict[str, Any] | None:
    """The export observer: the call's ``parity`` ledger field, or None when compare mode is off."""
    summary = maybe_compare(req, outcome)
    return None if summary is None else {"parity": summary}


def maybe_compare(req: ExportRequest, outcome: Outcome) -> dict[str, Any] | None:
    """The parity summary of ``req`` when compare mode is on (never raises), else None."""
    if not enabled():
        return None
    from compat.tools.parity import compare_request

    cls = type(req.model)
    model = f"{cls.__module__}.{cls.__qualname__}"
    start = time.perf_counter()
    try:
        summary = compare_request(req).summary()
    except Exception as exc:  # noqa: BLE001 - a broken compare must not break the user's export
        summary = {"verdict": "error", "differences": [f"compare failed: {type(exc).__name__}: {exc}"],
                   "routes": {}}
    spent = time.perf_counter() - start
    summary["route_taken"] = outcome.route
    summary["compare_s"] = round(spent, 4)
    summary["export_s"] = round(outcome.duration_s, 4)
    summary["compare_ratio"] = round(spent / outcome.duration_s, 2) if outcome.duration_s > 0 else None
    _keep((req.call_site, model, summary))
    return summary


def _keep(row: tuple[str, str, dict[str, Any]]) -> None:
    global _dropped
    with _results_lock:
        if isinstance(results, deque) and results.maxlen is not None and len(results) == results.maxlen:
            _dropped += 1
        results.append(row)


def worst_route_difference(summary: dict[str, Any]) -> float | None:
    """The largest max abs difference between the two routes' models over outputs and probes."""
    values = [n["legacy_vs_dynamo"]["max_abs"] for n in summary.get("numbers") or []
              if isinstance(n.get("legacy_vs_dynamo"), dict) and "max_abs" in n["legacy_vs_dynamo"]]
    return max(values) if values else None


FIRST_LIMIT = 90


def print_parity_table(stream: IO[str] | None = None) -> None:
    """One row per compared call: verdict, per-route status/export time, the largest difference
    between the routes, what the compare cost, the first difference (or note), shortened; the
    last line says where the full texts are."""
    stream = stream or sys.stderr
    if not results:
        return
    print(f"\ntorch-onnx-compat: parity of {len(results) + _dropped} export(s)", file=stream)
    if _dropped:
        print(f"  ({_dropped} earlier export(s) not shown)", file=stream)
    rows = [("call site", "model", "verdict", "legacy", "dynamo", "max |legacy-dynamo|", "cost",
             "first difference")]
    shortened = False
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
        worst = worst_route_difference(s)
        cells.append("-" if worst is None else f"{worst:.2g}")
        ratio = s.get("compare_ratio")
        cells.append("-" if ratio is None else f"{ratio:.1f}x export")
        diffs = s.get("differences") or []
        notes = s.get("notes") or []
        first = diffs[0] if diffs else f"note: {notes[0]}" if notes else ""
        shortened = shortened or len(first) > FIRST_LIMIT or len(diffs) + len(notes) > 1
        rows.append((site, model.rsplit(".", 1)[-1], s["verdict"], *cells,
                     first[:FIRST_LIMIT] + ("…" if len(first) > FIRST_LIMIT else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1], file=stream)
    if shortened:
        ledger = env_ledger()
        where = (f"the ledger {ledger} (field parity.differences / parity.notes)" if ledger
                 else "a ledger: rerun with --ledger L.jsonl (field parity.differences / parity.notes)")
        print(f"  differences shortened here; the full texts are in {where}", file=stream)
