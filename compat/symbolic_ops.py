"""What a legacy symbolic's ``g.op(...)`` call means, without torch: the one home of those facts.

The torch.export route's graph context (``dynamo.symbolic_graph``) builds ONNX nodes from them,
and the rewriter's symbolic-to-onnxscript translation reads them too. Torch-free.
"""

from __future__ import annotations

import re
from typing import Any

#: ``g.op`` keyword suffix -> ONNX attribute kind (torch's ``_i``/``_is`` ... spelling)
ATTRIBUTE_SUFFIXES: dict[str, str] = {
    "i": "INT", "f": "FLOAT", "s": "STRING", "t": "TENSOR", "g": "GRAPH",
    "is": "INTS", "fs": "FLOATS", "ss": "STRINGS", "ts": "TENSORS", "gs": "GRAPHS",
}
#: a single-value suffix given a list means the plural kind (torch accepts ``axes_i=[0, 1]``)
PLURAL = {"i": "is", "f": "fs", "s": "ss", "t": "ts", "g": "gs"}
_KEY = re.compile(r"^(?P<name>.+)_(?P<suffix>[a-z]{1,2})$")

#: the ONNX domain of ``onnx::Op`` and of a bare ``Op``
ONNX_DOMAIN = ""
#: op-name namespaces that are not ONNX domains: nodes of the TorchScript IR itself
NON_ONNX_NAMESPACES = ("aten", "prim")

#: ops whose 0-d constant operands take the dtype of the tensor operands (the TorchScript
#: exporter's scalar type analysis: ``x * 2.0`` on a half tensor multiplies by a half)
PROMOTING_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Gemm", "Pow", "Mod", "Max", "Min", "Sum", "Mean",
})
COMPARING_OPS = frozenset({"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"})
#: ops whose output dtype is their first input's
SAME_DTYPE_OPS = frozenset({
    "Abs", "Add", "Sub", "Mul", "Div", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt",
    "Softmax", "LogSoftmax", "Transpose", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Slice",
    "Gather", "Concat", "Expand", "Tile", "Identity", "Dropout", "Pow", "Clip", "Max", "Min",
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "Floor", "Ceil", "Round", "Erf",
    "LeakyRelu", "Elu", "Selu", "Softplus", "HardSigmoid", "Pad", "Resize", "Split", "Where",
    "MatMul", "Gemm", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "TopK", "Trilu",
    "Mod", "Sin", "Cos", "Reciprocal", "InstanceNormalization", "LayerNormalization",
    "BatchNormalization", "GridSample", "RoiAlign", "Einsum", "CumSum", "ScatterND",
    "ScatterElements", "GatherElements", "GatherND", "Range", "Sign", "Not",
})
#: ops whose output dtype is fixed
FIXED_DTYPE_OPS = {
    "Shape": "INT64", "Size": "INT64", "NonZero": "INT64", "ArgMax": "INT64", "ArgMin": "INT64",
    "NonMaxSuppression": "INT64", "Equal": "BOOL", "Greater": "BOOL", "Less": "BOOL",
    "GreaterOrEqual": "BOOL", "LessOrEqual": "BOOL", "And": "BOOL", "Or": "BOOL", "Xor": "BOOL",
    "IsNaN": "BOOL", "IsInf": "BOOL",
}


def split_op_name(opname: str) -> tuple[str, str]:
    """``"Add"`` / ``"onnx::Add"`` -> ``("", "Add")``; ``"mmcv::MMCVRoiAlign"`` -> ``("mmcv", ...)``."""
    domain, sep, op = opname.rpartition("::")
    if not sep:
        return ONNX_DOMAIN, opname
    return (ONNX_DOMAIN if domain == "onnx" else domain), op


def split_attribute(key: str, value: Any) -> tuple[str, str]:
    """``("axes_i", [0])`` -> ``("axes", "is")``: the attribute's name and kind suffix.

    A key without a known suffix raises ``ValueError`` (torch's ``g.op`` requires one)."""
    found = _KEY.match(key)
    if found is None or found["suffix"] not in ATTRIBUTE_SUFFIXES:
        raise ValueError(f"g.op attribute {key!r} has no kind suffix (_i _f _s _t _is _fs _ss ...)")
    suffix = found["suffix"]
    if suffix in PLURAL and isinstance(value, (list, tuple)):
        suffix = PLURAL[suffix]
    return found["name"], suffix


