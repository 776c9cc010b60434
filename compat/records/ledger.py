"""The JSONL ledger: one record per export call, appended atomically.

Each record is written with a single ``os.write`` of the whole line on a file opened with
O_APPEND, under an advisory lock where the platform has one, so concurrent processes never
interleave lines; nor do threads of one process (each append opens its own descriptor, and
``flock`` locks per open file, so threads queue on it like processes do). A short write (disk full) is cut back off the file, and a line torn by an
earlier crash is ended before the next record, so a record is never glued onto another. A
ledger that cannot be written warns (``LedgerWarning``): it never masks the export's own
result or error.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import stat
from collections.abc import Iterable, Iterator
from typing import Any

from compat.errors import CompatValueError

FIELDS = (
    "call_site", "route_requested", "route_taken", "fallback_reason", "translations",
    "warnings", "output", "duration_s", "torch_version", "model", "status", "error", "notes",
    "opset_written", "attempt_logs", "tracer_warnings", "acceptance", "baked",
)
#: added to every record by ``append`` (compat/records/sites.py): the call site relative to its
#: project root, so a ledger still matches the code after the checkout moved
SITE_FIELDS = ("project_root", "call_site_rel")
#: added to every record by ``append``: when it was written (UTC, ISO 8601), which dates a run in
#: ``compat report``'s progress (a ledger copied between machines keeps it; a file's mtime does not)
STAMP_FIELDS = ("recorded_at",)
#: ``third_party``: ``{distribution, version, code, api, count}`` per legacy API an installed
#: distribution used in the recording process (compat/policy/third_party.py)
ENV_LEDGER = "TORCH_ONNX_COMPAT_LEDGER"  # same name as compat.policy.config.ENV_LEDGER


class LedgerWarning(RuntimeWarning):
    """A ledger record could not be written; the export itself went on."""


def check_path(path: str | os.PathLike[str]) -> str:
    """Validate a ledger path before any export work; returns it absolute.

    Raises ``CompatValueError`` naming ``TORCH_ONNX_COMPAT_LEDGER`` when the path is a folder,
    a FIFO or socket, or lies in a folder that does not exist (a device such as ``/dev/null``
    is accepted)."""
    text = os.fsdecode(os.fspath(path))
    if not text.strip():
        raise CompatValueError(f"{ENV_LEDGER} (the ledger path) must not be empty")
    full = os.path.abspath(text)
    folder = os.path.dirname(full)
    blocker = next((p for p in _parents(folder) if os.path.exists(p) and not os.path.isdir(p)), None)
    if blocker is not None:
        raise CompatValueError(f"{ENV_LEDGER}: the ledger path {full!r} is under {blocker!r}, "
                               "which is a file, not a folder")
    if not os.path.isdir(folder):
        raise CompatValueError(
            f"{ENV_LEDGER}: the ledger path {full!r} is in a folder that does not exist"
        )
    try:
        st = os.stat(full)
    except FileNotFoundError:
        return full
    except OSError as exc:
        raise CompatValueError(f"{ENV_LEDGER}: the ledger path {full!r} is unusable ({exc})") from exc
    if stat.S_ISDIR(st.st_mode):
        raise CompatValueError(f"{ENV_LEDGER}: the ledger path {full!r} is a folder, not a file")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        raise CompatValueError(f"{ENV_LEDGER}: the ledger path {full!r} is not a regular file")
    return full


def _parents(folder: str) -> list[str]:
    out = [folder]
    while os.path.dirname(out[-1]) != out[-1]:
        out.append(os.path.dirname(out[-1]))
    return out


def append(path: str | os.PathLike[str], record: dict[str, Any]) -> bool:
    """Append one record as a JSON line; on failure warn ``LedgerWarning`` and return False.
    The record gets ``STAMP_FIELDS``, ``SITE_FIELDS`` for its ``call_site`` and, when installed libraries used
    legacy torch.onnx APIs in this process, ``third_party`` (their usages so far: never the
    call's own ``warnings``), unless it has them."""
    try:
        from compat.policy.notices import third_party_usages
        from compat.records.sites import site_fields

        usages = third_party_usages()
        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        record = {**site_fields(record.get("call_site")), "recorded_at": stamp,
                  **({"third_party": usages} if usages else {}), **record}
        _append(os.fspath(path), (json.dumps(record, sort_keys=True, default=str) + "\n").encode())
    except (OSError, ValueError, TypeError) as exc:
        _warn(f"the export ledger {os.fsdecode(os.fspath(path))!r} was not written "
              f"({type(exc).__name__}: {exc}); the export itself is unaffected")
        return False
    return True


def _append(path: str | bytes, line: bytes) -> None:
    # O_NONBLOCK: a FIFO put at the ledger path after check_path must not hang the export
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o644)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISCHR(mode):  # /dev/null and friends
            os.write(fd, line)
            return
        if not stat.S_ISREG(mode):
            raise OSError(f"{path!r} is not a regular file")
        with _locked(fd):
            size = os.fstat(fd).st_size
            if size and _last_byte(fd, size) != b"\n":
                line = b"\n" + line  # end a line torn by a crash or a full disk
            written = os.write(fd, line)
            if written != len(line):
                # a partial line would glue the next record onto it: take it back off
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise OSError(f"short write: {written} of {len(line)} bytes (disk full?)")
    finally:
        os.close(fd)


def _last_byte(fd: int, size: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, 1, size - 1)
    os.lseek(fd, size - 1, os.SEEK_SET)  # pragma: no cover - Windows (O_APPEND still appends)
    return os.read(fd, 1)


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _warn(message: str) -> None:
    from compat.policy import notices

    notices.emit(LedgerWarning(message), notices.find_call_site())


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
