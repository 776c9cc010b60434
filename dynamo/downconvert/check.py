"""Strict validation of a converted model: onnx's checker and strict shape inference.

The weights are not copied for it: the route's validation (``dynamo.validate``) serializes the
model with its large initializers as typed graph inputs, so the check costs what the graph costs,
at any model size, and a model whose weights live in an external data file is checked without
reading them."""

from __future__ import annotations

import onnx
import onnx_ir as ir

from .. import validate


def check(model: ir.Model) -> bool:
    """Raise ``onnx.checker.ValidationError``/``InferenceError`` when ``model`` is invalid at its
    opset; returns True."""
    proto = validate._proto_without_weights(model)  # the route's own serialization for its check
    onnx.checker.check_model(proto)
    validate._infer(proto)
    validate.mark_checked(model)  # the route's own strict check need not run again on it
    return True
