"""The one home of the private torch pieces the shim itself touches (outside both routes).

``nn.Module``'s slot dictionaries (``_parameters``, ``_buffers``, ``_non_persistent_buffers_set``),
which the model snapshot reads and restores, and ``_modules``, which it walks, and ``torch.utils._pytree``, which the input layout
and the parity check flatten calls with. The routes' own pieces live in ``dynamo/torch_internals.py``
(the TorchScript route touches none). ``check()`` names whatever a torch upgrade moved;
``tests/core/test_shim_internals.py`` fails loudly on that torch, and a piece missing when used
raises ``TorchInternalsMoved``.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from typing import Any

from compat.errors import TorchInternalsMoved

#: (module, dotted attribute) of every private piece used here
INTERNALS: tuple[tuple[str, str], ...] = (
    ("torch.utils._pytree", "tree_leaves"),
    ("torch.utils._pytree", "tree_flatten"),
    ("torch.utils._pytree", "tree_unflatten"),
    # the acceptance check runs the eager reference as the exporter sees the model
    ("torch.onnx._internal.exporter._flags", "set_onnx_exporting_flag"),
)

#: instance attributes of every ``nn.Module`` the snapshot relies on, with their types
MODULE_SLOTS: tuple[tuple[str, type], ...] = (
    ("_parameters", dict),
    ("_buffers", dict),
    ("_non_persistent_buffers_set", set),
)
_PARAMS, _BUFFERS, _NON_PERSISTENT = (name for name, _ in MODULE_SLOTS)


def lookup(module: str, attr: str) -> Any:
    """``module.attr`` (``attr`` may be dotted); ImportError or AttributeError if it is gone."""
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def need(module: str, attr: str) -> Any:
    """``module.attr``, or ``TorchInternalsMoved`` naming it and the installed torch."""
    try:
        return lookup(module, attr)
    except (ImportError, AttributeError) as exc:
        raise moved(f"{module}.{attr}") from exc


def moved(what: str) -> TorchInternalsMoved:
    """The error for a private torch piece ``what`` that the installed torch no longer has."""
    from compat.installed import torch_caps

    return TorchInternalsMoved(what, torch_caps.torch_version_str())


def module_slots(m: Any) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """The live ``_parameters``, ``_buffers`` and ``_non_persistent_buffers_set`` of module ``m``
    (the objects themselves: the snapshot restores them in place)."""
    own = m.__dict__
    params, buffers, non_persistent = own.get(_PARAMS), own.get(_BUFFERS), own.get(_NON_PERSISTENT)
    if type(params) is dict and type(buffers) is dict and type(non_persistent) is set:
        return params, buffers, non_persistent  # as every module of a torch that has not moved them
    slots = []
    for name, kind in MODULE_SLOTS:
        value = m.__dict__.get(name)
        if not isinstance(value, kind):
            raise moved(f"torch.nn.Module.{name} (a {kind.__name__} on every module)")
        slots.append(value)
    return slots[0], slots[1], slots[2]


def writes_positional(func: Any) -> bool:
    """Whether torch's op schema for ``func`` writes to an argument it takes positionally
    (``aten.add_``, ``_native_batch_norm_legit``; not an out-variant's keyword-only ``out=``).
    ``func`` is an ``OpOverload`` (its own schema) or a builtin torch function or Tensor method
    (every overload of the aten op of its name); False when torch has no such op."""
    schema = getattr(func, "_schema", None)
    if schema is not None:
        return _schema_writes(schema)
    import torch

    name = getattr(func, "__name__", None)
    try:
        packet = getattr(torch.ops.aten, name) if isinstance(name, str) and name.isidentifier() else None
        overloads = packet.overloads() if packet is not None else ()
    except (AttributeError, RuntimeError):
        return False
    return any(_schema_writes(getattr(packet, o)._schema) for o in overloads)


def _schema_writes(schema: Any) -> bool:
    for arg in schema.arguments:
        alias = arg.alias_info
        if alias is not None and alias.is_write and not arg.kwarg_only:
            return True
    return False


def tensor_version(t: Any) -> int:
    """``t``'s version counter: every in-place write through ``t`` or a view of it moves it
    (one through ``.data`` or numpy does not)."""
    return int(t._version)


def has_tracer_name_lookup() -> bool:
    """Whether torch's tracer takes a replacement for its value-name lookup (the TorchScript
    route's copy-on-write guard needs one that sees through its own frames)."""
    import torch

    try:
        return callable(torch._C._tracer_set_get_unique_name_fn) and callable(
            torch.jit._trace._create_interpreter_name_lookup_fn())
    except (AttributeError, TypeError):
        return False


def set_tracer_name_lookup(lookup: Any) -> bool:
    """While a trace runs on this thread: name its values with ``lookup`` (None: torch's own, as
    the ONNX exporter's trace sets it up); False when no trace runs."""
    import torch

    if torch._C._get_tracing_state() is None:
        return False
    if lookup is None:
        lookup = torch.jit._trace._create_interpreter_name_lookup_fn()
    torch._C._tracer_set_get_unique_name_fn(lookup)
    return True


def module_children(m: Any) -> list[Any]:
    """``m``'s direct submodules (None for a name registered as None), from its ``_modules``
    dictionary: ``m.children()`` builds name prefixes and sets on every call."""
    children = m.__dict__.get("_modules")
    if isinstance(children, dict):
        return list(children.values())
    return list(m.children())  # a ScriptModule's wrapper (or a torch that moved ``_modules``)


def remove_hooks_holding(hooks: dict[Any, Any], before: Collection[Any], obj: Any) -> int:
    """Remove from the hook registry ``hooks`` the entries added since it held the keys ``before``
    whose function's closure holds ``obj`` itself (one of its free variables); how many were
    removed."""
    removed = 0
    # list(): a snapshot, another thread's export may register a hook meanwhile
    for key in [k for k in list(hooks) if k not in before]:
        cells = getattr(hooks.get(key), "__closure__", None) or ()
        for cell in cells:
            try:
                held = cell.cell_contents
            except ValueError:  # a free variable not bound yet
                continue
            if held is obj:
                hooks.pop(key, None)
                removed += 1
                break
    return removed


def tree_leaves(tree: Any) -> list[Any]:
    return list(need("torch.utils._pytree", "tree_leaves")(tree))


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    return need("torch.utils._pytree", "tree_flatten")(tree)


def tree_unflatten(leaves: list[Any], spec: Any) -> Any:
    return need("torch.utils._pytree", "tree_unflatten")(leaves, spec)


def as_onnx_export(fn: Any) -> Any:
    """``fn`` run with ``torch.onnx.is_in_onnx_export()`` true, as it is while torch.export
    captures the model for ONNX (a forward that branches on it takes its export branch)."""
    return need("torch.onnx._internal.exporter._flags", "set_onnx_exporting_flag")(fn)


def check() -> list[str]:
    """Names of the pieces a torch upgrade moved (empty when everything is in place)."""
    missing = []
    for module, attr in INTERNALS:
        try:
            lookup(module, attr)
        except (ImportError, AttributeError):
            missing.append(f"{module}.{attr}")
    import torch

    try:
        if not (writes_positional(torch.ops.aten.add_.Tensor) and not writes_positional(torch.ops.aten.add.Tensor)
                and writes_positional(torch.Tensor.add_) and not writes_positional(torch.Tensor.add)):
            missing.append("torch.ops.aten.<op>.<overload>._schema (alias annotations)")
    except (AttributeError, RuntimeError):
        missing.append("torch.ops.aten.<op>.<overload>._schema")
    try:
        t = torch.zeros(1)
        before = tensor_version(t)
        t.add_(1)
        if tensor_version(t) != before + 1:
            missing.append("torch.Tensor._version (moves on in-place writes)")
    except (AttributeError, TypeError):
        missing.append("torch.Tensor._version")
    if not has_tracer_name_lookup() or not hasattr(torch._C, "_get_tracing_state"):
        missing.append("torch._C._tracer_set_get_unique_name_fn, torch.jit._trace._create_interpreter_name_lookup_fn")
    probe = torch.nn.Module()
    probe.register_buffer("b", torch.zeros(1), persistent=False)
    for name, kind in MODULE_SLOTS:
        if not isinstance(probe.__dict__.get(name), kind):
            missing.append(f"torch.nn.Module.{name}")
    probe.add_module("child", torch.nn.Identity())
    if not isinstance(probe.__dict__.get("_modules"), dict) or module_children(probe) != [probe.child]:
        missing.append("torch.nn.Module._modules")
    return missing
