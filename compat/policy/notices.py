"""Legacy-usage warnings pointing at the user's call line, and strict mode."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from compat import catalog
from compat.errors import LegacyExportWarning, StrictModeError
from compat.policy import third_party
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


#: the comment compat.migrate writes above a call it pins (``dynamo=False``, a kept
#: ``compat.export``): migration/rules/onx0.py, migration/pins.py
_PIN_COMMENT = re.compile(r"^\s*#\s*(?:TODO\()?compat\.migrate\)?:")


def pinned_by_migrate(site: CallSite) -> bool:
    """The call at ``site`` sits under compat.migrate's pin comment (the comment lines right
    above the call's first line)."""
    if not site.lineno or site.filename.startswith("<"):
        return False
    import linecache

    number = site.lineno - 1
    while number > 0:
        line = linecache.getline(site.filename, number)
        if not line.lstrip().startswith("#"):
            return False
        if _PIN_COMMENT.match(line):
            return True
        number -= 1
    return False


def explain() -> bool:
    """Long texts (why, the replacement, the migrate command) instead of one line per usage."""
    from compat.policy.config import env_explain

    return env_explain()


def make_warning(code: str, detail: str = "", path: str = "PATH", subject: str = "",
                 select: str | None = None, fixable: bool = True,
                 owner: third_party.Distribution | None = None) -> LegacyExportWarning:
    """The warning for one legacy usage: by default one line (code, ``subject``, the short fix,
    ``detail``); with ``explain()`` the catalog's long text for ``path``, whose migrate command
    selects ``select`` (default: the codes the entry's fix may need); no command when not
    ``fixable`` (a ``compat.export`` call: the rewriter leaves it alone). A usage in an installed
    distribution's code (``owner``) gets the one line and says whose it is: no command to
    migrate a file that is not the user's."""
    entry = catalog.get(code)
    if owner is not None:
        text = f"{entry.short_message(subject, detail)} (in {owner}: {NOT_YOURS})"
    elif explain():
        text = entry.message(path, select, None if fixable else "none")
        detail = detail or subject
        text = f"{text} [{detail}]" if detail else text
    else:
        text = entry.short_message(subject, detail)
    w = LegacyExportWarning(text)
    w.code = code
    return w


def warn_usages(usages: Iterable[Usage], site: CallSite) -> list[str]:
    """Emit one LegacyExportWarning per usage at the user's line; returns the codes."""
    usages = list(usages)
    present = {u.code for u in usages}
    codes: list[str] = []
    owner = third_party.distribution_of(site.filename, site.module)
    for usage in usages:
        if usage.code in codes:
            continue
        codes.append(usage.code)
        subject = usage.detail or ((f"{usage.option}=" if usage.option.isidentifier() else usage.option)
                                   if usage.option else "")  # an API (ONX403) is no keyword
        select = catalog.get(usage.code).fix_select(present)
        emit(make_warning(usage.code, path=site.filename, subject=subject, select=select,
                          fixable=not usage.via_shim, owner=owner), site)
    return codes


#: per module of a call site and warning category: the filters its registry was used under, and
#: the registry. warn_explicit empties a registry whenever any filter was touched since its last
#: use, even when the filters end as they were (torch's exporters enter ``catch_warnings``) or the
#: change is for another category (sympy adds one for its own warnings on import), so compat's
#: warnings would show again; this one is replaced only when the filters for its category differ.
#: Bounded for long processes: the registries of the latest ``MAX_SITES`` modules are kept (least
#: recently used dropped), each with at most ``MAX_PER_SITE`` shown warnings (oldest dropped);
#: a dropped entry can only make a warning show once more.
_registries: OrderedDict[tuple[str, str, type[Warning]], tuple[tuple[Any, ...], dict[Any, Any]]] = OrderedDict()
_registries_lock = threading.Lock()
MAX_SITES = 512
MAX_PER_SITE = 256


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
        _registries.move_to_end(key)
        while len(_registries) > MAX_SITES:
            _registries.popitem(last=False)
        return held[1]


def _trim(registry: dict[Any, Any]) -> None:
    """Keep the latest ``MAX_PER_SITE`` shown warnings (and warn_explicit's ``version`` key)."""
    excess = len(registry) - MAX_PER_SITE - ("version" in registry)
    if excess > 0:
        for key in [k for k in registry if k != "version"][:excess]:
            del registry[key]


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
        _trim(registry)


#: codes of legacy APIs used since the last export (registrations, mode helpers): the next
#: export's ledger record carries them
_pending_api_codes: list[str] = []
NOT_YOURS = third_party.NOT_YOURS
#: legacy API usages by installed distributions' code: (name, version) -> {(code, api): count}
_third_party: OrderedDict[tuple[str, str], dict[tuple[str, str], int]] = OrderedDict()
_third_party_lock = threading.Lock()
#: ``compat run`` prints the tally at exit (``third_party_lines``) instead of a warning at the
#: first usage of each distribution
_third_party_held = False


