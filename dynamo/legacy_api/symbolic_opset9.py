"""The pieces of ``torch.onnx.symbolic_opset9`` custom symbolics call, on our graph context."""

from __future__ import annotations

from typing import Any

import torch

from .. import symbolic_values as sv
from . import symbolic_helper
from .symbolic_helper import parse_args, unavailable

__all__ = [
    "_cast_Bool",
    "_cast_Byte",
    "_cast_Char",
    "_cast_Double",
    "_cast_Float",
    "_cast_Half",
    "_cast_Int",
    "_cast_Long",
    "_cast_Short",
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

INT64_MAX = symbolic_helper.INT64_MAX


def unused(g: Any) -> Any:
    """A missing optional input."""
    return g.none()


def add(g: Any, self: Any, other: Any, alpha: Any = None) -> Any:
    if alpha and symbolic_helper._scalar(symbolic_helper._maybe_get_scalar(alpha)) != 1:
        other = g.op("Mul", other, alpha)
    return g.op("Add", self, other)


def sub(g: Any, self: Any, other: Any, alpha: Any = None) -> Any:
    if alpha and symbolic_helper._scalar(symbolic_helper._maybe_get_scalar(alpha)) != 1:
        other = g.op("Mul", other, alpha)
    return g.op("Sub", self, other)


def mul(g: Any, self: Any, other: Any) -> Any:
    return g.op("Mul", self, other)


def div(g: Any, self: Any, other: Any, *args: Any) -> Any:
    return g.op("Div", self, other)


def relu(g: Any, input: Any) -> Any:
    return g.op("Relu", input)


def sigmoid(g: Any, self: Any) -> Any:
    return g.op("Sigmoid", self)


def where(g: Any, condition: Any, self: Any = None, other: Any = None, _outputs: Any = None) -> Any:
    if condition.type().dtype() is not torch.bool:
        condition = g.op("Cast", condition, to_i=9)
    return g.op("Where", condition, self, other)


@parse_args("v", "s")
def gelu(g: Any, self: Any, approximate: str = "none") -> Any:
    if approximate == "tanh":
        import math

        beta = torch.tensor(math.sqrt(2 / math.pi), dtype=torch.double)
        kappa = torch.tensor(0.044715, dtype=torch.double)
        one = torch.tensor(1.0, dtype=torch.double)
        half = torch.tensor(0.5, dtype=torch.double)
        cube = mul(g, self, mul(g, self, self))
        inner = mul(g, beta, add(g, self, mul(g, kappa, cube)))
        return mul(g, half, mul(g, self, add(g, one, g.op("Tanh", inner))))
    erf = g.op("Erf", g.op("Div", self, torch.tensor(1.4142135623730951, dtype=torch.double)))
    erf_plusone = add(g, erf, g.op("Constant", value_t=torch.tensor(1, dtype=torch.double)))
    return mul(g, mul(g, self, erf_plusone), g.op("Constant", value_t=torch.tensor(0.5, dtype=torch.double)))


@parse_args("v", "f", "i")
def dropout(g: Any, input: Any, p: float, train: bool) -> Any:
    if not train:
        return input
    r, _ = g.op("Dropout", input, ratio_f=p, outputs=2)
    return r


def size(g: Any, self: Any, dim: Any = None) -> Any:
    if dim is None:
        return g.op("Shape", self)
    if symbolic_helper._maybe_get_const(dim, "i") < 0:
        rank = symbolic_helper._get_tensor_rank(self)
        if rank is not None:
            dim = symbolic_helper._maybe_get_const(dim, "i") + rank
            dim = g.op("Constant", value_t=torch.tensor(dim))
    return symbolic_helper._size_helper(g, self, dim)


@parse_args("v", "i", "v")
def select(g: Any, self: Any, dim: int, index: Any) -> Any:
    index = symbolic_helper._maybe_get_scalar(index)
    if not symbolic_helper._is_value(index) and index < 0:
        end = INT64_MAX if index == -1 else index + 1
        sliced = symbolic_helper._slice_helper(g, self, axes=[dim], starts=[index], ends=[end])
        return symbolic_helper._squeeze_helper(g, sliced, [dim])
    return g.op("Gather", self, index, axis_i=dim)


@parse_args("v", "i", "none")
def softmax(g: Any, input: Any, dim: int, dtype: Any = None) -> Any:
    rank = symbolic_helper._get_tensor_rank(input)
    if rank is not None:
        if dim < 0:
            dim = rank + dim
        transpose = rank != dim + 1
        if transpose:
            axes = list(range(rank))
            axes[dim], axes[-1] = axes[-1], axes[dim]
            input = g.op("Transpose", input, perm_i=axes)
            dim = rank - 1
        out = g.op("Softmax", input, axis_i=dim)
        if dtype and dtype.node().kind() != "prim::Constant":
            code = symbolic_helper._get_const(dtype, "i", "dtype")
            out = g.op("Cast", out, to_i=symbolic_helper.scalar_type_to_onnx[code])
        if transpose:
            out = g.op("Transpose", out, perm_i=axes)
        return out
    input = g.op("Sub", input, g.op("ReduceMax", input, axes_i=[dim], keepdims_i=1))
    exp = g.op("Exp", input)
    axes = g.op("Constant", value_t=torch.tensor([dim], dtype=torch.int64))
    total = g.op("ReduceSum", exp, axes, keepdims_i=1) if g.opset >= 13 else \
        g.op("ReduceSum", exp, axes_i=[dim], keepdims_i=1)
    return g.op("Div", exp, total)


def masked_fill(g: Any, self: Any, mask: Any, value: Any) -> Any:
    mask = g.op("Cast", mask, to_i=9)
    value = symbolic_helper._maybe_get_scalar(value)
    return g.op("Where", mask, symbolic_helper._if_scalar_type_as(value, self), self)


def unsqueeze(g: Any, self: Any, dim: Any) -> Any:
    dim = symbolic_helper._get_const(dim, "i", "dim")
    if dim < 0:
        rank = symbolic_helper._get_tensor_rank(self)
        if rank is not None:
            dim = dim + rank + 1
    return symbolic_helper._unsqueeze_helper(g, self, [dim])


def squeeze(g: Any, self: Any, dim: Any = None) -> Any:
    if dim is None:
        return g.op("Squeeze", self)
    dim = symbolic_helper._get_const(dim, "i", "dim")
    return symbolic_helper._squeeze_helper(g, self, [dim])


def reshape(g: Any, self: Any, shape: Any) -> Any:
    return symbolic_helper._reshape_helper(g, self, shape)


@parse_args("v", "i", "i")
def transpose(g: Any, self: Any, dim0: int, dim1: int) -> Any:
    if dim0 == dim1:
        return self
    rank = symbolic_helper._get_tensor_rank(self)
    if rank is None:
        symbolic_helper._unimplemented("transpose", "a tensor of unknown rank")
    axes = list(range(rank))  # type: ignore[arg-type]
    axes[dim0], axes[dim1] = axes[dim1], axes[dim0]
    return g.op("Transpose", self, perm_i=axes)


def _cast(dtype: torch.dtype) -> Any:
    def cast(g: Any, input: Any, non_blocking: Any = None) -> Any:
        return g.op("Cast", input, to_i=sv.ONNX_CODES[dtype])

    return cast


_cast_Byte = _cast(torch.uint8)
_cast_Char = _cast(torch.int8)
_cast_Short = _cast(torch.int16)
_cast_Int = _cast(torch.int32)
_cast_Long = _cast(torch.int64)
_cast_Half = _cast(torch.float16)
_cast_Float = _cast(torch.float32)
_cast_Double = _cast(torch.float64)
_cast_Bool = _cast(torch.bool)


def pow(g: Any, self: Any, exponent: Any) -> Any:
    dtype = self.type().dtype() if symbolic_helper._is_value(self) else None
    if not symbolic_helper._is_fp(self):
        dtype = torch.float32
        self = g.op("Cast", self, to_i=sv.ONNX_CODES[dtype])
    if symbolic_helper._is_value(exponent) and not symbolic_helper._is_fp(exponent):
        exponent = g.op("Cast", exponent, to_i=sv.ONNX_CODES[dtype or torch.float32])
    return g.op("Pow", self, exponent)


def _unary(op: str) -> Any:
    def unary(g: Any, self: Any) -> Any:
        return g.op(op, self)

    unary.__name__ = op.lower()
    return unary


sqrt = _unary("Sqrt")
neg = _unary("Neg")
exp = _unary("Exp")
log = _unary("Log")
abs = _unary("Abs")
tanh = _unary("Tanh")
erf = _unary("Erf")
reciprocal = _unary("Reciprocal")
floor = _unary("Floor")
ceil = _unary("Ceil")
sin = _unary("Sin")
cos = _unary("Cos")


def clamp_min(g: Any, self: Any, min: Any) -> Any:
    return g.op("Max", self, min)


def clamp_max(g: Any, self: Any, max: Any) -> Any:
    return g.op("Min", self, max)


def __getattr__(name: str) -> Any:
    return unavailable(__name__, name)