def kind_of(value: Any) -> str:
    """The suffix a Python attribute value would carry (for attributes rewritten in place)."""
    if isinstance(value, (bool, int)):
        return "i"
    if isinstance(value, float):
        return "f"
    if isinstance(value, (str, bytes)):
        return "s"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (bool, int)) for v in value):
            return "is"
        if all(isinstance(v, (int, float)) for v in value):
            return "fs"
        if all(isinstance(v, (str, bytes)) for v in value):
            return "ss"
        return "ts"
    return "t"


#: TorchScript scalar-type names (``value.type().scalarType()``) -> ONNX TensorProto data type
SCALAR_TYPE_TO_ONNX: dict[str, int] = {
    "Byte": 2, "Char": 3, "Short": 5, "Int": 6, "Long": 7, "Half": 10, "Float": 1, "Double": 11,
    "Bool": 9, "BFloat16": 16, "ComplexFloat": 14, "ComplexDouble": 15,
}


#: inputs that were attributes in older opsets: ``g.op("Unsqueeze", x, axes_i=[0])`` written for
#: opset 11 means ``Unsqueeze(x, axes)`` at 18 (op -> the attribute names, in input order, and
#: the constant each becomes: ``INTS`` a 1-d int64 tensor, ``FLOAT`` a 0-d float). A translation to opset 18 passes them as constants.
ATTRIBUTES_NOW_INPUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "Unsqueeze": (("axes", "INTS"),), "Squeeze": (("axes", "INTS"),),
    "ReduceSum": (("axes", "INTS"),), "ReduceMean": (("axes", "INTS"),),
    "ReduceMax": (("axes", "INTS"),), "ReduceMin": (("axes", "INTS"),),
    "ReduceProd": (("axes", "INTS"),), "ReduceL1": (("axes", "INTS"),),
    "ReduceL2": (("axes", "INTS"),), "ReduceLogSumExp": (("axes", "INTS"),),
    "ReduceSumSquare": (("axes", "INTS"),), "ReduceLogSum": (("axes", "INTS"),),
    "Split": (("split", "INTS"),),
    "Slice": (("starts", "INTS"), ("ends", "INTS"), ("axes", "INTS"), ("steps", "INTS")),
    "Clip": (("min", "FLOAT"), ("max", "FLOAT")),
    "Pad": (("pads", "INTS"), ("value", "FLOAT")),
}
#: ONNX ops whose attribute defaults changed: op -> (the opset of the change, the defaults
#: before it); a symbolic written for an older opset meant those
DEFAULTS_BEFORE: dict[str, tuple[int, dict[str, Any]]] = {
    "RoiAlign": (16, {"coordinate_transformation_mode": "output_half_pixel"}),
}
#: ONNX ops with more than one output by schema (``outputs=N`` on them needs nothing more)
MULTI_OUTPUT_OPS = frozenset({
    "TopK", "LSTM", "GRU", "RNN", "BatchNormalization", "Dropout", "MaxPool", "Unique",
    "DynamicQuantizeLinear", "LayerNormalization", "If", "Loop", "Scan",
})
#: torch's own TorchScript symbolics a legacy symbolic may call (``symbolic_opset9.sub(g, a, b)``)
#: -> the onnxscript torch_lib module whose ``aten_<name>`` the new exporter uses for the same op
TORCHLIB_MODULES: dict[str, str] = {
    **dict.fromkeys((
        "abs", "add", "cat", "clamp", "div", "dropout", "exp", "expand", "log", "masked_fill",
        "matmul", "mul", "neg", "pow", "reshape", "select", "sigmoid", "softmax", "sqrt",
        "squeeze", "sub", "tanh", "transpose", "unsqueeze", "view", "where",
    ), "core"),
    **dict.fromkeys(("gelu", "relu"), "nn"),
}
