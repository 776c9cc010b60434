"""One save at a time into a folder: the threads of this process through a lock per folder, other
processes through ``flock`` on the folder itself (no lock file is left; skipped where the system or
the file system has no ``flock``).

The lock is let go with ``LOCK_UN``, not by closing the descriptor: a copy of it that a fork made
during the save (another thread's ``multiprocessing`` worker) would keep the folder locked for the
child's life. The folder's descriptor is opened once and kept (up to ``KEPT_LIMIT`` folders; an open
and a close fewer per save), and checked against the folder's path at every lock, so a folder
removed and made again gets a new one. A forked child drops what it inherited: its copies share the
parent's locks, and ``flock`` would not keep the two apart.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from compat.files import stat_or_none

try:
    import fcntl
except ImportError:  # Windows: the threads of this process only
    fcntl = None  # type: ignore[assignment]

#: folders whose descriptor is kept open at most (past that, idle ones are closed)
KEPT_LIMIT = 64
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class _Folder:
    """One folder's thread lock and its kept descriptor (with the folder's device and inode)."""

    __slots__ = ("fd", "identity", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fd: int | None = None
        self.identity: tuple[int, int] | None = None


_folders: dict[str, _Folder] = {}
_guard = threading.Lock()
_kept: list[_Folder] = []  # the entries holding a descriptor, oldest first


@contextlib.contextmanager
def held(folder: str) -> Iterator[os.stat_result | None]:
    """Hold ``folder``'s lock; yields the folder's stat, taken under the lock (None: no folder)."""
    entry = _folders.get(folder)
    if entry is None:
        with _guard:
            entry = _folders.setdefault(folder, _Folder())
    with entry.lock:
        st = _lock(entry, folder)
        try:
            yield st
        finally:
            if entry.fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(entry.fd, fcntl.LOCK_UN)


def _lock(entry: _Folder, folder: str) -> os.stat_result | None:
    """``flock`` ``entry``'s descriptor of ``folder`` (opened if need be); the folder's stat."""
    for _ in range(3):  # the folder replaced between the lock and the stat: lock the new one
        if fcntl is None or (entry.fd is None and not _open(entry, folder)):
            return stat_or_none(folder)
        try:
            fcntl.flock(entry.fd, fcntl.LOCK_EX)
        except OSError:  # a file system without flock: the threads of this process only
            _close(entry)
            return stat_or_none(folder)
        st = stat_or_none(folder)
        if st is not None and (st.st_dev, st.st_ino) == entry.identity:
            return st
        with contextlib.suppress(OSError):
            fcntl.flock(entry.fd, fcntl.LOCK_UN)
        _close(entry)
        if st is None:
            return None
    return stat_or_none(folder)


def _open(entry: _Folder, folder: str) -> bool:
    try:
        fd = os.open(folder, os.O_RDONLY | _O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return False
    with _guard:
        if len(_kept) >= KEPT_LIMIT:
            _close_idle()
        entry.fd, entry.identity = fd, (st.st_dev, st.st_ino)
        _kept.append(entry)
    return True


def _close(entry: _Folder) -> None:
    """Close ``entry``'s descriptor (its lock is held by the caller)."""
    with _guard:
        _drop(entry)


def _close_idle() -> None:
    """Close the descriptors of the folders no thread is saving into (``_guard`` is held)."""
    for entry in list(_kept):  # noqa: PERF101 - _drop removes from _kept while this runs
        if entry.lock.acquire(blocking=False):
            try:
                _drop(entry)
            finally:
                entry.lock.release()


def _drop(entry: _Folder) -> None:
    """Close ``entry``'s descriptor and forget it (``_guard`` and the entry's lock are held)."""
    fd, entry.fd, entry.identity = entry.fd, None, None
    with contextlib.suppress(ValueError):
        _kept.remove(entry)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def _after_fork_in_child() -> None:
    """The child starts with no entry: their locks may be held by threads it does not have, and
    its copies of the descriptors share the parent's ``flock``."""
    global _guard
    for entry in _kept:
        if entry.fd is not None:
            with contextlib.suppress(OSError):
                os.close(entry.fd)
    _kept.clear()
    _folders.clear()
    _guard = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
