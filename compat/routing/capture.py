"""What an export route prints, kept off the user's terminal unless the route succeeds.

``Capture`` holds what torch prints while a route runs (progress lines, logging, graph dumps;
Python writes to ``sys.stdout``/``sys.stderr`` and file descriptors 1/2). A success replays it
on stderr (stdout stays the script's); a failure keeps it, with the exception's traceback, for
the log file the ledger names (``RouteFailed.log``). compat's own warnings are held and shown
after the route, whatever its fate.

Only the exporting thread is captured at the Python level: while a capture is on,
``sys.stdout``/``sys.stderr`` route each write by thread, so another thread's prints still go
where they went (through a copy of the real descriptor when its stream writes to fd 1/2).
File descriptors are process-wide: what another thread writes to fd 1/2 *directly* (C code, a
stream object it took before the export) is captured with the export's own output.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import sys
import tempfile
import threading
import traceback
from collections.abc import Sequence
from types import TracebackType
from typing import Any, TextIO, final

from compat.errors import LegacyExportWarning
from compat.policy.warning_tap import WarningTap


@final
class Capture:
    """While active, fds 1/2 go to temporary files and the entering thread's writes to
    ``sys.stdout``/``sys.stderr`` to buffers (other threads' are not captured); compat's own
    warnings are held and shown after (they are for the user whatever the attempt's fate)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.stdout = ""
        self.stderr = ""
        self._state: list[Any] = []
        self._tap: WarningTap | None = None

    def __enter__(self) -> Capture:
        if not self.enabled:
            return self
        _flush()
        out_f, err_f = _scratch_file("stdout"), _scratch_file("stderr")
        saved: list[int] = []
        try:
            saved = [os.dup(1), os.dup(2)]
            os.dup2(out_f.fileno(), 1)
            os.dup2(err_f.fileno(), 2)
        except OSError:  # no usable fds 1/2 (embedded interpreters): Python level only
            for fd in saved:
                os.close(fd)
            saved = []
        py_out, py_err = io.StringIO(), io.StringIO()
        routers = [_ThreadRouter.install("stdout", py_out, saved[0] if saved else None),
                   _ThreadRouter.install("stderr", py_err, saved[1] if saved else None)]
        self._tap = WarningTap(LegacyExportWarning, hold=True).__enter__()
        self._state = [out_f, err_f, saved, py_out, py_err, routers]
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._state:
            return
        out_f, err_f, saved, py_out, py_err, routers = self._state
        self._state = []
        _flush(skip=routers)  # this thread's writes through the routers are in memory already
        if saved:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
        for router in reversed(routers):  # other threads write through the copies until here
            router.uninstall()
        for fd in saved:
            os.close(fd)
        self.stdout = _read(out_f) + py_out.getvalue()
        self.stderr = _read(err_f) + py_err.getvalue()
        if self._tap is not None:  # compat's warnings, now on the real streams
            self._tap.__exit__(exc_type, exc, tb)
            self._tap = None

    def replay(self) -> None:
        """Show what was captured (a successful attempt), on stderr: torch's prints never mix
        into the script's own stdout (``verbose=True`` turns capturing off altogether)."""
        for text in (self.stdout, self.stderr):
            if text:
                sys.stderr.write(text)

    def log(self, exc: BaseException) -> str:
        """The log of a failed attempt: its output, then the full exception."""
        parts = []
        if self.stdout.strip():
            parts.append("== stdout ==\n" + self.stdout)
        if self.stderr.strip():
            parts.append("== stderr ==\n" + self.stderr)
        parts.append("== exception ==\n" + "".join(traceback.format_exception(exc)))
        return "\n".join(parts)


class _ThreadRouter(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` during a capture: the capturing thread's writes go to
    ``captured``, every other thread's to the stream that was there before; when that stream
    writes to the redirected descriptor, to a copy of the real one (``real_fd``) instead, opened
    when another thread first writes (most exports print nothing from other threads)."""

    def __init__(self, name: str, captured: io.StringIO, previous: TextIO, real_fd: int | None) -> None:
        super().__init__()
        self._name = name
        self._thread: int | None = threading.get_ident()
        self._captured = captured
        self._previous = previous
        self._others: TextIO | None = previous  # None: the copy of ``real_fd``, not opened yet
        self._real_fd = real_fd
        self._lock = threading.Lock()
        if real_fd is not None and _fileno(previous) == (1 if name == "stdout" else 2):
            self._others = None

    @classmethod
    def install(cls, name: str, captured: io.StringIO, real_fd: int | None) -> _ThreadRouter:
        router = cls(name, captured, getattr(sys, name), real_fd)
        setattr(sys, name, router)
        return router

    def uninstall(self) -> None:
        """Put the previous stream back, unless someone replaced this router meanwhile: then it
        stays where they keep it, and passes every write to the previous stream from now on."""
        if getattr(sys, self._name) is self:
            setattr(sys, self._name, self._previous)
        with self._lock:
            others, self._others, self._thread = self._others, self._previous, None
        if others is not None and others is not self._previous:  # its descriptor is Capture's to close
            with contextlib.suppress(Exception):
                others.flush()

    def _target(self) -> Any:
        if threading.get_ident() == self._thread:
            return self._captured
        return self._others if self._others is not None else self._open_others()

    def _open_others(self) -> TextIO:
        with self._lock:
            if self._others is None:
                previous, fd = self._previous, self._real_fd
                assert fd is not None
                self._others = io.TextIOWrapper(
                    io.FileIO(fd, "w", closefd=False),
                    encoding=getattr(previous, "encoding", None) or "utf-8",
                    errors=getattr(previous, "errors", None) or "strict", write_through=True,
                )
            return self._others

    def write(self, text: str) -> int:
        return self._target().write(text)

    def writelines(self, lines: Any) -> None:
        self._target().writelines(lines)

    def flush(self) -> None:
        self._target().flush()

    def fileno(self) -> int:
        target = self._target()
        if target is self._captured:
            raise io.UnsupportedOperation("fileno")
        return target.fileno()

    def isatty(self) -> bool:
        target = self._target()
        return target is not self._captured and bool(target.isatty())

    def writable(self) -> bool:
        return True

    @property
    def closed(self) -> bool:  # type: ignore[override]
        return bool(getattr(self._target(), "closed", False))

    def close(self) -> None:
        """Nothing to close: the streams behind the router are not its own. (``io.IOBase``
        would flush them again when the router is freed after the capture.)"""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._previous, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._previous, "errors", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


def _fileno(stream: Any) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


#: per thread: scratch files a finished capture emptied, for the next one (creating and closing
#: two anonymous files cost a tenth of the shim's own work on a small export)
_spare = threading.local()
_SPARE_LIMIT = 4


def _scratch_file(name: str) -> Any:
    """An empty anonymous file for one descriptor's output: in memory where the system has
    ``memfd_create`` (no file system work), else a temporary file; one this thread emptied
    before if it has one."""
    spare = getattr(_spare, "files", None)
    if spare:
        return spare.pop()
    if hasattr(os, "memfd_create"):
        with contextlib.suppress(OSError):
            return open(os.memfd_create(f"compat-{name}", os.MFD_CLOEXEC), "w+b")
    return tempfile.TemporaryFile()


def _flush(skip: Sequence[Any] = ()) -> None:
    """Flush ``sys.stdout``/``sys.stderr`` (but the streams in ``skip``) and the C stdio buffers
    (torch's C++ prints); what fails to flush is left as it is."""
    for stream in (sys.stdout, sys.stderr):
        if any(stream is s for s in skip):
            continue
        try:
            stream.flush()
        except Exception:  # noqa: BLE001,S110 - a closed or broken stream: nothing to flush
            pass
    try:
        _c_fflush()(None)
    except Exception:  # noqa: BLE001,S110 - no C library to flush
        pass


@functools.cache
def _c_fflush() -> Any:
    import ctypes

    return ctypes.CDLL(None).fflush


def _read(fh: Any) -> str:
    """What the scratch file ``fh`` holds; the file is then emptied and kept for this thread's
    next capture (closed when that fails or enough are kept). Read through its descriptor (only
    fds 1/2 wrote to it): one ``fstat`` when nothing was printed, the common case."""
    try:
        fd = fh.fileno()
        size = os.fstat(fd).st_size
        text = ""
        if size:
            os.lseek(fd, 0, os.SEEK_SET)
            data = b""
            while len(data) < size and (chunk := os.read(fd, size - len(data))):
                data += chunk
            text = data.decode("utf-8", "replace")
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        fh.close()
        raise
    spare = _spare.__dict__.setdefault("files", [])
    if len(spare) < _SPARE_LIMIT:
        spare.append(fh)
    else:
        fh.close()
    return text
