"""Softmax/LogSoftmax/Hardmax: before opset 13 the input is coerced to 2-D at ``axis`` (the op
runs over every axis from ``axis`` on). Same result only when ``axis`` is the last axis; any other
axis is moved last with Transpose, and moved back after."""

from __future__ import annotations

from .base import Outputs, Rewrite


def last_axis(rw: Rewrite) -> Outputs | None:
    if rw.target >= 13:
        return None
    x = rw.input(0)
    rank = rw.rank(x)
    if rank is None:
        raise rw.no_form(13, "its input rank is unknown, so the axis cannot be made the last one")
    axis = rw.attr("axis", -1) % rank
    if axis == rank - 1:
        return rw.same(set_attrs={"axis": rank - 1})
    perm = [i for i in range(rank) if i != axis] + [axis]
    back = sorted(range(rank), key=perm.__getitem__)
    moved = rw.op("Transpose", x, perm=perm)
    (y,) = rw.same([moved], set_attrs={"axis": rank - 1})
    return (rw.op("Transpose", y, perm=back),)


ADAPTERS = {"Softmax": last_axis, "LogSoftmax": last_axis, "Hardmax": last_axis}