def api_usage(code: str, site: CallSite, api: str | None = None) -> None:
    """A legacy torch.onnx API (``api``, default the catalog's name for ``code``) that is not an
    export call: strict mode raises, else warn; kept for the next export's record. In an
    installed distribution's code it is only counted (``third_party_usages``)."""
    from compat.policy.config import resolve_strict

    owner = third_party.distribution_of(site.filename, site.module)
    if owner is not None:
        _count_third_party(owner, code, api or catalog.get(code).name, site)
        return
    if resolve_strict(None, str(site)):
        raise_strict([Usage(code, catalog.get(code).name)], site.filename)
    emit(make_warning(code, path=site.filename), site)
    if code not in _pending_api_codes:
        _pending_api_codes.append(code)


def take_api_codes() -> list[str]:
    """The pending API codes (and forget them)."""
    codes = list(_pending_api_codes)
    _pending_api_codes.clear()
    return codes


def _count_third_party(owner: third_party.Distribution, code: str, api: str, site: CallSite) -> None:
    key = (owner.name, owner.version)
    with _third_party_lock:
        first = key not in _third_party
        usages = _third_party.setdefault(key, {})
        usages[code, api] = usages.get((code, api), 0) + 1
        while len(_third_party) > MAX_SITES:
            _third_party.popitem(last=False)
    if first and not _third_party_held:
        w = LegacyExportWarning(f"third-party legacy usage: {owner} uses {api} ({code}; {NOT_YOURS})")
        w.code = code
        emit(w, site)


def hold_third_party(held: bool) -> None:
    """``compat run``: no warning at a distribution's first usage; the tally is printed at exit."""
    global _third_party_held
    _third_party_held = held


def third_party_usages() -> list[dict[str, Any]]:
    """This process's legacy API usages by installed distributions so far (the ledger's
    ``third_party`` field): ``{distribution, version, code, api, count}`` each."""
    with _third_party_lock:
        return [{"distribution": name, "version": version, "code": code, "api": api, "count": n}
                for (name, version), usages in _third_party.items()
                for (code, api), n in usages.items()]


def third_party_lines(usages: Iterable[dict[str, Any]] | None = None) -> list[str]:
    """One ``third_party_line`` per distribution of ``usages`` (default: this process's)."""
    by_dist: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for u in third_party_usages() if usages is None else usages:
        by_dist.setdefault((str(u.get("distribution")), str(u.get("version") or "")), []).append(u)
    return [third_party.line(name, version, us) for (name, version), us in by_dist.items()]


def raise_strict(usages: Iterable[Usage], path: str | None = None) -> None:
    """Strict mode: the legacy usages become one error (code ``usages[0]``): one line naming
    every usage (code and option); with ``explain()`` the long text of each, one per line, its
    migrate command naming ``path`` (default: the file of the user's call)."""
    usages = list(usages)
    if not usages:
        return
    if explain():
        path = path or find_call_site().filename
        present = {u.code for u in usages}
        lines = [catalog.get(u.code).message(path, catalog.get(u.code).fix_select(present),
                                             "none" if u.via_shim else None)
                 for u in usages]
        text = "legacy torch.onnx usage (strict mode):\n  " + "\n  ".join(lines)
    else:
        found = ", ".join(f"{u.code} {u.detail or _option(u)}" for u in usages)
        text = f"legacy torch.onnx usage (strict mode): {found}"
    raise StrictModeError(text, usages[0].code)


def _option(usage: Usage) -> str:
    return f"{usage.option}=" if usage.option and "." not in usage.option else usage.option


#: what is told about route notes (``compat run`` prints them); None: the ledger alone has them
_note_listener: Callable[[str, str], None] | None = None
#: call sites whose route note was told (bounded; once per site)
_noted: OrderedDict[str, None] = OrderedDict()
_noted_lock = threading.Lock()


def set_note_listener(listener: Callable[[str, str], None] | None) -> None:
    """``listener(call_site, note)`` hears each route note, once per call site (``compat run``)."""
    global _note_listener
    _note_listener = listener
    with _noted_lock:
        _noted.clear()


def route_note(call_site: str, note: str) -> None:
    """Tell the listener (if any) about a route note of ``call_site``, the first time only."""
    listener = _note_listener
    if listener is None:
        return
    with _noted_lock:
        if call_site in _noted:
            return
        _noted[call_site] = None
        while len(_noted) > MAX_SITES:
            _noted.popitem(last=False)
    listener(call_site, note)
