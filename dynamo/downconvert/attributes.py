"""Attributes a newer opset added: the node keeps its meaning at the target when the attribute
holds its old behaviour (then it is dropped), and has no target form otherwise. Where only the
types changed, the node is its own target form (None: relabelled after its types are checked)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from .base import Outputs, Rewrite

#: an added attribute whose every value means the old behaviour at the types older opsets allow
#: (Cast's ``saturate`` only acts on float8 results, which the type check refuses below 19)
ANY = object()


#: (name, opset that added it, its default)
Added = tuple[str, int, Any]


def _dropped(rw: Rewrite, attributes: tuple[Added, ...]) -> list[str]:
    """The attributes the target has not, each holding its default (or ``ANY``); ``NoForm`` else."""
    drop = []
    for name, since, default in attributes:
        if rw.target >= since or name not in rw.node.attributes:
            continue
        if default is not ANY and rw.attr(name, default) != default:
            raise rw.no_form(since, f"{name}={rw.attr(name)!r}")
        drop.append(name)
    return drop


def added(*attributes: Added) -> Callable[[Rewrite], Outputs | None]:
    """Below the opset that added each attribute, it must hold its default; it is dropped."""

    def adapt(rw: Rewrite) -> Outputs | None:
        drop = _dropped(rw, attributes)
        return rw.same(drop=drop) if drop else None

    return adapt


def _drop_if_default(since: int, defaults: dict[str, Any]) -> Callable[[Rewrite], Outputs | None]:
    """Below ``since``, the attributes in ``defaults`` must hold their default (then dropped)."""
    return added(*((name, since, default) for name, default in defaults.items()))


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


def batch_norm(rw: Rewrite) -> Outputs | None:
    if rw.target >= 14:
        return None
    if rw.attr("training_mode", 0) or len(rw.node.outputs) > 1:
        raise rw.no_form(14, "training_mode=1 (batch statistics)")
    return rw.same(drop=["training_mode"])


def scatter(rw: Rewrite) -> Outputs | None:
    if rw.target >= 18:
        return None
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


def lp_pool(rw: Rewrite) -> Outputs | None:
    """Opset 18 added ceil_mode and dilations."""
    if rw.target >= 18:
        return None
    if rw.attr("ceil_mode", 0) or any(d != 1 for d in rw.attr("dilations", None) or ()):
        raise rw.no_form(18, "ceil_mode or dilations")
    return rw.same(drop=["ceil_mode", "dilations"])


_QUANTIZE_ADDED: dict[str, tuple[Added, ...]] = {
    "QuantizeLinear": (("saturate", 19, ANY), ("block_size", 21, 0), ("output_dtype", 21, 0), ("precision", 23, 0)),
    "DequantizeLinear": (("block_size", 21, 0), ("output_dtype", 23, 0)),
}


def quantize(rw: Rewrite) -> Outputs | None:
    """(De)QuantizeLinear got ``axis`` (per-axis scales) at 13; per-tensor forms are older. Later
    opsets added blocked scales and explicit output types (only their defaults go down)."""
    drop = _dropped(rw, _QUANTIZE_ADDED[rw.node.op_type])
    if rw.target < 13:
        if rw.rank(rw.input(1)) != 0:
            raise rw.no_form(13, "per-axis scales")
        drop.append("axis")
    return rw.same(drop=drop) if drop else None


def grid_sample(rw: Rewrite) -> Outputs | None:
    """GridSample exists from opset 16; opset 20 renamed its modes (bilinear -> linear, bicubic ->
    cubic) and took N-D inputs. Opset 16-19 sample 4-D inputs only."""
    if rw.target < 16:
        raise rw.no_form(16, "the operator exists from opset 16 on")
    if rw.target >= 20:
        return None
    if rw.rank(rw.input(0)) != 4:
        raise rw.no_form(20, "an input that is not 4-D" if rw.rank(rw.input(0)) else "an input of unknown rank")
    mode = rw.attr("mode", "linear" if rw.source >= 20 else "bilinear")
    old = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    return rw.same(drop=["mode"], set_attrs={"mode": old})


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
    "Cast": added(("saturate", 19, ANY), ("round_mode", 24, "up")),
    "GridSample": grid_sample,
}
