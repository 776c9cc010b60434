"""Whose code a legacy usage is in: the user's, or an installed distribution's.

A library that calls ``torch.onnx.register_custom_op_symbolic`` at import (torchvision's
``ops/_register_onnx_ops.py``) is not the user's file to rewrite: its usages get no ``Migrate
with:`` hint, are not added to the user's next export record, and are reported apart, once per
distribution (``third-party legacy usage: torchvision 0.28.0 registers 4 symbolics``).

A file is third-party when it lies under a site-packages folder (sysconfig's purelib/platlib,
``site``'s folders), when its top-level package sits beside the ``.dist-info`` of an installed
distribution (``pip install --target``; an ``.egg-info`` left by ``setup.py develop`` beside the
user's own package does not count), or when the running script belongs to a project (a
``pyproject.toml`` or ``.git`` above it) and the file lies outside that project. The distribution
and its version come from ``importlib.metadata``. Standard library only.
"""

from __future__ import annotations

import functools
import os
import site
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from compat.files import find_project_root

NOT_YOURS = "not your code, nothing to migrate"


@dataclass(frozen=True)
class Distribution:
    """The installed distribution a file belongs to (``version`` empty when unknown)."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name


def _site_folders() -> tuple[str, ...]:
    folders = {sysconfig.get_paths().get(k) for k in ("purelib", "platlib")}
    try:
        folders.update(site.getsitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site module
        pass
    folders.add(site.getusersitepackages())
    folders.update(p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages"))
    return tuple(os.path.realpath(f) + os.sep for f in folders if f)


def _project_of_main() -> str | None:
    """The project (pyproject.toml / .git folder) of the running script, else of the working
    folder: when there is no script file (``python -c``, a REPL) or the script is a tool of the
    Python installation (``pytest``'s entry point in a virtualenv)."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    start = os.getcwd()
    if isinstance(main_file, str) and main_file:
        main_path = os.path.realpath(main_file)
        tools = tuple(os.path.realpath(p) + os.sep for p in {sys.prefix, sys.exec_prefix, sys.base_prefix})
        if not main_path.startswith(tools + _site_folders()):
            start = os.path.dirname(main_path)
    return find_project_root(start)


@functools.lru_cache(maxsize=1)
def _packages() -> dict[str, list[str]]:
    import importlib.metadata

    return dict(importlib.metadata.packages_distributions())


def _version(name: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _container(path: str, module: str) -> str | None:
    """The folder holding the top-level package (or module) of ``module`` defined in ``path``."""
    parts = module.split(".")
    depth = len(parts) + (os.path.basename(path) == "__init__.py")
    folder = path
    for _ in range(depth):
        folder = os.path.dirname(folder)
    return folder if os.path.exists(os.path.join(folder, parts[0])) or \
        os.path.exists(os.path.join(folder, parts[0] + ".py")) else None


def _installed_beside(folder: str, top: str) -> Distribution | None:
    """The distribution whose ``.dist-info`` in ``folder`` lists the top-level name ``top``.
    Not an ``.egg-info``: ``setup.py develop`` leaves one beside the user's own package."""
    import importlib.metadata

    for name in os.listdir(folder):
        if not name.endswith(".dist-info"):
            continue
        dist = importlib.metadata.Distribution.at(os.path.join(folder, name))
        tops = (dist.read_text("top_level.txt") or "").split()
        if not tops:
            tops = [str(f).split("/")[0].removesuffix(".py") for f in dist.files or ()]
        if top in tops:
            return Distribution(dist.metadata["Name"] or top, dist.version or "")
    return None


@functools.lru_cache(maxsize=512)
def distribution_of(filename: str, module: str) -> Distribution | None:
    """The distribution whose code ``filename`` (module ``module``) is, or None for the user's
    own code (see the module docstring)."""
    if not filename or filename.startswith("<") or not module or module == "__main__":
        return None
    path = os.path.realpath(filename)
    top = module.split(".")[0]
    container = _container(path, module)
    try:
        beside = _installed_beside(container, top) if container else None
    except OSError:
        beside = None
    if beside is not None:
        return beside
    in_site = path.startswith(_site_folders())
    project = None if in_site else _project_of_main()
    outside = project is not None and not path.startswith(os.path.realpath(project) + os.sep)
    if not (in_site or outside):
        return None
    names = _packages().get(top) or []
    if names:
        return Distribution(names[0], _version(names[0]))
    return Distribution(top, "")


def line(distribution: str, version: str, usages: Iterable[dict[str, Any]]) -> str:
    """``third-party legacy usage: torchvision 0.28.0 registers 4 symbolics (ONX301; not your
    code, nothing to migrate)``: one distribution's usages in one line."""
    usages = list(usages)
    what = ", ".join(_phrase(str(u.get("api") or ""), int(u.get("count") or 0)) for u in usages)
    codes = ",".join(dict.fromkeys(str(u.get("code") or "") for u in usages))
    who = f"{distribution} {version}" if version else distribution
    return f"third-party legacy usage: {who} {what} ({codes}; {NOT_YOURS})"


def _phrase(api: str, count: int) -> str:
    name = api.rsplit(".", 1)[-1]
    if name in ("register_custom_op_symbolic", "unregister_custom_op_symbolic"):
        verb = "registers" if name.startswith("register") else "unregisters"
        return f"{verb} {count} symbolic{'' if count == 1 else 's'}"
    return f"uses {api} {count} time{'' if count == 1 else 's'}"
