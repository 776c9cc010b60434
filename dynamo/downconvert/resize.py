"""Resize: ``antialias``/``axes``/``keep_aspect_ratio_policy`` appeared at opset 18, the
``half_pixel_symmetric`` coordinate mode at 19; at 11-12 ``roi`` and ``scales`` are required inputs
(empty tensors when unused)."""

from __future__ import annotations

import numpy as np

from .base import Outputs, Rewrite

_NEW_AT_18 = ("antialias", "axes", "keep_aspect_ratio_policy")


def resize(rw: Rewrite) -> Outputs | None:
    if rw.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel_symmetric" and rw.target < 19:
        raise rw.no_form(19, "coordinate_transformation_mode='half_pixel_symmetric'")
    if rw.target >= 18:
        return None
    if rw.attr("antialias", 0):
        raise rw.no_form(18, "antialias=1")
    if rw.attr("axes") is not None:
        raise rw.no_form(18, "its axes attribute")
    if rw.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise rw.no_form(18, "keep_aspect_ratio_policy other than 'stretch'")
    inputs = list(rw.node.inputs) + [None] * (4 - len(rw.node.inputs))
    if rw.target < 13:
        empty = np.zeros((0,), dtype=np.float32)
        inputs[1] = inputs[1] if inputs[1] is not None else rw.const(empty)
        inputs[2] = inputs[2] if inputs[2] is not None else rw.const(empty)
    while inputs and inputs[-1] is None:
        inputs.pop()
    return rw.same(inputs, drop=_NEW_AT_18)


ADAPTERS = {"Resize": resize}
