"""The JSONL ledger: one record per export call, appended atomically.

Each record is written with a single ``write`` on a file opened with O_APPEND, under an
advisory lock where the platform has one, so concurrent processes never interleave lines.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

FIELDS = (
    "call_site", "route_requested", "route_taken", "fallback_reason", "translations",
    "warnings", "output", "duration_s", "torch_version", "model", "status", "error",
)


def append(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append one record as a JSON line."""
    line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
    fd = os.open(os.fspath(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        os.write(fd, line)
    finally:
        os.close(fd)


def read(paths: Iterable[str | os.PathLike[str]]) -> Iterator[dict[str, Any]]:
    """Records of every ledger in ``paths``; unparseable lines are skipped."""
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict):
                    yield rec
