"""Trilu (opset 14): keep x where the column minus the row index is >= k (upper) or <= k (lower)."""

from __future__ import annotations

import numpy as np

from .base import Outputs, Rewrite


def trilu(rw: Rewrite) -> Outputs | None:
    if rw.target >= 14:
        return None
    x, k = rw.input(0), rw.input(1)
    dtype = rw.dtype(x)
    if dtype is None:
        raise rw.no_form(14, "its input element type is unknown")
    shape = rw.op("Shape", x)
    one, zero = rw.ints([1]), rw.ints([0])

    def index(axis: int):
        size = rw.op("Squeeze", rw.op("Gather", shape, rw.ints([axis]), axis=0), zero)
        return rw.op("Range", rw.const(np.int64(0)), size, rw.const(np.int64(1)))

    rows = rw.op("Unsqueeze", index(-2), one)
    cols = rw.op("Unsqueeze", index(-1), zero)
    diff = rw.op("Sub", cols, rows)
    k = rw.const(np.int64(0)) if k is None else rw.op("Reshape", k, rw.ints([]))
    outside = rw.op("Less" if rw.attr("upper", 1) else "Greater", diff, k)
    return (rw.op("Where", outside, rw.const(np.zeros((), dtype=dtype.numpy())), x),)


ADAPTERS = {"Trilu": trilu}
