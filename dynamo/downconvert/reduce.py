"""Reduce*: ``axes`` became an input at opset 13 (ReduceSum) and 18 (the others); below that it
is an attribute, and ``noop_with_empty_axes`` does not exist."""

from __future__ import annotations

from .base import Outputs, Rewrite

#: op -> the opset where axes became an input
AXES_INPUT_SINCE = {"ReduceSum": 13} | {
    op: 18 for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                      "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
}


def axes_to_attribute(rw: Rewrite) -> Outputs:
    since = AXES_INPUT_SINCE[rw.node.op_type]
    if rw.target >= since:
        return rw.same()  # type-only change (e.g. ReduceMax 12 -> 11 loses int8/uint8)
    axes = rw.const_ints(1, since, "axes")
    if not axes:
        if rw.attr("noop_with_empty_axes", 0):
            return (rw.op("Identity", rw.input(0)),)
        return rw.same([rw.input(0)], drop=["noop_with_empty_axes", "axes"])
    return rw.same([rw.input(0)], drop=["noop_with_empty_axes"], set_attrs={"axes": axes})


ADAPTERS = {op: axes_to_attribute for op in AXES_INPUT_SINCE}
