"""Strict validation of a converted model: onnx's checker and strict shape inference."""

from __future__ import annotations

import onnx
import onnx_ir as ir

#: larger models cannot be checked in memory (protobuf's 2 GB limit); they are not checked
CHECK_LIMIT_BYTES = 1 << 30


def check(model: ir.Model) -> bool:
    """Raise ``onnx.checker.ValidationError``/``InferenceError`` when ``model`` is invalid at its
    opset; returns False when it was too large to check."""
    size = sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)
    if size > CHECK_LIMIT_BYTES:
        return False
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto)
    onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True, data_prop=True)
    return True
