"""The one place that lists the adapters: one module per operator family, each with ``ADAPTERS``
(op type -> adapter) and, optionally, ``EVERY_TARGET`` (ops whose adapter runs at every
conversion, also where their schema is the same at the target: a meaning that changed without a
new schema). An op without an adapter is relabelled when its schema change is type-only, and
fails with ``NoForm`` otherwise."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping

from .base import Outputs, Rewrite

Adapter = Callable[[Rewrite], Outputs | None]

#: adapter modules of this package (pyupgrade-style: one family per module)
MODULES = (
    "reduce", "split", "squeeze", "pad", "resize", "softmax", "cast_like", "shape",
    "normalization", "activations", "compare", "trilu", "arithmetic", "einsum", "attributes", "pool",
)


@functools.cache
def adapters() -> Mapping[str, Adapter]:
    table: dict[str, Adapter] = {}
    for name in MODULES:
        module = importlib.import_module(f"{__package__}.{name}")
        for op_type, adapter in module.ADAPTERS.items():
            if op_type in table:
                raise RuntimeError(f"two down-conversion adapters for {op_type}")
            table[op_type] = adapter
    return table


@functools.cache
def every_target() -> frozenset[str]:
    """Ops whose adapter runs whenever the model is converted (``EVERY_TARGET`` of the modules)."""
    return frozenset(op for name in MODULES
                     for op in getattr(importlib.import_module(f"{__package__}.{name}"), "EVERY_TARGET", ()))
