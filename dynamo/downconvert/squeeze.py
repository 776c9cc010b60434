"""Squeeze/Unsqueeze: ``axes`` became an input at opset 13; below it is an attribute."""

from __future__ import annotations

from .base import Outputs, Rewrite


def axes_to_attribute(rw: Rewrite) -> Outputs | None:
    if rw.target >= 13:
        return None  # a type-only change (opset 21, 23, ...)
    axes = rw.const_ints(1, 13, "axes")
    if axes is None:  # Squeeze without axes: every size-1 axis, at every opset
        return rw.same([rw.input(0)])
    return rw.same([rw.input(0)], set_attrs={"axes": axes})


ADAPTERS = {"Squeeze": axes_to_attribute, "Unsqueeze": axes_to_attribute}
