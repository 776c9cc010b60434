"""What an export route prints, kept off the user's terminal unless the route succeeds.

``Capture`` holds what torch prints while a route runs (progress lines, logging, graph dumps;
Python objects and file descriptors 1/2). A success replays it unchanged; a failure keeps it,
with the exception's traceback, for the log file the ledger names (``RouteFailed.log``).
compat's own warnings are held and shown after the route, whatever its fate. File descriptors
are process-wide: exports run one at a time (``dispatch._LOCK``), and another thread's output
during an export is captured with it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import traceback
from types import TracebackType
from typing import Any, final

from compat.errors import LegacyExportWarning
from compat.policy.warning_tap import WarningTap


@final
class Capture:
    """While active, stdout/stderr (Python objects and fds 1/2) go to temporary files; compat's
    own warnings are held and shown after (they are for the user whatever the attempt's fate)."""

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
        out_f, err_f = tempfile.TemporaryFile(), tempfile.TemporaryFile()
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
        redirects = contextlib.ExitStack()
        redirects.enter_context(contextlib.redirect_stdout(py_out))
        redirects.enter_context(contextlib.redirect_stderr(py_err))
        self._tap = WarningTap(LegacyExportWarning, hold=True).__enter__()
        self._state = [out_f, err_f, saved, py_out, py_err, redirects]
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._state:
            return
        out_f, err_f, saved, py_out, py_err, redirects = self._state
        self._state = []
        redirects.close()
        _flush()
        if saved:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
        self.stdout = _read(out_f) + py_out.getvalue()
        self.stderr = _read(err_f) + py_err.getvalue()
        if self._tap is not None:  # compat's warnings, now on the real streams
            self._tap.__exit__(exc_type, exc, tb)
            self._tap = None

    def replay(self) -> None:
        """Show what was captured, as it would have shown (a successful attempt)."""
        if self.stdout:
            sys.stdout.write(self.stdout)
        if self.stderr:
            sys.stderr.write(self.stderr)

    def log(self, exc: BaseException) -> str:
        """The log of a failed attempt: its output, then the full exception."""
        parts = []
        if self.stdout.strip():
            parts.append("== stdout ==\n" + self.stdout)
        if self.stderr.strip():
            parts.append("== stderr ==\n" + self.stderr)
        parts.append("== exception ==\n" + "".join(traceback.format_exception(exc)))
        return "\n".join(parts)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):  # C stdio buffers (torch's C++ prints)
        import ctypes

        ctypes.CDLL(None).fflush(None)


def _read(fh: Any) -> str:
    with fh:
        fh.seek(0)
        return fh.read().decode("utf-8", "replace")
