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


class _LogHold(logging.Filter):
    def __init__(self, held: Held) -> None:
        super().__init__()
        self.held = held

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.held.thread or record.name.split(".")[0] not in NOISY_PACKAGES:
            return True
        if not getattr(record, "_compat_held", False):  # once, whichever handlers it reaches
            record._compat_held = True
            self.held.keep(f"{record.levelname} {record.name}: {record.getMessage()}")
        return False


#: the noisy packages' loggers, and the names still held by placeholders; looked for again when
#: a logger was added or a placeholder became a logger (loggers are never removed)
_NOISY_LOGGERS: tuple[int, list[logging.Logger], list[str]] = (-1, [], [])


def _noisy_loggers() -> list[logging.Logger]:
    global _NOISY_LOGGERS
    registry = logging.Logger.manager.loggerDict
    count, loggers, placeholders = _NOISY_LOGGERS
    if count != len(registry) or any(isinstance(registry.get(n), logging.Logger) for n in placeholders):
        noisy = [(name, item) for name, item in list(registry.items()) if name.split(".")[0] in NOISY_PACKAGES]
        loggers = [item for _, item in noisy if isinstance(item, logging.Logger)]
        placeholders = [name for name, item in noisy if not isinstance(item, logging.Logger)]
        _NOISY_LOGGERS = (len(registry), loggers, placeholders)
    return loggers


def _handlers() -> list[logging.Handler]:
    """Every handler a record of a noisy package's logger can reach."""
    found: dict[int, logging.Handler] = {}
    loggers: list[logging.Logger] = [logging.getLogger(), *_noisy_loggers()]
    for logger in loggers:
        for handler in logger.handlers:
            found[id(handler)] = handler
    if logging.lastResort is not None:
        found[id(logging.lastResort)] = logging.lastResort
    return list(found.values())


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
        self._filter = _LogHold(self)
        self._handlers: list[logging.Handler] = []

    def __enter__(self) -> Held:
        if not self.enabled:
            return self
        self.thread = threading.get_ident()
        self._showwarning = warnings.showwarning
        warnings.showwarning = self._show
        self._handlers = _handlers()
        for handler in self._handlers:
            handler.addFilter(self._filter)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.enabled:
            return
        if warnings.showwarning == self._show:
            warnings.showwarning = self._showwarning
        for handler in self._handlers:
            handler.removeFilter(self._filter)
        self._handlers = []

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
