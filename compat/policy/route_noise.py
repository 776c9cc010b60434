"""What torch warns and logs during a route attempt, kept off the user's terminal.

An export attempt makes torch (and onnxscript) warn and log things that are about torch, not
about the user's call: "torchvision is not installed" per optional operator, FutureWarnings of
its own internals, TracerWarnings the ledger already records. ``Held`` keeps them while a route
runs, on the exporting thread only: warnings whose category is not this project's and that do not
point at the model's own source, and log records of torch's, onnx's and onnxscript's loggers. A
failed attempt's log gets them (``add_to_log``); a successful one drops them. ``compat run -v``
(``TORCH_ONNX_COMPAT_VERBOSE=1``) or the call's ``verbose=True`` shows them as torch would.

The warning filters still decide first (``-W error::FutureWarning`` raises), and nothing touches
them: like ``warning_tap``, only ``warnings.showwarning`` is swapped, so no once-per-location
registry is emptied.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from types import TracebackType
from typing import Any, final

from compat.policy.notices import is_own_file

#: the top-level packages whose warnings and log records are torch's noise during an attempt
NOISY_PACKAGES = frozenset({"torch", "onnx", "onnxscript", "onnx_ir"})
#: torch's structured trace logger (``torch._logging._internal.trace_log``): its records are data
#: for the handlers torch adds to it (``draft_export`` reads the capture's failures from them),
#: never shown to anyone, so never held
STRUCTURED_TRACE_LOGGER = "torch.__trace"
#: held lines kept for a failed attempt's log (a graph dump can be long)
MAX_HELD = 1000
_TORCH_DIR = ""


def _torch_dir() -> str:
    global _TORCH_DIR
    if not _TORCH_DIR:
        import torch

        _TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    return _TORCH_DIR


def is_model_source(filename: str) -> bool:
    """A file of the model (the user's, or a library's modeling code), not of torch, the exporter,
    the standard library or this project."""
    if filename.startswith("<") or not filename.endswith(".py"):
        return False
    path = os.path.abspath(filename)
    stdlib = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
    if path.startswith(_torch_dir()) or is_own_file(path):
        return False
    if path.startswith(stdlib) and "site-packages" not in path:
        return False
    return not any(f"{os.sep}{pkg}{os.sep}" in path for pkg in NOISY_PACKAGES - {"torch"})


def _is_own_category(category: type[Warning]) -> bool:
    module = sys.modules.get(category.__module__)
    filename = getattr(module, "__file__", None)
    return bool(filename) and is_own_file(filename)


def is_noise(category: type[Warning], filename: str) -> bool:
    """A warning shown during a route attempt that is torch's, not this project's or the model's:
    a category of torch/onnx, or any category not of this project from outside the model's source."""
    if _is_own_category(category):
        return False
    if category.__module__.split(".")[0] in NOISY_PACKAGES:
        return True
    return not is_model_source(filename)


#: the threads holding their log records: thread id -> its active ``Held``s, innermost last
_holding: dict[int, list[Held]] = {}
_holding_lock = threading.Lock()
#: the ``logging.Logger.callHandlers`` the held version passes records on to (what it replaced)
_passed_on: Any = None
#: someone replaced the held version with a wrapper of theirs while it was installed (it stays
#: reached through their wrapper, which is theirs to keep)
_wrapped = False


def _would_show(logger: logging.Logger, record: logging.LogRecord) -> bool:
    """Whether some handler would take ``record`` (``Logger.callHandlers``' own walk)."""
    current: logging.Logger | None = logger
    while current is not None:
        if any(record.levelno >= h.level for h in current.handlers):
            return True
        current = current.parent if current.propagate else None
    last = logging.lastResort
    return last is not None and record.levelno >= last.level


def _held_call_handlers(logger: logging.Logger, record: logging.LogRecord) -> None:
    """``Logger.callHandlers`` while a ``Held`` is active: a noisy package's record of a holding
    thread is kept by that thread's innermost ``Held`` instead of reaching the handlers."""
    helds = _holding.get(threading.get_ident())
    if helds and record.name.split(".")[0] in NOISY_PACKAGES and record.name != STRUCTURED_TRACE_LOGGER:
        if _would_show(logger, record):
            helds[-1].keep(f"{record.levelname} {record.name}: {record.getMessage()}")
        return
    _passed_on(logger, record)


def _hold_logs(held: Held) -> None:
    """One class attribute for every logger, however many loggers and handlers there are: a
    filter on each handler meant walking every logger of the noisy packages per attempt, which
    cost more than the rest of ``Held`` together (a 1-block CNN's TorchScript export: 125-200 us
    of its ~8 ms, in place; the walk alone took a third of that)."""
    global _passed_on, _wrapped
    with _holding_lock:
        current = logging.Logger.__dict__.get("callHandlers")
        _wrapped = _wrapped and current is not _passed_on  # their wrapper is gone again
        if not _holding and current is not _held_call_handlers and not _wrapped:
            _passed_on = current
            logging.Logger.callHandlers = _held_call_handlers  # type: ignore[method-assign]
        _holding.setdefault(held.thread, []).append(held)


def _release_logs(held: Held) -> None:
    global _wrapped
    with _holding_lock:
        helds = _holding.get(held.thread, [])
        if held in helds:
            helds.remove(held)
        if not helds:
            _holding.pop(held.thread, None)
        if _holding:
            return
        if logging.Logger.__dict__.get("callHandlers") is _held_call_handlers:
            logging.Logger.callHandlers = _passed_on  # type: ignore[method-assign]
        else:
            _wrapped = True


@final
class Held:
    """While active and ``enabled``: torch's warnings and log records of this thread are held in
    ``lines`` instead of shown."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.lines: list[str] = []
        self.dropped = 0
        self.thread = threading.get_ident()
        self._showwarning: Any = None

    def __enter__(self) -> Held:
        if not self.enabled:
            return self
        self.thread = threading.get_ident()
        self._showwarning = warnings.showwarning
        warnings.showwarning = self._show
        _hold_logs(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.enabled:
            return
        if warnings.showwarning == self._show:
            warnings.showwarning = self._showwarning
        _release_logs(self)

    def keep(self, line: str) -> None:
        if len(self.lines) < MAX_HELD:
            self.lines.append(line)
        else:
            self.dropped += 1

    def add_to_log(self, failure: Any) -> None:
        """Put what was held into a failed attempt's log (``RouteFailed.log``)."""
        if not self.lines:
            return
        more = f"\n({self.dropped} more not kept)" if self.dropped else ""
        held = "== torch's warnings and log lines ==\n" + "\n".join(self.lines) + more + "\n"
        failure.log = f"{failure.log}\n{held}" if getattr(failure, "log", None) else held

    def _show(self, message: Any, category: type[Warning], filename: str, lineno: int,
              file: Any = None, line: str | None = None) -> None:
        if threading.get_ident() == self.thread and is_noise(category, filename):
            self.keep(warnings.formatwarning(message, category, filename, lineno, line).rstrip("\n"))
            return
        default = getattr(warnings, "_showwarning_orig", None)
        impl = getattr(warnings, "_showwarnmsg_impl", None)
        if self._showwarning is default and impl is not None:
            # catch_warnings(record=True) records through _showwarnmsg_impl
            impl(warnings.WarningMessage(message, category, filename, lineno, file, line))
        else:
            self._showwarning(message, category, filename, lineno, file, line)
