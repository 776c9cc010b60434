"""The IR version a converted model is written with: the one onnx paired with the target opset
(what the TorchScript exporter writes: 6 for opset 11, 7 for 13, 8 for 15-17), so the runtimes of
that era load it. A model using a newer IR feature (model-local functions, float8/int4 types)
keeps its IR version."""

from __future__ import annotations

import onnx.helper
import onnx_ir as ir

#: IR 8 brought model-local functions
_FUNCTIONS_IR = 8
#: data types after bfloat16 (float8, int4, float4, ...) need a newer IR
_LAST_OLD_DTYPE = ir.DataType.BFLOAT16


def paired_ir_version(opset: int) -> int | None:
    """The IR version of the first onnx release with ``opset`` (None when onnx does not know it)."""
    return min((row[1] for row in onnx.helper.VERSION_TABLE if row[2] == opset), default=None)


def _uses_new_dtypes(model: ir.Model) -> bool:
    graph = model.graph
    values = [*graph.inputs, *graph.initializers.values(),
              *(out for node in graph.all_nodes() for out in node.outputs)]
    return any(v.dtype is not None and v.dtype.value > _LAST_OLD_DTYPE.value for v in values)


def lower_ir_version(model: ir.Model, opset: int) -> None:
    """Lower ``model.ir_version`` (never raise it) to what ``opset`` was released with."""
    wanted = paired_ir_version(opset)
    if wanted is None or _uses_new_dtypes(model):
        return
    if model.functions:
        wanted = max(wanted, _FUNCTIONS_IR)
    model.ir_version = min(model.ir_version, wanted)
