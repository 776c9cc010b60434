"""Legacy-usage warnings pointing at the user's call line, and strict mode."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
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


#: per module of a call site and warning category: the filters its registry was used under, and
#: the registry. warn_explicit empties a registry whenever any filter was touched since its last
#: use, even when the filters end as they were (torch's exporters enter ``catch_warnings``) or the
#: change is for another category (sympy adds one for its own warnings on import), so compat's
#: warnings would show again; this one is replaced only when the filters for its category differ.
_registries: dict[tuple[str, str, type[Warning]], tuple[tuple[Any, ...], dict[Any, Any]]] = {}
_registries_lock = threading.Lock()


def _filters_for(category: type[Warning]) -> tuple[Any, ...]:
    """The default action and the filters in force that can apply to ``category``."""
    context_filters = getattr(warnings, "_get_filters", None)  # 3.14: context-aware warnings
    filters = context_filters() if context_filters is not None else warnings.filters
    return (warnings.defaultaction, *(f for f in filters if not _other_category(f, category)))


def _other_category(entry: Any, category: type[Warning]) -> bool:
    """True for a filter entry that can never apply to ``category`` (a malformed entry may)."""
    cat = entry[2] if isinstance(entry, tuple) and len(entry) == 5 else None
    return isinstance(cat, type) and not issubclass(category, cat)


def _registry(site: CallSite, category: type[Warning]) -> dict[Any, Any]:
    """The once-per-location registry (``__warningregistry__``-style) of ``site``'s module."""
    key, filters = (site.module, site.filename, category), _filters_for(category)
    with _registries_lock:
        held = _registries.get(key)
        if held is None or held[0] != filters:
            held = _registries[key] = (filters, {})
        return held[1]


def emit(warning: Warning, site: CallSite) -> None:
    """Warn as if from ``site``. The warning filters decide what happens (``-W error::...``,
    ``simplefilter("always")``, pytest's filters); the actions that show a warning once per
    location ("default", "module", "once") count per call site, across exports."""
    category = type(warning)
    registry = _registry(site, category)
    if registry.get((str(warning), category, site.lineno)):
        return  # shown here under these same filters: warn_explicit's own first check
    recorded = dict(registry)
    try:
        # no module_globals: its loader lookup raises for ``python -c``'s __main__ (and 3.12+
        # warns when a script's __main__ has no __spec__); linecache reads the line by filename
        warnings.warn_explicit(
            warning, category, site.filename, site.lineno, module=site.module or None,
            registry=registry,
        )
    finally:
        # an emptied registry (filters touched, same content: see ``_registries``) gets back
        # what it recorded under these filters
        for key, value in recorded.items():
            registry.setdefault(key, value)


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
