"""Rewrite old-opset node forms emitted by legacy symbolics into the new exporter's opset.

Symbolics were often written for opset 9-13 (``Unsqueeze(x, axes_i=[1])``, ``Split(split_i=..)``,
``Pad(pads_i=..)``); the new exporter builds at opset 18, where those attributes became inputs.
Works on plain data (op type, input list, attribute dict) so it has no graph dependencies.
Forms whose meaning changed without a change of form (RoiAlign's coordinates at opset 16) follow
the opset the symbolic was written for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

_AXES_TO_INPUT = {
    "Unsqueeze", "Squeeze", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
}


@dataclass
class NodeSpec:
    """One ONNX node before it is built: attrs map name -> Python value."""

    op_type: str
    inputs: list[Any]  # graph values or None (missing optional input)
    attrs: dict[str, Any]
    num_outputs: int


Const = Callable[[np.ndarray], Any]  # makes a Constant node, returns its output value
DtypeOf = Callable[[Any], "np.dtype | None"]


#: RoiAlign-16 added ``coordinate_transformation_mode`` (default half_pixel); RoiAlign-10
#: sampled with what opset 16 calls output_half_pixel
ROI_ALIGN_HALF_PIXEL_OPSET = 16


def rewrite(
    spec: NodeSpec, const: Const, dtype_of: DtypeOf, *, source_opset: int | None = None
) -> str | None:
    """Rewrite ``spec`` in place to its opset-18 form; returns what changed, or None.

    ``source_opset`` is the opset the symbolic was written for (a registration's opset; for an
    autograd.Function's symbolic, the export's): forms whose meaning changed with the opset keep
    the meaning they had there."""
    op, a = spec.op_type, spec.attrs
    if (op == "RoiAlign" and "coordinate_transformation_mode" not in a
            and source_opset is not None and source_opset < ROI_ALIGN_HALF_PIXEL_OPSET):
        a["coordinate_transformation_mode"] = "output_half_pixel"
        return (f"RoiAlign: opset-{source_opset} coordinates kept "
                "(coordinate_transformation_mode='output_half_pixel')")
    if op in _AXES_TO_INPUT and "axes" in a:
        axes = a.pop("axes")
        spec.inputs = [spec.inputs[0], const(np.asarray(axes, dtype=np.int64).reshape(-1))]
        return f"{op}: 'axes' attribute -> input"
    if op == "Split":
        changed = None
        if "split" in a:
            spec.inputs = [spec.inputs[0], const(np.asarray(a.pop("split"), dtype=np.int64))]
            changed = "Split: 'split' attribute -> input"
        if len(spec.inputs) < 2 and "num_outputs" not in a:
            a["num_outputs"] = spec.num_outputs
            changed = "Split: num_outputs added (required at opset 18)"
        return changed
    if op == "Pad" and ("pads" in a or "paddings" in a):
        pads = a.pop("pads", None) if "pads" in a else a.pop("paddings")
        value = a.pop("value", None)
        ins = [spec.inputs[0], const(np.asarray(pads, dtype=np.int64))]
        if value is not None:
            ins.append(const(np.asarray(value, dtype=dtype_of(spec.inputs[0]) or np.float32)))
        spec.inputs = ins
        return "Pad: 'pads'/'value' attributes -> inputs"
    if op == "Slice" and "starts" in a:
        ins = [spec.inputs[0], const(np.asarray(a.pop("starts"), dtype=np.int64)),
               const(np.asarray(a.pop("ends"), dtype=np.int64))]
        if "axes" in a:
            ins.append(const(np.asarray(a.pop("axes"), dtype=np.int64)))
        spec.inputs = ins
        return "Slice: 'starts'/'ends'/'axes' attributes -> inputs"
    if op == "Clip" and ("min" in a or "max" in a):
        dt = dtype_of(spec.inputs[0]) or np.float32
        lo, hi = a.pop("min", None), a.pop("max", None)
        spec.inputs = [spec.inputs[0], None if lo is None else const(np.asarray(lo, dtype=dt)),
                       None if hi is None else const(np.asarray(hi, dtype=dt))]
        return "Clip: 'min'/'max' attributes -> inputs"
    if op == "TopK" and "k" in a:
        spec.inputs = [spec.inputs[0], const(np.asarray([a.pop("k")], dtype=np.int64))]
        return "TopK: 'k' attribute -> input"
    if op == "Upsample":
        spec.op_type = "Resize"
        scales = spec.inputs[1] if len(spec.inputs) > 1 else const(
            np.asarray(a.pop("scales"), dtype=np.float32))
        a.pop("scales", None)
        spec.inputs = [spec.inputs[0], None, scales]
        if a.get("mode") == "bilinear":
            a["mode"] = "linear"
        return "Upsample -> Resize"
    if op == "Resize" and len(spec.inputs) == 2:
        # opset 10 Resize(X, scales) -> Resize(X, roi="", scales)
        spec.inputs = [spec.inputs[0], None, spec.inputs[1]]
        return "Resize: opset-10 (X, scales) form -> (X, roi, scales)"
    if op == "Dropout" and "ratio" in a:
        a.pop("ratio")  # inference export: Dropout is an identity either way
        a.pop("is_test", None)
        return "Dropout: 'ratio' attribute dropped"
    return None
