"""LessOrEqual/GreaterOrEqual (opset 12): Or(Less, Equal), which keeps NaN comparisons false."""

from __future__ import annotations

from . import schemas
from .base import Outputs, Rewrite


def or_equal(rw: Rewrite) -> Outputs | None:
    if rw.target >= 12 and schemas.fits(rw.node, rw.target):
        return None  # the op exists there with these types (opset 16 added some)
    a, b = rw.input(0), rw.input(1)
    strict = "Less" if rw.node.op_type == "LessOrEqual" else "Greater"
    return (rw.op("Or", rw.op(strict, a, b), rw.op("Equal", a, b)),)


ADAPTERS = {"LessOrEqual": or_equal, "GreaterOrEqual": or_equal}
