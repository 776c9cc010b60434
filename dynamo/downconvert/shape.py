"""Shape: ``start``/``end`` appeared at opset 15; below, a Slice of the whole shape (same
clamping rules)."""

from __future__ import annotations

import numpy as np

from .base import Outputs, Rewrite


def shape(rw: Rewrite) -> Outputs | None:
    if rw.target >= 15:
        return None  # a type-only change (opset 19, 21, ...)
    start, end = rw.attr("start"), rw.attr("end")
    (full,) = rw.same(drop=["start", "end"])
    if start in (None, 0) and end is None:
        return (full,)
    stop = np.iinfo(np.int64).max if end is None else end
    return (rw.op("Slice", full, rw.ints([start or 0]), rw.ints([stop]), rw.ints([0])),)


ADAPTERS = {"Shape": shape}
