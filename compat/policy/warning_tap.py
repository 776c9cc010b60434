"""See the warnings an export shows without touching the warning filters.

``warnings.catch_warnings`` would empty every module's once-per-location registry (the user's
and torch's own once-per-location warnings would show again after each export; compat's keep
theirs, see ``notices.emit``) and record every category, so the tap swaps
``warnings.showwarning`` instead: a warning of ``category`` (a class or a tuple) that ``accept``
takes (default: all) is recorded in ``seen``, and either shown at once or, with ``hold``, after
the tap closes. Others pass through.
``catch_warnings(record=True)`` keeps recording.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any, final


@final
class WarningTap:
    def __init__(self, category: type[Warning] | tuple[type[Warning], ...], hold: bool = False,
                 accept: Callable[[warnings.WarningMessage], bool] | None = None) -> None:
        self.category = category
        self.hold = hold
        self.accept = accept
        self.seen: list[warnings.WarningMessage] = []
        self._held: list[warnings.WarningMessage] = []
        self._showwarning: Any = None

    def __enter__(self) -> WarningTap:
        self._showwarning = warnings.showwarning
        warnings.showwarning = self._show
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if warnings.showwarning == self._show:
            warnings.showwarning = self._showwarning
        held, self._held = self._held, []
        for msg in held:
            self._forward(msg)

    def _show(self, message: Any, category: type[Warning], filename: str, lineno: int,
              file: Any = None, line: str | None = None) -> None:
        msg = warnings.WarningMessage(message, category, filename, lineno, file, line)
        if issubclass(category, self.category) and (self.accept is None or self.accept(msg)):
            self.seen.append(msg)
            if self.hold:
                self._held.append(msg)
                return
        self._forward(msg)

    def _forward(self, msg: warnings.WarningMessage) -> None:
        """Show ``msg`` as the replaced ``showwarning`` would (``catch_warnings(record=True)``
        records through ``_showwarnmsg_impl``, behind the default ``showwarning``)."""
        default = getattr(warnings, "_showwarning_orig", None)
        impl = getattr(warnings, "_showwarnmsg_impl", None)
        if self._showwarning is default and impl is not None:
            impl(msg)
        else:
            self._showwarning(msg.message, msg.category, msg.filename, msg.lineno, msg.file, msg.line)
