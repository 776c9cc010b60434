"""File helpers shared by the shim and the rewriter (standard library only, no torch).

* :func:`atomic_write` replaces a file as one ``os.replace`` of a temp file written beside it:
  readers see the old content or the new one, never a part. The saved model, route-memory
  entries and rewritten sources all go through it. The replaced file is closed, and so freed,
  on a daemon thread (``compat-close-replaced``).
* :func:`find_pyproject`: the nearest ``pyproject.toml`` at or above a folder, for
  ``[tool.torch-onnx-compat]`` (the shim's config and the rewriter's table).
* :func:`find_project_root`: the nearest folder holding a ``pyproject.toml`` or a ``.git``: ledger
  call sites are recorded and matched relative to it, so a ledger survives a move of the checkout.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import secrets
import stat
import sys
import threading
import time
from collections.abc import Callable

#: temp files of :func:`atomic_write`: ``.<name>.compat-<pid>-<thread>.tmp``; group 1 is the pid
#: of the writer, so leftovers of a killed process can be recognised and removed
TEMP_FILE = re.compile(r"^\..+\.compat-(\d+)-(\d+)\.tmp$")
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOT_GIVEN = object()
_pid = os.getpid()  # temp file names carry it (a forked child updates it)


class FolderNotWritable(PermissionError):
    """No temp file can be created beside the target. The same errno and message as the
    original ``PermissionError``, which is kept as ``error`` (a caller may then write in place)."""

    def __init__(self, error: PermissionError) -> None:
        super().__init__(error.errno, error.strerror, error.filename)
        self.error = error


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    require_owner: bool = False,
    as_new_file: bool = False,
    before_replace: Callable[[], None] | None = None,
    durable: bool = True,
    resolved: bool = False,
    current: os.stat_result | None | object = _NOT_GIVEN,
) -> str:
    """Replace the file at ``path`` with ``data`` atomically; returns the path written.

    A symlink is followed (the link stays a link, its target gets the content). The temp file is
    created in the target's folder (never through a file or link someone left at its name), gets
    an existing file's mode and, where allowed (root), its owner and group, else the umask's mode
    as ``open()`` would give it; file and folder are fsynced around the ``os.replace`` (not with
    ``durable=False``: still atomic for readers and for a killed process; what a power loss right
    after leaves is the file system's choice, as after a plain ``open(f, "wb")`` write). With
    ``require_owner`` a file whose owner cannot be kept is not replaced (``PermissionError``).
    With ``as_new_file`` the name is replaced as if the file were new (a symlink there is replaced,
    not followed; umask mode, the writer's owner): for entries of a folder several users share.
    ``before_replace`` runs after the data is written, before it is moved into place. The file
    the replace drops is freed off the caller's thread (:func:`_hold_replaced`).
    ``resolved``: ``path`` is already absolute and its last part is not a symlink (the caller
    resolved it), so it is not resolved again; ``current``: its stat, which the caller took just
    now (None: nothing there), so it is not taken again. On any failure the old file is untouched
    and no temp file is left behind.
    """
    st: os.stat_result | None = None
    if as_new_file:
        target = os.path.abspath(os.fspath(path))
    else:
        target = os.fspath(path) if resolved else os.path.realpath(os.fspath(path))
        if current is not _NOT_GIVEN:
            st = current  # type: ignore[assignment]
        else:
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(target)
    folder, name = os.path.split(target)
    fd, tmp = _create_temp(folder, name)
    replaced = None
    try:
        try:
            keep_owner_and_mode(fd, st, require_owner=require_owner)
            preallocate(fd, len(data))
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if before_replace is not None:
            before_replace()
        replaced = _hold_replaced(target, st)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if replaced is not None:
            os.close(replaced)
        raise
    if replaced is not None:
        _close_later(replaced)
    if durable:
        fsync_folder(folder)
    return target


def _hold_replaced(target: str, st: os.stat_result | None) -> int | None:
    """An open descriptor of the regular file ``os.replace`` is about to replace, or None.

    Why: the replace drops the old file's last name, and freeing its blocks (ext4: 0.1-0.2 ms for
    a small file, more for a large one, as much as ``open(f, "wb")`` truncating it) would happen
    inside the rename, on the caller's thread. Held open, the old file is freed when
    :func:`_close_later` closes it on a daemon thread (within ``CLOSE_BATCH_S``); a killed
    process's descriptors are closed by the system, so nothing is left behind either way. POSIX
    only (Windows cannot replace an open file); a file this process cannot read is replaced as
    before.

    A file over ``HOLD_MAX_BYTES`` is freed inside the rename, as ``open(f, "wb")`` frees it:
    freed on the other thread while this one writes the next large model, the two contend in the
    page cache and that write takes up to 8x as long (a 24M-parameter convnet's export: 1.19x
    plain torch held, 1.00x freed in the rename). Up to 4 MB holding is cheaper (a 0.25 MB
    model: 1.01-1.02x against 1.13-1.15x), from 16 MB the two are level."""
    if st is None or os.name != "posix" or not stat.S_ISREG(st.st_mode) or st.st_size > HOLD_MAX_BYTES:
        return None
    try:  # O_NONBLOCK: should a FIFO have taken the name since, opening it does not wait
        return os.open(target, os.O_RDONLY | os.O_NONBLOCK | _O_CLOEXEC)
    except OSError:
        return None


_closing: queue.SimpleQueue[int] | None = None  # what the closing thread is to close
_closing_lock = threading.Lock()
_pending: set[int] = set()  # handed over, not closed yet (a forked child closes its copies)
#: the closing thread closes what was handed over within this long of the first descriptor
CLOSE_BATCH_S = 0.05
#: a replaced file larger than this is freed in the rename, not held for the closing thread
HOLD_MAX_BYTES = 16 << 20


def _close_later(fd: int) -> None:
    """Close ``fd`` on the daemon closing thread (started on first use; here, when no thread can
    be started)."""
    global _closing
    jobs = _closing
    if jobs is None:
        with _closing_lock:
            jobs = _closing
            if jobs is None:
                jobs = queue.SimpleQueue()
                try:
                    threading.Thread(target=_close_forever, args=(jobs,), name="compat-close-replaced",
                                     daemon=True).start()
                except RuntimeError:  # "can't start new thread" (a thread limit, interpreter exit)
                    with contextlib.suppress(OSError):
                        os.close(fd)
                    return
                _closing = jobs
    _pending.add(fd)
    jobs.put(fd)


def _close_forever(jobs: queue.SimpleQueue[int]) -> None:
    while True:
        batch = [jobs.get()]
        # Waking this thread costs the handing thread a context switch: right after a small
        # TorchScript export on a 2-core machine, 0.008 of that export's time (16x an idle
        # hand-over). Descriptors handed over while it sleeps wake no one: a run of exports wakes
        # it once per batch.
        time.sleep(CLOSE_BATCH_S)
        with contextlib.suppress(queue.Empty):
            while True:
                batch.append(jobs.get_nowait())
        for fd in batch:
            # before the close: once closed, the number may name another file a fork would copy
            _pending.discard(fd)
            with contextlib.suppress(OSError):
                os.close(fd)


def _after_fork_in_child() -> None:
    """A forked child has no closing thread, and copies of the descriptors it had still to close
    (each would keep a replaced file's blocks for the child's life): closed here. Its temp files
    carry its own pid."""
    global _closing, _closing_lock, _pid
    _pid = os.getpid()
    _closing, _closing_lock = None, threading.Lock()
    for fd in list(_pending):
        with contextlib.suppress(OSError):
            os.close(fd)
    _pending.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def keep_owner_and_mode(fd: int, st: os.stat_result | None, *, require_owner: bool = False) -> None:
    """Give the open file ``fd`` the mode and, where allowed, the owner and group of the file
    ``st`` describes (nothing for a new file: ``st`` is None). Owner first: a ``chown`` may
    clear set-id bits the mode then restores."""
    if st is None:
        return
    mode = None  # the new file's mode, when known and not changed since
    if hasattr(os, "fchown"):
        new = os.fstat(fd)
        mode = stat.S_IMODE(new.st_mode)
        if (new.st_uid, new.st_gid) != (st.st_uid, st.st_gid):
            mode = None
            try:
                os.fchown(fd, st.st_uid, st.st_gid)  # only root (or a group member) may
            except OSError as exc:
                if require_owner:
                    raise PermissionError(exc.errno, f"cannot keep the file's owner and group "
                                                     f"({st.st_uid}:{st.st_gid})") from exc
    if hasattr(os, "fchmod") and mode != stat.S_IMODE(st.st_mode):
        os.fchmod(fd, stat.S_IMODE(st.st_mode))


def keep_owner_and_mode_of_path(path: str, st: os.stat_result | None) -> None:
    """:func:`keep_owner_and_mode` for a file given by its path."""
    fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    try:
        keep_owner_and_mode(fd, st)
    finally:
        os.close(fd)


def fsync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable (best effort: some systems cannot open a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder or ".", os.O_RDONLY | _O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _create_temp(folder: str, name: str) -> tuple[int, str]:
    """A new temp file beside ``name`` (O_EXCL; mode 0o666 lets the umask decide). A name left
    by an earlier process with this pid gets a random token added rather than be reused."""
    base = f".{name}"
    while True:
        tmp = os.path.join(folder, f"{base}.compat-{_pid}-{threading.get_ident()}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            base = f".{name}.{secrets.token_hex(4)}"
        except PermissionError as exc:
            raise FolderNotWritable(exc) from exc


_fallocate: Callable[..., int] | None = None
_fallocate_lock = threading.Lock()


def preallocate(fd: int, size: int) -> None:
    """Reserve ``size`` bytes of disk for the empty file ``fd`` (Linux ``fallocate``; nothing
    elsewhere, or where the file system lacks it: no zero-filling emulation).

    Why: ext4 (``auto_da_alloc``, its default) flushes a file's delayed-allocation blocks to disk
    when the file is renamed over an existing one, which made the ``os.replace`` of a 24 MB model
    cost ~19 ms (as ``open(f, "wb")`` truncating an existing file does on close, torch's own
    write). Blocks allocated up front are not delayed: the rename stays a metadata operation.
    """
    global _fallocate
    if size <= 0 or not sys.platform.startswith("linux"):
        return
    if _fallocate is None:
        with _fallocate_lock:
            if _fallocate is None:
                try:
                    import ctypes

                    libc = ctypes.CDLL(None, use_errno=True)
                    function = getattr(libc, "fallocate64", None) or libc.fallocate  # 64-bit off_t
                    function.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
                    function.restype = ctypes.c_int
                except (ImportError, OSError, AttributeError):
                    function = _no_fallocate
                _fallocate = function
    _fallocate(fd, 0, 0, size)  # a failure (EOPNOTSUPP, ENOSPC) leaves the plain write to try


def _no_fallocate(fd: int, mode: int, offset: int, size: int) -> int:
    return -1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def stat_or_none(path: str | os.PathLike[str]) -> os.stat_result | None:
    """``os.stat(path)``, or None when there is nothing to stat there (any ``OSError``)."""
    try:
        return os.stat(path)
    except OSError:
        return None


def find_pyproject(start: str | os.PathLike[str]) -> str | None:
    """The nearest ``pyproject.toml`` at or above the folder ``start``, or None."""
    folder = os.path.abspath(os.fspath(start))
    while True:
        candidate = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def find_project_root(start: str | os.PathLike[str]) -> str | None:
    """The nearest folder at or above the folder ``start`` that holds a ``pyproject.toml`` or a
    ``.git`` (a folder, or the file of a worktree), or None."""
    folder = os.path.abspath(os.fspath(start))
    while True:
        if os.path.isfile(os.path.join(folder, "pyproject.toml")) \
                or os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
