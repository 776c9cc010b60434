"""The shim's own route packages (``legacy``, ``dynamo``), never a same-named package of the user's.

Installed from the wheel they are ``torch_onnx_compat.legacy`` and ``torch_onnx_compat.dynamo``:
nothing can shadow them. In a checkout they are the top-level folders next to ``compat/``; when
``sys.path`` (a user project's own ``legacy/`` beside the script) or ``sys.modules`` holds another
package of that name, ours is loaded from its folder under a private name instead.

That is why ``compat`` reaches the route packages only through :func:`route_module`, never with a
plain ``import legacy`` / ``import dynamo`` (which a user's package could answer): this module and
``compat._lazy`` (the public API's PEP 562 table) are the only places that load the project's
own modules by a string (``tests/test_import_contracts.py`` checks it).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

ROUTE_PACKAGES = ("legacy", "dynamo")

#: the ``compat`` (installed: ``torch_onnx_compat``) package folder
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: installed layout: the route packages are subpackages of that one
_INSTALLED = os.path.isdir(os.path.join(_HERE, "legacy"))
_CHECKOUT_ROOT = os.path.dirname(_HERE)
_ALIAS_PREFIX = "_torch_onnx_compat_"
_TOP = __package__.rpartition(".")[0]  # compat, or torch_onnx_compat when installed
_lock = threading.RLock()


#: ``route_module``'s answers, each kept once its import has finished (never a module another
#: thread is still initializing): every export asks for its route's package
_found: dict[str, ModuleType] = {}


def route_module(dotted: str) -> ModuleType:
    """Our ``legacy``/``dynamo`` package or one of its modules, e.g. ``"dynamo.torch_internals"``."""
    module = _found.get(dotted)
    if module is not None:
        return module
    top, _, rest = dotted.partition(".")
    if top not in ROUTE_PACKAGES:
        raise ValueError(f"not a route package: {dotted!r}")
    if _INSTALLED:
        module = importlib.import_module(f"{_TOP}.{dotted}")
    else:
        package = _checkout_package(top)
        module = importlib.import_module(f"{package.__name__}.{rest}") if rest else package
    _found[dotted] = module
    return module


def _is_ours(module: ModuleType | None, name: str) -> bool:
    origin = getattr(module, "__file__", None)
    return origin is not None and os.path.abspath(origin) == os.path.join(_CHECKOUT_ROOT, name, "__init__.py")


def _checkout_package(name: str) -> ModuleType:
    loaded = sys.modules.get(name)
    if _is_ours(loaded, name):
        # not ``loaded`` itself: another thread may be running its ``__init__`` right now (a
        # "partially initialized module" to this one); import_module waits on its import lock
        return importlib.import_module(name)
    alias = _ALIAS_PREFIX + name
    with _lock:
        if alias in sys.modules:
            return sys.modules[alias]
        if loaded is None and _resolves_to_ours(name):
            return importlib.import_module(name)
        folder = os.path.join(_CHECKOUT_ROOT, name)
        # under the private name, so its relative imports resolve to its own modules
        spec = importlib.util.spec_from_file_location(
            alias, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
        if spec is None or spec.loader is None:
            raise ImportError(f"torch-onnx-compat: the {name!r} route package is missing from {folder}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[alias] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[alias]
            raise
        return module


def _resolves_to_ours(name: str) -> bool:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None and (
        os.path.abspath(spec.origin) == os.path.join(_CHECKOUT_ROOT, name, "__init__.py"))


#: what a route package takes from its ``route`` module: ``export``, and ``steps`` where the
#: route has it (``compat.routing.steps``: the exporter called from ``compat.export``'s frame)
ROUTE_FUNCTIONS = ("export", "steps")


def lazy_export(package: str) -> Callable[[str], Any]:
    """A route package's module ``__getattr__``: its ``export`` (and ``steps``) are those of
    ``<package>.route`` themselves, imported on first use so that importing the package stays
    cheap. Not wrappers: torch's tracer records the whole Python stack at each traced operation,
    so every frame between the caller and the exporter costs."""

    def __getattr__(name: str) -> Any:
        if name not in ROUTE_FUNCTIONS:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        function = getattr(importlib.import_module(".route", package), name, None)
        if function is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, function)
        return function

    return __getattr__
