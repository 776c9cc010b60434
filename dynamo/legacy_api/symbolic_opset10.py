"""The pieces of ``torch.onnx.symbolic_opset10`` custom symbolics call, on our graph context."""

from __future__ import annotations

from typing import Any

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


_slice = symbolic_helper._slice_opset10


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
