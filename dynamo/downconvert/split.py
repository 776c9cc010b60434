"""Split: ``num_outputs`` appeared at opset 18 (last chunk may be smaller); ``split`` became an
input at 13 (an attribute below): sizes computed at run time (``boxes.split(per_image)`` in
torchvision's detection models) are written as Slices between their running sums below 13."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .base import Outputs, Rewrite


def split(rw: Rewrite) -> Outputs:
    x = rw.input(0)
    n = len(rw.node.outputs)
    axis = rw.attr("axis", 0)
    if rw.input(1) is not None:
        if rw.target >= 13:
            return rw.same(drop=["num_outputs"])
        if ir.convenience.get_const_tensor(rw.input(1)) is None:
            return _slices_by_sizes(rw, x, rw.input(1), n, axis)
        return rw.same([x], drop=["num_outputs"], set_attrs={"split": rw.const_ints(1, 13, "split")})
    rank = rw.rank(x)
    dim = x.shape[axis] if rank is not None and -rank <= axis < rank else None
    if isinstance(dim, int):
        chunk = -(-dim // n)
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
        if sizes[-1] <= 0:
            raise rw.no_form(18, f"{n} outputs for an axis of size {dim}")
        if len(set(sizes)) == 1:  # equal parts: the old form without sizes means the same
            return rw.same([x], drop=["num_outputs"])
        if rw.target >= 13:
            return rw.same([x, rw.ints(sizes)], drop=["num_outputs"])
        return rw.same([x], drop=["num_outputs"], set_attrs={"split": sizes})
    return _slices(rw, x, n, axis)


def _slices(rw: Rewrite, x: ir.Value, n: int, axis: int) -> Outputs:
    """Split a run-time-sized axis into ``n`` ceil-sized chunks with Slice (any opset >= 10)."""
    dim = rw.op("Gather", rw.op("Shape", x), rw.ints([axis]), axis=0)
    chunk = rw.op("Div", rw.op("Add", dim, rw.ints([n - 1])), rw.ints([n]))
    axes = rw.ints([axis])
    outs = []
    for i in range(n):
        start = rw.op("Mul", chunk, rw.ints([i]))
        end = rw.op("Mul", chunk, rw.ints([i + 1])) if i < n - 1 else rw.const(np.asarray([np.iinfo(np.int64).max]))
        outs.append(rw.op("Slice", x, start, end, axes))
    return tuple(outs)


def _slices_by_sizes(rw: Rewrite, x: ir.Value, sizes: ir.Value, n: int, axis: int) -> Outputs:
    """Split ``x`` by the run-time ``sizes`` (n of them) with Slice: output i spans
    [ends[i] - sizes[i], ends[i]) where ends is the running sum (CumSum, opset 11)."""
    ends = rw.op("CumSum", sizes, rw.const(np.asarray(0, dtype=np.int64)))
    starts = rw.op("Sub", ends, sizes)
    axes = rw.ints([axis])
    return tuple(rw.op("Slice", x, rw.op("Gather", starts, rw.ints([i]), axis=0),
                       rw.op("Gather", ends, rw.ints([i]), axis=0), axes) for i in range(n))


ADAPTERS = {"Split": split}
