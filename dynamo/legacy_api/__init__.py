"""``torch.onnx.symbolic_helper`` / ``symbolic_opsetN`` for legacy symbolics, without TorchScript.

Old symbolic files import torch's helper modules and call their functions with the values our
graph context (``dynamo.symbolic_graph``) hands them. Two things keep that working:

- ``install_import_hook()``: where torch no longer ships those modules (or hides them,
  ``TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT=1``), importing ``torch.onnx.symbolic_helper`` /
  ``torch.onnx.symbolic_opset9..12`` gives ours, so old symbolic files still import;
- ``serving(opset)``: while a symbolic runs on our ``g``, the functions of torch's modules (when
  torch has them: a file may have bound ``parse_args`` before) run ours in this thread; every
  other caller (the TorchScript exporter itself, other threads) still gets torch's.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.abc
import importlib.machinery
import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

#: the module names served: torch.onnx.<name> -> ours
SERVED = ("symbolic_helper", "symbolic_opset9", "symbolic_opset10", "symbolic_opset11", "symbolic_opset12")
_TORCH_INTERNAL = "torch.onnx._internal.torchscript_exporter."
_ACTIVE = threading.local()
_LOCK = threading.Lock()
_patched: set[str] = set()


def ours(name: str) -> ModuleType:
    """Our module for ``torch.onnx.<name>``."""
    from . import (
        symbolic_helper,
        symbolic_opset9,
        symbolic_opset10,
        symbolic_opset11,
        symbolic_opset12,
    )

    modules = (symbolic_helper, symbolic_opset9, symbolic_opset10, symbolic_opset11, symbolic_opset12)
    return dict(zip(SERVED, modules))[name]


def in_symbolic() -> bool:
    """True while this thread runs a symbolic on our graph context."""
    return getattr(_ACTIVE, "depth", 0) > 0


def _dual(mine: Callable[..., Any], theirs: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(theirs)
    def call(*args: Any, **kwargs: Any) -> Any:
        return (mine if in_symbolic() else theirs)(*args, **kwargs)

    call.__compat_dual__ = True  # type: ignore[attr-defined]
    return call


def _torch_modules(name: str) -> list[ModuleType]:
    found = []
    for full in (_TORCH_INTERNAL + name, f"torch.onnx.{name}"):
        module = sys.modules.get(full)
        if module is None and full.startswith(_TORCH_INTERNAL):
            try:
                module = importlib.import_module(full)
            except ImportError:
                module = None
        if module is not None and not module.__name__.startswith(__name__):
            found.append(module)
    return found


def _patch_torch_modules() -> None:
    """Make torch's helper functions run ours inside ``serving`` (once per process)."""
    with _LOCK:
        for name in SERVED:
            mine = ours(name)
            for module in _torch_modules(name):
                if module.__name__ in _patched:
                    continue
                _patched.add(module.__name__)
                mine_names = set(getattr(mine, "__all__", ()))
                for attr, theirs in list(module.__dict__.items()):
                    if attr.startswith("__") or not inspect.isfunction(theirs) or \
                            not (theirs.__module__ or "").startswith("torch.onnx") or \
                            getattr(theirs, "__compat_dual__", False):
                        continue
                    # what we do not provide is refused by name inside a symbolic, never run on
                    # values torch's code cannot read
                    replacement = getattr(mine, attr) if attr in mine_names else mine.unavailable(module.__name__, attr)
                    module.__dict__[attr] = _dual(replacement, theirs)


@contextlib.contextmanager
def serving(opset: int) -> Iterator[None]:
    """Run legacy helper calls of this thread on our implementations, at ``opset``."""
    from ._globals import GLOBALS

    install_import_hook()
    _patch_torch_modules()
    saved = (GLOBALS.export_onnx_opset_version, GLOBALS.in_onnx_export)
    GLOBALS.export_onnx_opset_version, GLOBALS.in_onnx_export = opset, True
    _ACTIVE.depth = getattr(_ACTIVE, "depth", 0) + 1
    try:
        yield
    finally:
        _ACTIVE.depth -= 1
        GLOBALS.export_onnx_opset_version, GLOBALS.in_onnx_export = saved


def _serve_ours() -> bool:
    """Whether ``torch.onnx.symbolic_*`` should be ours: torch lacks them, or hides them."""
    from compat.installed import torch_caps

    if torch_caps.torchscript_hidden():
        return True
    try:
        return importlib.util.find_spec(_TORCH_INTERNAL + "symbolic_helper") is None
    except (ImportError, ValueError):
        return True


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``import torch.onnx.symbolic_helper`` (and opset9..12) with our modules."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        prefix, _, name = fullname.rpartition(".")
        if prefix != "torch.onnx" or name not in SERVED or not _serve_ours():
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: Any) -> ModuleType:
        return ours(spec.name.rpartition(".")[2])

    def exec_module(self, module: ModuleType) -> None:
        return None


_FINDER = _Finder()


def install_import_hook() -> None:
    """Serve our modules as ``torch.onnx.symbolic_*`` where torch lacks or hides them (idempotent)."""
    with _LOCK:
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
    if not _serve_ours():
        return
    onnx = importlib.import_module("torch.onnx")  # its own imports would rebind the names after us
    for name in SERVED:
        mine = ours(name)
        sys.modules[f"torch.onnx.{name}"] = mine
        setattr(onnx, name, mine)
