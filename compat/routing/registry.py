"""Custom op symbolic registrations (``register_custom_op_symbolic``) for both routes.

Registrations are forwarded to torch's TorchScript registry when torch still has it (so the
TorchScript route sees them) and recorded here; the torch.export route reads them through
``registrations()`` / ``lookup()``, which also find registrations made directly with torch.
This module must not import onnx or onnxscript.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from compat.errors import CompatTypeError, CompatValueError
from compat.routing.route_packages import route_module

_NAME_RE = re.compile(r"^[a-zA-Z0-9-_]+::[a-zA-Z-_]+[a-zA-Z0-9-_]*$")
_LOCK = threading.Lock()
# name -> {opset: fn}; the record when torch has no TorchScript registry, and provenance otherwise
_OWN: dict[str, dict[int, Callable[..., Any]]] = {}


def _torch_internals() -> ModuleType:
    """``dynamo.torch_internals``, where torch's TorchScript symbolic registry is read: through
    route_packages (a plain ``import dynamo`` could load a user's package of that name)."""
    return route_module("dynamo.torch_internals")


def _torch_originals() -> tuple[Callable[..., None] | None, Callable[..., None] | None]:
    # Taken from torch's defining module, not torch.onnx, so a patched
    # torch.onnx.register_custom_op_symbolic never recurses into us.
    torch_internals = _torch_internals()
    return torch_internals.original_register(), torch_internals.original_unregister()


_ORIGINALS = _torch_originals()
# old symbolic files import torch.onnx.symbolic_helper: ours where torch lacks or hides it
route_module("dynamo.legacy_api").install_import_hook()


@dataclass(frozen=True)
class Registration:
    """One symbolic: ``name`` is ``namespace::op`` (``aten::`` for ``::op``)."""

    name: str
    opset_version: int
    fn: Callable[..., Any]
    source: str  # "compat" (through us) or "torch" (made directly with torch)

    @property
    def namespace(self) -> str:
        return self.name.split("::", 1)[0]

    @property
    def op(self) -> str:
        return self.name.split("::", 1)[1]


def normalize_name(symbolic_name: str) -> str:
    """``::gelu`` -> ``aten::gelu``; raise ``CompatValueError`` unless ``namespace::op``."""
    if not isinstance(symbolic_name, str):
        raise CompatTypeError(f"symbolic_name must be a str like 'mydomain::MyOp', got {symbolic_name!r}")
    name = f"aten{symbolic_name}" if symbolic_name.startswith("::") else symbolic_name
    if not _NAME_RE.match(name):
        raise CompatValueError(
            f"cannot register {symbolic_name!r}: the name must be 'namespace::op' (letters, digits, "
            "'-' and '_'; the op starts with a letter), e.g. 'mmcv::nms' or '::gelu'"
        )
    if name.startswith("onnx::"):
        raise CompatValueError(f"cannot register {symbolic_name!r}: the onnx domain cannot be modified")
    return name


def _check_opset(opset_version: Any) -> int:
    if isinstance(opset_version, bool) or not isinstance(opset_version, int):
        raise CompatTypeError(f"opset_version must be an int, got {opset_version!r}")
    if opset_version < 1:
        raise CompatValueError(f"opset_version must be >= 1, got {opset_version}")
    return opset_version


def register_custom_op_symbolic(symbolic_name: str, symbolic_fn: Callable[..., Any], opset_version: int) -> None:
    """Register ``symbolic_fn(g, *inputs)`` for ``symbolic_name`` from ``opset_version`` on."""
    name = normalize_name(symbolic_name)
    if not callable(symbolic_fn):
        raise CompatTypeError(f"symbolic_fn for {name!r} must be callable, got {type(symbolic_fn).__name__}")
    opset = _check_opset(opset_version)
    with _LOCK:
        if _ORIGINALS[0] is not None:
            _ORIGINALS[0](name, symbolic_fn, opset)
        _OWN.setdefault(name, {})[opset] = symbolic_fn


def unregister_custom_op_symbolic(symbolic_name: str, opset_version: int) -> None:
    """Remove the registration of ``symbolic_name`` at exactly ``opset_version``."""
    name = normalize_name(symbolic_name)
    opset = _check_opset(opset_version)
    with _LOCK:
        if _ORIGINALS[1] is not None and opset in _torch_registered().get(name, {}):
            _ORIGINALS[1](name, opset)
        versions = _OWN.get(name, {})
        versions.pop(opset, None)
        if not versions:
            _OWN.pop(name, None)


def _torch_registered() -> dict[str, dict[int, Callable[..., Any]]]:
    return _torch_internals().legacy_custom_symbolics()


def registrations() -> list[Registration]:
    """Every live registration, whether made through us or directly with torch."""
    with _LOCK:
        if _ORIGINALS[0] is not None:
            # torch's registry is the truth: direct torch.onnx.unregister_... calls count too
            live = _torch_registered()
        else:
            # a torch that ships the registry but hides it: what a library registered directly
            # with torch still counts (never skipped), ours on top
            live = {n: dict(v) for n, v in _torch_internals().legacy_custom_symbolics(hidden_too=True).items()}
            for n, v in _OWN.items():
                live.setdefault(n, {}).update(v)
        out = []
        for name, versions in sorted(live.items()):
            for opset, fn in sorted(versions.items()):
                mine = _OWN.get(name, {}).get(opset) is fn
                out.append(Registration(name, opset, fn, "compat" if mine else "torch"))
        return out


def lookup(name: str, opset: int) -> Registration | None:
    """The registration of ``name`` for ``opset``: the highest registered opset <= ``opset``."""
    best = None
    for reg in registrations():
        if reg.name == name and reg.opset_version <= opset and (
            best is None or reg.opset_version > best.opset_version
        ):
            best = reg
    return best


def active(opset: int) -> dict[str, Registration]:
    """name -> the registration that applies at ``opset``: as the TorchScript exporter decides,
    so a registration below one of torch's own symbolics for that op (``::gelu`` at opset 1,
    torch's own gelu at 9) does not apply at opset 18 on either route."""
    out: dict[str, Registration] = {}
    for reg in registrations():
        if reg.opset_version <= opset:
            cur = out.get(reg.name)
            if cur is None or reg.opset_version > cur.opset_version:
                out[reg.name] = reg
    if _ORIGINALS[0] is not None:
        for name, reg in list(out.items()):
            chosen = _torch_internals().legacy_dispatch(name, opset)
            if chosen is not None and chosen is not reg.fn:
                del out[name]
    return out


__all__ = [
    "Registration",
    "active",
    "lookup",
    "normalize_name",
    "register_custom_op_symbolic",
    "registrations",
    "unregister_custom_op_symbolic",
]
