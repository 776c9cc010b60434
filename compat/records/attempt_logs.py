"""Where a failed route attempt's output goes: a log file, named in the ledger record.

A route that failed may carry ``log`` (what torch printed while it tried, and the full traceback)
and ``where`` (the model line that blocked it). Logs are written beside the ledger
(``<ledger>.logs/``), else under the cache folder (``export-logs/``); with neither, nowhere.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from compat.errors import RouteFailed


def folder(ledger_path: str | None) -> Path | None:
    """The folder for attempt logs (None: keep none)."""
    if ledger_path:
        return Path(ledger_path + ".logs")
    from compat.routing.route_memory import cache_dir

    base = cache_dir()
    return base / "export-logs" if base is not None else None


def write(failures: dict[str, RouteFailed], ledger_path: str | None) -> dict[str, str]:
    """Write each failure's log; ``{route: path}`` of those written (a write error skips it)."""
    logs = {route: log for route, exc in failures.items() if (log := exc.log)}
    target = folder(ledger_path) if logs else None
    if target is None:
        return {}
    written: dict[str, str] = {}
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for route, log in logs.items():
        path = target / f"{stamp}-{os.getpid()}-{time.perf_counter_ns() % 10**9}-{route}.log"
        with contextlib.suppress(OSError):
            target.mkdir(parents=True, exist_ok=True)
            path.write_text(log, encoding="utf-8")
            written[route] = str(path)
    return written


def reason(exc: RouteFailed) -> str:
    """The reason class, with the model line that blocked the route when known."""
    where = exc.where
    return f"{exc.reason} at {where}" if where else exc.reason


def reasons(failures: dict[str, RouteFailed]) -> str:
    """``route: reason`` for each failure, as ``fallback_reason`` holds them."""
    return "; ".join(f"{route}: {reason(exc)}" for route, exc in failures.items())
