"""Pow, Max, Min: type changes at opset 12.

Pow: before 12 base and exponent share one type; a differently typed exponent is cast to the
base's type (exact for the integer and float exponents torch emits). Max/Min: before 12 they take
floats only; integer operands are folded pairwise with Where(Greater/Less), which is exact."""

from __future__ import annotations

import onnx_ir as ir

from .base import Outputs, Rewrite

_FLOATS = {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16}


def pow_(rw: Rewrite) -> Outputs:
    base, exponent = rw.input(0), rw.input(1)
    if rw.target >= 12 or rw.dtype(base) is None or rw.dtype(base) == rw.dtype(exponent):
        return rw.same()
    return rw.same([base, rw.op("Cast", exponent, to=rw.dtype(base))])


def min_max(rw: Rewrite) -> Outputs:
    inputs = list(rw.node.inputs)
    dtype = rw.dtype(inputs[0])
    if rw.target >= 12 or dtype is None or dtype in _FLOATS:
        return rw.same()
    compare = "Greater" if rw.node.op_type == "Max" else "Less"
    out = inputs[0]
    for other in inputs[1:]:
        out = rw.op("Where", rw.op(compare, out, other), out, other)
    return (out if out is not inputs[0] else rw.op("Identity", out),)


ADAPTERS = {"Pow": pow_, "Max": min_max, "Min": min_max}
