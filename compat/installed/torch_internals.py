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
from typing import Any

from compat.errors import TorchInternalsMoved

#: (module, dotted attribute) of every private piece used here
INTERNALS: tuple[tuple[str, str], ...] = (
    ("torch.utils._pytree", "tree_leaves"),
    ("torch.utils._pytree", "tree_flatten"),
    ("torch.utils._pytree", "tree_unflatten"),
)

#: instance attributes of every ``nn.Module`` the snapshot relies on, with their types
MODULE_SLOTS: tuple[tuple[str, type], ...] = (
    ("_parameters", dict),
    ("_buffers", dict),
    ("_non_persistent_buffers_set", set),
)


def _get(module: str, attr: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _need(module: str, attr: str) -> Any:
    try:
        return _get(module, attr)
    except (ImportError, AttributeError) as exc:
        raise _moved(f"{module}.{attr}") from exc


def _moved(what: str) -> TorchInternalsMoved:
    from compat.installed import torch_caps

    return TorchInternalsMoved(what, torch_caps.torch_version_str())


def module_slots(m: Any) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """The live ``_parameters``, ``_buffers`` and ``_non_persistent_buffers_set`` of module ``m``
    (the objects themselves: the snapshot restores them in place)."""
    slots = []
    for name, kind in MODULE_SLOTS:
        value = m.__dict__.get(name)
        if not isinstance(value, kind):
            raise _moved(f"torch.nn.Module.{name} (a {kind.__name__} on every module)")
        slots.append(value)
    return slots[0], slots[1], slots[2]


def module_children(m: Any) -> list[Any]:
    """``m``'s direct submodules (None for a name registered as None), from its ``_modules``
    dictionary: ``m.children()`` builds name prefixes and sets on every call."""
    children = m.__dict__.get("_modules")
    if isinstance(children, dict):
        return list(children.values())
    return list(m.children())  # a ScriptModule's wrapper (or a torch that moved ``_modules``)


def tree_leaves(tree: Any) -> list[Any]:
    return list(_need("torch.utils._pytree", "tree_leaves")(tree))


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    return _need("torch.utils._pytree", "tree_flatten")(tree)


def tree_unflatten(leaves: list[Any], spec: Any) -> Any:
    return _need("torch.utils._pytree", "tree_unflatten")(leaves, spec)


def check() -> list[str]:
    """Names of the pieces a torch upgrade moved (empty when everything is in place)."""
    missing = []
    for module, attr in INTERNALS:
        try:
            _get(module, attr)
        except (ImportError, AttributeError):
            missing.append(f"{module}.{attr}")
    import torch

    probe = torch.nn.Module()
    probe.register_buffer("b", torch.zeros(1), persistent=False)
    for name, kind in MODULE_SLOTS:
        if not isinstance(probe.__dict__.get(name), kind):
            missing.append(f"torch.nn.Module.{name}")
    probe.add_module("child", torch.nn.Identity())
    if not isinstance(probe.__dict__.get("_modules"), dict) or module_children(probe) != [probe.child]:
        missing.append("torch.nn.Module._modules")
    return missing
