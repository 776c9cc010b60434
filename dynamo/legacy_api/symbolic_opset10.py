"""The pieces of ``torch.onnx.symbolic_opset10`` custom symbolics call, on our graph context."""

from __future__ import annotations

from typing import Any

from . import symbolic_helper
from . import symbolic_opset9 as opset9
from .symbolic_helper import unavailable
from .symbolic_opset9 import *
from .symbolic_opset9 import INT64_MAX

__all__ = opset9.__all__ + ["_slice", "flip", "slice"]  # the earlier opset's names, then its own


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
