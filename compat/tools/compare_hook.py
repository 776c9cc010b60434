"""``python -m compat run --compare``: every export call also runs ``compat.compare``.

The runner registers ``observe`` (``install``) as an export observer (``compat.api.add_observer``)
while compare mode is on (``TORCH_ONNX_COMPAT_COMPARE``, set by ``--compare``): after each successful
export ``compat.routing.dispatch`` calls it and records its result under ``parity`` in the
ledger. ``compare``'s own exports run with no observers, so they never recurse. The runner prints
``print_parity_table`` at exit.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from compat import api
from compat.policy.config import ENV_COMPARE, env_compare
from compat.request import ExportRequest, Outcome

__all__ = ["ENV_COMPARE", "enabled", "install", "maybe_compare", "observe", "print_parity_table",
           "results", "uninstall"]

#: (call site, model, parity summary) of every compared call in this process
results: list[tuple[str, str, dict[str, Any]]] = []


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
