"""transformers-5 cache objects (``DynamicCache``, ``EncoderDecoderCache``, ...) through torch.export.

transformers 4 models returned past key/values as nested tuples, which the TorchScript exporter
flattened into graph outputs. transformers 5 returns ``Cache`` objects, which torch.export cannot
flatten unless they are registered as pytree nodes; transformers' own exporter does that
(``transformers.exporters.exporter_dynamo.register_cache_pytrees_for_model``). For the duration of
one export the torch.export route registers them the same way, so the ONNX graph gets the flattened
outputs (and inputs) it had before.

Only for a transformers model in a process that imported transformers already: this module never
imports transformers itself. What it registered is removed after the export, so the user's process
is left as it was (when that cannot be done, nothing is registered).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any

from compat.catalog import HF_CACHE_REGISTRATION
from compat.request import Translation

#: transformers' own registration of its Cache classes for torch.export
REGISTER = HF_CACHE_REGISTRATION


def _is_transformers_model(model: Any) -> bool:
    modeling = sys.modules.get("transformers.modeling_utils")
    base = getattr(modeling, "PreTrainedModel", None)
    return isinstance(base, type) and isinstance(model, base)


def register(model: Any) -> list[type]:
    """Register the cache classes of ``model`` as pytree nodes; returns the classes newly registered
    (empty when not a transformers model, or when transformers offers no registration)."""
    from compat.installed import torch_caps

    if "transformers" not in sys.modules or not _is_transformers_model(model):
        return []
    if not torch_caps.can_scope_pytree_nodes():
        return []
    try:
        register_for_model = getattr(importlib.import_module(REGISTER[0]), REGISTER[1])
    except (ImportError, AttributeError):
        return []
    from . import torch_internals

    before = torch_internals.pytree_node_types()
    register_for_model(model)
    return [cls for cls in torch_internals.pytree_node_types() if cls not in before]


def deregister(classes: list[type]) -> None:
    from . import torch_internals

    for cls in classes:
        torch_internals.deregister_pytree_node(cls)


def used_in(program: Any, classes: list[type]) -> dict[str, list[str]]:
    """``{"inputs"|"outputs": [class names]}``: where the exported program's call flattens ``classes``."""
    spec = getattr(getattr(program, "exported_program", None), "call_spec", None)
    found: dict[str, list[str]] = {}
    for side, tree in (("inputs", getattr(spec, "in_spec", None)), ("outputs", getattr(spec, "out_spec", None))):
        names = sorted({t.__name__ for t in _types(tree) if t in classes})
        if names:
            found[side] = names
    return found


def _types(tree: Any) -> Iterator[type]:
    stack = [tree] if tree is not None else []
    while stack:
        node = stack.pop()
        yield node.type
        children = node.children() if hasattr(node, "children") else node.children_specs
        stack.extend(children)


@contextlib.contextmanager
def cache_pytrees(model: Any, plan: Any) -> Iterator[None]:
    """Within: ``model``'s cache classes are pytree nodes. ``plan`` (the route's ``options.Plan``)
    gets a post-process recording a translation when the exported program uses them."""
    classes = register(model)
    if classes:
        def record(program: Any) -> None:
            for side, names in used_in(program, classes).items():
                plan.translations.append(Translation(
                    "ONX001", side,
                    f"transformers {', '.join(names)} flattened into graph {side} (registered as pytree "
                    f"nodes for this export by {REGISTER[0]}.{REGISTER[1]}, as transformers' own exporter "
                    "does), as the TorchScript exporter flattened transformers 4's tuples",
                ))

        plan.post_process.append(record)
    try:
        yield
    finally:
        deregister(classes)
