"""Strict check of every torch.export-route result: an invalid model is a route failure.

``onnx.checker`` accepts models that onnxruntime rejects (``Add(float, double)`` from a legacy
symbolic's wrapped number). ``check(program)`` runs ONNX shape and type inference in strict mode,
with type checks and data propagation, on the model as it would be saved, and raises
``RouteFailed`` (so ``auto`` falls back) instead of letting the route report a success.

Weights are not copied for the check: initializers larger than ``INLINE_LIMIT`` bytes are given
to the inference as typed graph inputs, so the cost follows the node count, not the model size.

Once per result: a model the down-converter already checked (its own strict checks, the same
inference and onnx's checker: ``mark_checked``) is not checked again while its graph's structure
(opset imports, inputs and outputs, every node's op, inputs, outputs and attribute names, the
initializers) is what it was then.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from compat.errors import RouteFailed

ROUTE = "dynamo"
REASON = "invalid ONNX model (strict shape/type inference)"
#: initializers up to this size keep their data (shape tensors feed data propagation)
INLINE_LIMIT = 1024
#: protobuf's hard limit; a bigger proto is checked through a file
_PROTO_LIMIT = 2**31 - 2**24


_CHECKED_KEY = "compat.strict_checked"


def check(program: Any) -> None:
    """Raise ``RouteFailed`` when strict ONNX shape/type inference rejects ``program.model``."""
    model = getattr(program, "model", None)
    if model is None:
        return
    meta = getattr(model, "meta", None)
    if meta is not None and meta.get(_CHECKED_KEY) == _structure(model):
        return
    proto = _proto_without_weights(model)
    try:
        _infer(proto)
    except Exception as exc:  # onnx raises InferenceError, ValidationError, RuntimeError...
        raise RouteFailed(ROUTE, REASON, exc) from exc


def mark_checked(model: Any) -> None:
    """``model`` passed strict shape/type inference (and onnx's checker) as it is now."""
    meta = getattr(model, "meta", None)
    if meta is not None:
        meta[_CHECKED_KEY] = _structure(model)


def _structure(model: Any) -> tuple[Any, ...]:
    graph = model.graph
    return (
        tuple(sorted(model.opset_imports.items())),
        tuple((v.name, str(v.type), str(v.shape)) for v in (*graph.inputs, *graph.outputs)),
        tuple((n.domain, n.op_type, n.version, tuple(v.name if v is not None else "" for v in n.inputs),
               tuple(v.name for v in n.outputs), tuple(n.attributes)) for n in graph),
        tuple(graph.initializers), tuple(model.functions),
    )


def _infer(proto: Any) -> None:
    import onnx

    options = {"check_type": True, "strict_mode": True, "data_prop": True}
    if proto.ByteSize() < _PROTO_LIMIT:
        onnx.shape_inference.infer_shapes(proto, **options)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save_model(proto, path)
        onnx.shape_inference.infer_shapes_path(path, path + ".inferred", **options)


def _proto_without_weights(model: Any) -> Any:
    """The ModelProto of ``model`` whose large initializers are typed graph inputs instead."""
    import onnx
    import onnx_ir as ir

    graph = model.graph
    large = [(v, v.const_value) for v in graph.initializers.values()
             if v.const_value is not None and _nbytes(v.const_value) > INLINE_LIMIT]
    with _detached(large):
        proto = ir.serde.serialize_model(model)
    names = {i.name for i in proto.graph.input}
    detached = {v.name for v, _ in large} - names
    if detached:  # their annotations move from value_info to the inputs below
        kept = [vi for vi in proto.graph.value_info if vi.name not in detached]
        del proto.graph.value_info[:]
        proto.graph.value_info.extend(kept)
    for value, tensor in large:
        if value.name in names:
            continue
        proto.graph.input.append(onnx.helper.make_tensor_value_info(
            value.name, int(tensor.dtype), [d if isinstance(d, int) else None for d in tensor.shape]))
    return proto


def _nbytes(tensor: Any) -> int:
    try:
        return int(tensor.nbytes)
    except (AttributeError, TypeError, ValueError):
        return 0


@contextlib.contextmanager
def _detached(saved: list[tuple[Any, Any]]) -> Iterator[None]:
    """Serialize the (value, tensor) pairs' values without data (restored, even on error)."""
    logger = logging.getLogger("onnx_ir.serde")  # warns once per initializer without data
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        for value, _ in saved:
            value.const_value = None
        yield
    finally:
        for value, tensor in saved:
            value.const_value = tensor
        logger.setLevel(level)
