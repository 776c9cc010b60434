"""Legacy-usage warnings pointing at the user's call line, and strict mode."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from compat import catalog
from compat.errors import LegacyExportWarning, StrictModeError
from compat.request import Usage


def _own_folders() -> tuple[str, ...]:
    """Where this project's code lives: the installed ``torch_onnx_compat`` folder (which holds
    the routes and the rewriter), or in a checkout ``compat/`` and its sibling folders."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isdir(os.path.join(here, "legacy")):
        return (here + os.sep,)
    root = os.path.dirname(here)
    return tuple(os.path.join(root, name) + os.sep for name in ("compat", "legacy", "dynamo", "migration"))


#: frames are ours by file, never by module name: a user's own ``migration.*``, ``dynamo.*`` or
#: ``legacy.*`` module is the user's call site
_OWN_FOLDERS = _own_folders()
_CONTEXTLIB = os.path.abspath(contextlib.__file__)


@dataclass(frozen=True)
class CallSite:
    filename: str
    lineno: int
    module: str
    globals: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"


@functools.lru_cache(maxsize=1024)
def is_own_file(filename: str) -> bool:
    """True for a file of this project (the shim, its routes, the rewriter) or contextlib."""
    path = os.path.abspath(filename)
    return path == _CONTEXTLIB or path.startswith(_OWN_FOLDERS)


def find_call_site(frame: FrameType | None = None) -> CallSite:
    """The first frame outside this project's code: the user's export call."""
    f = frame or sys._getframe(1)
    while f is not None:
        if not is_own_file(f.f_code.co_filename):
            return CallSite(f.f_code.co_filename, f.f_lineno, f.f_globals.get("__name__", ""), f.f_globals)
        f = f.f_back
    return CallSite("<unknown>", 0, "", {})


def make_warning(code: str, detail: str = "", path: str = "PATH") -> LegacyExportWarning:
    text = catalog.get(code).message(path)
    if detail:
        text = f"{text} [{detail}]"
    w = LegacyExportWarning(text)
    w.code = code
    return w


def warn_usages(usages: Iterable[Usage], site: CallSite) -> list[str]:
    """Emit one LegacyExportWarning per usage at the user's line; returns the codes."""
    codes: list[str] = []
    for usage in usages:
        if usage.code in codes:
            continue
        codes.append(usage.code)
        detail = usage.detail or (f"{usage.option}=" if usage.option else "")
        emit(make_warning(usage.code, detail, site.filename), site)
    return codes


#: what the "default", "module" and "once" actions already showed. Python keeps this in each
#: module's ``__warningregistry__``, but any change of the warning filters (torch's exporter
#: makes some during an export) empties those, and the same warning would show on every call.
_shown: set[tuple[Any, ...]] = set()


def _action(category: type[Warning], text: str, module: str, lineno: int) -> str:
    """The action the current filters give this warning (the matching of ``warnings``)."""
    for action, msg, cat, mod, line in warnings.filters:
        if (_matches(msg, text) and issubclass(category, cat) and _matches(mod, module)
                and (line == 0 or line == lineno)):
            return action
    return warnings.defaultaction


def _matches(pattern: Any, value: str) -> bool:
    # as CPython's check_matched: None matches all, a str (the built-in default filters) must be
    # equal, a compiled pattern must match
    if pattern is None:
        return True
    if isinstance(pattern, str):
        return pattern == value
    return bool(pattern.match(value))


def emit(warning: Warning, site: CallSite) -> None:
    """Warn as if from ``site`` so the default filter shows it once per call site."""
    text = str(warning)
    action = _action(type(warning), text, site.module, site.lineno)
    key = {"default": (site.filename, site.lineno, text), "module": (site.module, text),
           "once": (text,)}.get(action)
    if key is not None:
        if (action, *key) in _shown:
            return
        _shown.add((action, *key))
    registry = site.globals.setdefault("__warningregistry__", {}) if site.globals else None
    warnings.warn_explicit(
        warning, type(warning), site.filename, site.lineno,
        module=site.module or None, registry=registry,
    )


#: codes of legacy APIs used since the last export (registrations, mode helpers): the next
#: export's ledger record carries them
_pending_api_codes: list[str] = []


def api_usage(code: str, site: CallSite) -> None:
    """A legacy torch.onnx API that is not an export call: strict mode raises, else warn."""
    from compat.policy.config import resolve_strict

    if resolve_strict(None, str(site)):
        raise_strict([Usage(code, catalog.get(code).name)])
    emit(make_warning(code, path=site.filename), site)
    if code not in _pending_api_codes:
        _pending_api_codes.append(code)


def take_api_codes() -> list[str]:
    """The pending API codes (and forget them)."""
    codes = list(_pending_api_codes)
    _pending_api_codes.clear()
    return codes


def raise_strict(usages: Iterable[Usage]) -> None:
    """Strict mode: the first legacy usage becomes an error (all are listed)."""
    usages = list(usages)
    if not usages:
        return
    lines = [catalog.get(u.code).message() for u in usages]
    raise StrictModeError(
        "legacy torch.onnx usage (strict mode):\n  " + "\n  ".join(lines), usages[0].code
    )
