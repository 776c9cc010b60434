"""The one home of the private torch internals the custom-symbolics adapter touches.

Every access goes through a probe in ``compat.installed.torch_caps`` (``SYMBOLICS_INTERNALS``);
``tests/symbolics/test_torch_internals.py`` fails loudly when a torch upgrade moves them.
Nothing here imports onnx or onnxscript at module import.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterator
from typing import Any

from compat.installed import torch_caps


def _get(module: str, attr: str) -> Any:
    return getattr(importlib.import_module(module), attr)


def original_register() -> Callable[..., None] | None:
    """torch's own ``register_custom_op_symbolic`` (defining module, never a patched alias)."""
    if not torch_caps.has_legacy_symbolic_registry():
        return None
    return _get(*torch_caps.SYMBOLICS_INTERNALS[4])


def original_unregister() -> Callable[..., None] | None:
    if not torch_caps.has_legacy_symbolic_registry():
        return None
    return _get(*torch_caps.SYMBOLICS_INTERNALS[5])


def legacy_custom_symbolics() -> dict[str, dict[int, Callable[..., Any]]]:
    """Custom (user) overrides in torch's TorchScript registry: name -> {opset: fn}."""
    if not torch_caps.has_legacy_symbolic_registry():
        return {}
    registry = _get(*torch_caps.SYMBOLICS_INTERNALS[3])
    out: dict[str, dict[int, Callable[..., Any]]] = {}
    for name, group in getattr(registry, "_registry", {}).items():
        overrides = getattr(getattr(group, "_functions", None), "_overrides", None)
        if overrides:
            out[name] = dict(overrides)
    return out


def legacy_dispatch(name: str, opset: int) -> Callable[..., Any] | None:
    """The symbolic torch's TorchScript exporter would use for ``name`` at ``opset`` (a custom
    override or its own built-in one), or None when it has none / no registry."""
    if not torch_caps.has_legacy_symbolic_registry():
        return None
    _load_builtin_symbolics()
    registry = _get(*torch_caps.SYMBOLICS_INTERNALS[3])
    group = registry.get_function_group(name)
    return group.get(opset) if group is not None else None


@functools.cache
def _load_builtin_symbolics() -> None:
    """torch imports its opset-11+ symbolics only when a TorchScript export starts: load them,
    so the dispatch does not depend on whether one already ran in this process."""
    try:
        trigger = _get(*torch_caps.SYMBOLICS_INTERNALS[8])
    except (ImportError, AttributeError):
        return
    trigger()


def graph_context_class() -> type:
    """``jit_utils.GraphContext``: the ``g`` legacy symbolics receive."""
    return _get(*torch_caps.SYMBOLICS_INTERNALS[1])


@contextlib.contextmanager
def legacy_globals(opset: int) -> Iterator[None]:
    """Make symbolic_helper/opsetN helpers see ``opset`` as the export opset, then restore."""
    g = _get(*torch_caps.SYMBOLICS_INTERNALS[2])
    saved = (g.export_onnx_opset_version, g.in_onnx_export)
    g.export_onnx_opset_version = opset
    g.in_onnx_export = True
    try:
        yield
    finally:
        g.export_onnx_opset_version, g.in_onnx_export = saved


def scalar_type_analysis(graph: Any, opset: int) -> None:
    """The TorchScript exporter's scalar type promotion pass, run on ``graph`` in place
    (wrapped-number constants take the dtype of the tensor operand)."""
    module, attr = torch_caps.SYMBOLICS_INTERNALS[6]
    try:
        run = _get(module, attr)
    except AttributeError:
        return  # a torch without it: strict validation of the result reports any mismatch
    run(graph, True, opset)


def clear_shape_records(opset: int) -> None:
    """Forget the shapes torch's per-node ONNX inference recorded by value name (a global map
    the TorchScript exporter clears per export): scratch graphs reuse names, so a stale entry
    would give a new symbolic's values the shapes of an earlier one's."""
    import torch

    module, attr = torch_caps.SYMBOLICS_INTERNALS[7]
    try:
        run = _get(module, attr)
    except AttributeError:
        return
    run(torch._C.Graph(), {}, opset)  # clears the map on entry and exit


def current_tracer() -> Any:
    """The new exporter's recorder of the node being translated (has a ``nodes`` list)."""
    tracer = _get(*torch_caps.SYMBOLICS_INTERNALS[0])
    if tracer is None:
        raise RuntimeError("no ONNX graph under construction (called outside a translation)")
    return tracer


def check() -> list[str]:
    """Names of the internals a torch upgrade moved (empty when everything is in place)."""
    missing = []
    for module, attr in torch_caps.SYMBOLICS_INTERNALS:
        try:
            _get(module, attr)
        except (ImportError, AttributeError):
            missing.append(f"{module}.{attr}")
    return missing
