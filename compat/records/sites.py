"""Where a call site lies in its project, so a ledger outlives the checkout's folder name.

A ledger record's ``call_site`` is an absolute ``path:line``. Each record also gets
``project_root`` (the nearest folder holding a ``pyproject.toml`` or ``.git`` above the call's
file; without one, the running script's folder or the working folder when the file lies under
it) and ``call_site_rel`` (``call_site`` relative to that root). ``compat.migrate --ledger`` and
``verify-migration`` match call sites by ``call_site_rel`` first, so a tree copied from ``old/``
to ``mig1/`` keeps its evidence. Standard library only.
"""

from __future__ import annotations

import functools
import os
import sys

from compat.files import find_project_root


def split_site(call_site: object) -> tuple[str, int] | None:
    """``(path, line)`` of a ``path:line`` call site, or None (``<unknown>:0``, not a string)."""
    if not isinstance(call_site, str):
        return None
    path, sep, line = call_site.rpartition(":")
    if not sep or not line.isdigit() or not path or path.startswith("<"):
        return None
    return path, int(line)


@functools.lru_cache(maxsize=1024)
def _marked_root(folder: str) -> str | None:
    return find_project_root(folder)


def _under(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # another drive
        return False


def _fallback_roots() -> list[str]:
    """Where a file without a pyproject.toml / .git above it counts from: the running script's
    folder (``compat run script.py``, ``python script.py``), then the working folder."""
    out = []
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if isinstance(main_file, str) and main_file:
        out.append(os.path.dirname(os.path.abspath(main_file)))
    out.append(os.getcwd())
    return out


def project_root(path: str) -> str | None:
    """The project root of the file ``path`` (see the module docstring), or None."""
    path = os.path.abspath(path)
    root = _marked_root(os.path.dirname(path))
    if root is not None:
        return root
    return next((f for f in _fallback_roots() if _under(path, f)), None)


def site_fields(call_site: object) -> dict[str, str]:
    """``{"project_root": ..., "call_site_rel": "rel/path.py:LINE"}`` for a record's
    ``call_site``; empty when it names no file (``<stdin>``, ``<unknown>``)."""
    site = split_site(call_site)
    if site is None or not os.path.isabs(site[0]):
        return {}
    path, line = site
    try:
        root = project_root(path)
    except OSError:
        return {}
    if root is None:
        return {}
    rel = os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
    return {"project_root": root, "call_site_rel": f"{rel}:{line}"}
