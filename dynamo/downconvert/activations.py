"""Activations newer than the target, written with older ops: HardSwish (14), Mish (18),
Celu (12), Gelu (20)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .base import Outputs, Rewrite


def hard_swish(rw: Rewrite) -> Outputs:
    x = rw.input(0)
    return (rw.op("Mul", x, rw.op("HardSigmoid", x, alpha=1.0 / 6, beta=0.5)),)


def mish(rw: Rewrite) -> Outputs:
    x = rw.input(0)
    return (rw.op("Mul", x, rw.op("Tanh", rw.op("Softplus", x))),)


def celu(rw: Rewrite) -> Outputs:
    x = rw.input(0)
    alpha = float(rw.attr("alpha", 1.0))
    a = rw.const(np.asarray(alpha, dtype=np.float32))
    neg = rw.op("Mul", a, rw.op("Sub", rw.op("Exp", rw.op("Div", x, a)), rw.const(np.float32(1))))
    zero = rw.const(np.float32(0))
    return (rw.op("Add", rw.op("Max", x, zero), rw.op("Min", neg, zero)),)


def gelu(rw: Rewrite) -> Outputs:
    x = rw.input(0)
    dtype = rw.dtype(x)
    if dtype is None:
        raise rw.no_form(20, "its input element type is unknown")

    def c(v: float):
        return rw.const(np.asarray(v, dtype=dtype.numpy()))

    if rw.attr("approximate", "none") == "tanh":
        inner = rw.op("Mul", c(math.sqrt(2 / math.pi)),
                      rw.op("Add", x, rw.op("Mul", c(0.044715), rw.op("Mul", x, rw.op("Mul", x, x)))))
        half = rw.op("Add", c(1.0), rw.op("Tanh", inner))
    else:
        half = rw.op("Add", c(1.0), rw.op("Erf", rw.op("Div", x, c(math.sqrt(2.0)))))
    return (rw.op("Mul", rw.op("Mul", x, c(0.5)), half),)


def _below(since: int, write: Callable[[Rewrite], Outputs]) -> Callable[[Rewrite], Outputs | None]:
    """``write`` below the op's first opset ``since``; from there on the op itself."""

    def adapt(rw: Rewrite) -> Outputs | None:
        return None if rw.target >= since else write(rw)

    return adapt


ADAPTERS = {"HardSwish": _below(14, hard_swish), "Mish": _below(18, mish), "Celu": _below(12, celu),
            "Gelu": _below(20, gelu)}
