"""The pieces of ``torch.onnx.symbolic_opset10`` custom symbolics call, on our graph context."""

from __future__ import annotations

from typing import Any

import torch

from . import symbolic_helper
from .symbolic_helper import unavailable
from .symbolic_opset9 import *
from .symbolic_opset9 import INT64_MAX

__all__ = [  # the earlier opset's names, then this opset's
    "_cast_Bool",
    "_cast_Byte",
    "_cast_Char",
    "_cast_Double",
    "_cast_Float",
    "_cast_Half",
    "_cast_Int",
    "_cast_Long",
    "_cast_Short",
    "_slice",
    "abs",
    "add",
    "ceil",
    "clamp_max",
    "clamp_min",
    "cos",
    "div",
    "dropout",
    "erf",
    "exp",
    "flip",
    "floor",
    "gelu",
    "log",
    "masked_fill",
    "mul",
    "neg",
    "pow",
    "reciprocal",
    "relu",
    "reshape",
    "select",
    "sigmoid",
    "sin",
    "size",
    "slice",
    "softmax",
    "sqrt",
    "squeeze",
    "sub",
    "tanh",
    "transpose",
    "unsqueeze",
    "unused",
    "where",
]


def _slice(g: Any, input: Any, axes: Any, starts: Any, ends: Any, steps: Any = None) -> Any:
    def to_input(value: Any, default: int | None = None) -> Any:
        if symbolic_helper._is_none(value) and default is not None:
            value = [default]
        if isinstance(value, torch.Tensor):
            return g.op("Constant", value_t=value.clone().detach())
        if isinstance(value, list):
            return g.op("Constant", value_t=torch.tensor(value))
        rank = symbolic_helper._get_tensor_rank(value)
        if rank == 0:
            return symbolic_helper._unsqueeze_helper(g, value, [0])
        return value

    def const(value: Any) -> Any:
        if isinstance(value, (list, torch.Tensor)):
            return value[0] if len(value) == 1 else None
        return symbolic_helper._maybe_get_const(value, "i")

    if const(starts) == 0 and const(ends) == INT64_MAX and (steps is None or const(steps) == 1):
        return input
    axes = to_input(axes)
    starts = to_input(starts, 0)
    ends = to_input(ends, INT64_MAX)
    if steps is None:
        return g.op("Slice", input, starts, ends, axes)
    return g.op("Slice", input, starts, ends, axes, to_input(steps, 1))


def slice(g: Any, self: Any, *args: Any) -> Any:
    if len(args) == 4:
        dims, start, end, step = args
    else:
        start, end, step = args
        dims = [0]
    return symbolic_helper._slice_helper(g, self, axes=dims, starts=start, ends=end, steps=step)


def flip(g: Any, input: Any, dims: Any) -> Any:
    dims = symbolic_helper._maybe_get_const(dims, "is")
    n = len(dims)
    return symbolic_helper._slice_helper(g, input, axes=dims, starts=[-1] * n,
                                         ends=[-INT64_MAX] * n, steps=[-1] * n)


def __getattr__(name: str) -> Any:
    return unavailable(__name__, name)
