"""The pieces of ``torch.onnx.symbolic_opset11`` custom symbolics call, on our graph context."""

from __future__ import annotations

from typing import Any

from . import symbolic_helper
from . import symbolic_opset9 as opset9
from . import symbolic_opset10 as opset10
from .symbolic_helper import unavailable
from .symbolic_opset10 import *

__all__ = list(opset10.__all__)


@symbolic_helper.parse_args("v", "i", "v")
def select(g: Any, self: Any, dim: int, index: Any) -> Any:
    return g.op("Gather", self, index, axis_i=dim)


def add(g: Any, self: Any, other: Any, alpha: Any = None) -> Any:
    if symbolic_helper._is_tensor_list(self):
        symbolic_helper._unimplemented("add", "adding tensor lists (SequenceInsert)")
    return opset9.add(g, self, other, alpha)


def squeeze(g: Any, self: Any, dim: Any = None) -> Any:
    if dim is None:
        return g.op("Squeeze", self)
    if not symbolic_helper._is_constant(dim):
        return symbolic_helper._squeeze_helper(g, self, [dim])
    dim = symbolic_helper._get_const(dim, "i", "dim")
    rank = symbolic_helper._get_tensor_rank(self)
    adjusted = dim + rank if rank is not None and dim < 0 else dim
    size = symbolic_helper._get_tensor_dim_size(self, adjusted)
    if size is None or (dim < 0 and rank is None):
        symbolic_helper._unimplemented("squeeze", "a dimension whose size is unknown (an If node)")
    if size > 1:  # type: ignore[operator]
        return self
    return symbolic_helper._squeeze_helper(g, self, [dim])


def unsqueeze(g: Any, self: Any, dim: Any) -> Any:
    if symbolic_helper._is_constant(dim):
        dim = symbolic_helper._get_const(dim, "i", "dim")
    return symbolic_helper._unsqueeze_helper(g, self, [dim])


def __getattr__(name: str) -> Any:
    return unavailable(__name__, name)
