"""Attributes a newer opset added: the node keeps its meaning at the target when the attribute
holds its old behaviour (then it is dropped), and has no target form otherwise."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from .base import Outputs, Rewrite


def _drop_if_default(since: int, defaults: dict[str, Any]) -> Callable[[Rewrite], Outputs]:
    """Below ``since``, the attributes in ``defaults`` must hold their default (then dropped)."""

    def adapt(rw: Rewrite) -> Outputs:
        if rw.target >= since:
            return rw.same()
        for name, default in defaults.items():
            if rw.attr(name, default) != default:
                raise rw.no_form(since, f"{name}={rw.attr(name)!r}")
        return rw.same(drop=defaults)

    return adapt


def reshape(rw: Rewrite) -> Outputs:
    """Opset 14 added allowzero. It only matters for a 0 in the shape, and a 0-sized output axis
    needs an empty input: for any input with elements, allowzero=1 and the old form agree. So
    only a constant shape holding 0 (an explicit empty result) has no older form."""
    if rw.target >= 14:
        return rw.same()
    if rw.attr("allowzero", 0):
        shape = ir.convenience.get_const_tensor(rw.input(1))
        if shape is not None and 0 in np.asarray(shape.numpy()).reshape(-1).tolist():
            raise rw.no_form(14, "allowzero=1 with a 0 in its constant shape")
    return rw.same(drop=["allowzero"])


def batch_norm(rw: Rewrite) -> Outputs:
    if rw.target >= 14:
        return rw.same()
    if rw.attr("training_mode", 0) or len(rw.node.outputs) > 1:
        raise rw.no_form(14, "training_mode=1 (batch statistics)")
    return rw.same(drop=["training_mode"])


def scatter(rw: Rewrite) -> Outputs:
    reduction = rw.attr("reduction", "none")
    if reduction in ("max", "min"):
        raise rw.no_form(18, f"reduction={reduction!r}")
    if rw.target >= 16:
        return rw.same()
    if reduction != "none":
        raise rw.no_form(16, f"reduction={reduction!r}")
    return rw.same(drop=["reduction"])


def dropout(rw: Rewrite) -> Outputs:
    """Opset-12 ratio/training_mode inputs: an inference Dropout is an Identity at any opset."""
    if rw.target >= 12:
        return rw.same()
    mode = rw.input(2)
    training = mode is not None and (
        (t := ir.convenience.get_const_tensor(mode)) is None or bool(np.asarray(t.numpy()).any()))
    mask = rw.node.outputs[1] if len(rw.node.outputs) > 1 else None
    if training or (mask is not None and (mask.uses() or mask.is_graph_output())):
        raise rw.no_form(12, "training_mode or a used mask output")
    return (rw.op("Identity", rw.input(0)),)


def constant(rw: Rewrite) -> Outputs:
    """Opset-12 value_float(s)/value_int(s)/value_string(s): a ``value`` tensor below."""
    if rw.target >= 12 or "value" in rw.node.attributes or "sparse_value" in rw.node.attributes:
        return rw.same()
    tensor = ir.convenience.get_const_tensor(rw.node.outputs[0])
    if tensor is None:
        raise rw.no_form(12, "a reference attribute")
    return (rw.op("Constant", value=ir.tensor(tensor.numpy()), final=True),)


def roi_align(rw: Rewrite) -> Outputs:
    """Opset 16 added coordinate_transformation_mode (default half_pixel); before, the behaviour
    was 'output_half_pixel'."""
    if rw.target >= 16:
        return rw.same()
    if rw.attr("coordinate_transformation_mode", "half_pixel") != "output_half_pixel":
        raise rw.no_form(16, "coordinate_transformation_mode other than 'output_half_pixel'")
    return rw.same(drop=["coordinate_transformation_mode"])


def lp_pool(rw: Rewrite) -> Outputs:
    """Opset 18 added ceil_mode and dilations."""
    if rw.attr("ceil_mode", 0) or any(d != 1 for d in rw.attr("dilations", None) or ()):
        raise rw.no_form(18, "ceil_mode or dilations")
    return rw.same(drop=["ceil_mode", "dilations"])


def quantize(rw: Rewrite) -> Outputs:
    """(De)QuantizeLinear got ``axis`` (per-axis scales) at 13; per-tensor forms are older."""
    if rw.target >= 13:
        return rw.same()
    if rw.rank(rw.input(1)) != 0:
        raise rw.no_form(13, "per-axis scales")
    return rw.same(drop=["axis"])


ADAPTERS = {
    "ArgMax": _drop_if_default(12, {"select_last_index": 0}),
    "ArgMin": _drop_if_default(12, {"select_last_index": 0}),
    "GatherND": _drop_if_default(12, {"batch_dims": 0}),
    "Reshape": reshape,
    "GRU": _drop_if_default(14, {"layout": 0}),
    "LSTM": _drop_if_default(14, {"layout": 0}),
    "RNN": _drop_if_default(14, {"layout": 0}),
    "LpPool": lp_pool,
    "RoiAlign": roi_align,
    "BatchNormalization": batch_norm,
    "ScatterElements": scatter,
    "ScatterND": scatter,
    "Dropout": dropout,
    "Constant": constant,
    "QuantizeLinear": quantize,
    "DequantizeLinear": quantize,
}
