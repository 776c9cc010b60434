"""``torch.onnx.symbolic_helper`` for legacy symbolics on our graph context.

The functions real third-party symbolics call (docs: /work/shared/SYMBOLIC_API_USAGE.md lists
them), working on ``symbolic_values``. Served as ``torch.onnx.symbolic_helper`` where torch no
longer ships it, and standing in for torch's own while a symbolic runs on our ``g``.
"""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import torch

from compat import symbolic_ops

from .. import symbolic_values as sv
from ..symbolic_limits import REASON_UNSUPPORTED, LegacyOnly
from ._globals import GLOBALS

__all__ = [
    "GLOBALS",
    "_export_onnx_opset_version",
    "_generate_wrapped_number",
    "_get_const",
    "_get_dim_for_cross",
    "_get_interpolate_attributes",
    "_get_tensor_dim_size",
    "_get_tensor_rank",
    "_get_tensor_sizes",
    "_if_scalar_type_as",
    "_interpolate_size_to_scales",
    "_is_constant",
    "_is_fp",
    "_is_list",
    "_is_none",
    "_is_onnx_constant",
    "_is_scalar_list",
    "_is_tensor",
    "_is_tensor_list",
    "_is_value",
    "_maybe_get_const",
    "_maybe_get_scalar",
    "_node_get",
    "_onnx_main_opset",
    "_onnx_opset_unsupported",
    "_onnx_opset_unsupported_detailed",
    "_onnx_stable_opsets",
    "_onnx_unsupported",
    "_parse_arg",
    "_repeat_interleave_split_helper",
    "_reshape_helper",
    "_scalar",
    "_size_helper",
    "_slice_helper",
    "_squeeze_helper",
    "_type_promote_from_values",
    "_unimplemented",
    "_unpack_list",
    "_unsqueeze_helper",
    "args_have_same_dtype",
    "cast_pytorch_to_onnx",
    "parse_args",
    "pytorch_name_to_type",
    "quantized_args",
    "scalar_name_to_pytorch",
    "scalar_type_to_onnx",
    "scalar_type_to_pytorch_type",
]

_onnx_main_opset = 20
_onnx_stable_opsets = tuple(range(7, 20))
_export_onnx_opset_version = GLOBALS.export_onnx_opset_version

#: TorchScript scalar-type name -> ONNX data type number (torch's cast_pytorch_to_onnx)
cast_pytorch_to_onnx = dict(symbolic_ops.SCALAR_TYPE_TO_ONNX)
cast_pytorch_to_onnx["Undefined"] = 0
scalar_name_to_pytorch = {
    "uint8_t": "Byte", "int8_t": "Char", "double": "Double", "float": "Float", "half": "Half",
    "int": "Int", "int64_t": "Long", "int16_t": "Short", "bool": "Bool", "complex64": "ComplexFloat",
    "complex128": "ComplexDouble", "qint8": "QInt8", "quint8": "QUInt8", "qint32": "QInt32",
    "bfloat16": "BFloat16",
}
#: ScalarType code -> ONNX data type number (index = code)
scalar_type_to_onnx = [sv.ONNX_CODES.get(_d, 0) for _d in
                       (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                        torch.float32, torch.float64, None, torch.complex64, torch.complex128,
                        torch.bool, None, None, None, torch.bfloat16)]
scalar_type_to_pytorch_type = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                               torch.float16, torch.float32, torch.float64, torch.complex32,
                               torch.complex64, torch.complex128, torch.bool, torch.qint8,
                               torch.quint8, torch.qint32, torch.bfloat16]
pytorch_name_to_type = {name: dtype for dtype, name, _, _ in sv.DTYPES}


def _is_value(x: Any) -> bool:
    return isinstance(x, sv.SymbolicValue)


def _is_none(x: Any) -> bool:
    return x is None or (_is_value(x) and x.node().mustBeNone())


def _is_constant(value: Any) -> bool:
    return not _is_value(value) or value.node().kind() in ("onnx::Constant", "prim::Constant")


def _is_onnx_constant(value: Any) -> bool:
    return _is_value(value) and value.node().kind() == "onnx::Constant"


def _is_tensor(x: Any) -> bool:
    return _is_value(x) and x.type().kind() == "TensorType"


def _is_list(x: Any) -> bool:
    return _is_value(x) and x.type().kind() == "ListType"


def _is_tensor_list(x: Any) -> bool:
    return _is_list(x) and all(_is_tensor(i) for i in x.node().inputs())


def _is_scalar_list(x: Any) -> bool:
    return _is_list(x) and all(_is_onnx_constant(i) for i in x.node().inputs())


def _node_get(node: Any, key: str) -> Any:
    value = node[key]
    return value


def _is_fp(value: Any) -> bool:
    dtype = value.type().dtype() if _is_value(value) else None
    return dtype is not None and dtype.is_floating_point


def _parse_arg(value: Any, desc: str, arg_name: str | None = None, node_name: str | None = None) -> Any:
    if desc == "none" or desc == "v" or not _is_value(value):
        return value
    node = value.node()
    if node.mustBeNone():
        return None
    if node.kind() == "onnx::Constant":
        v = node["value"]
        converters: dict[str, Callable[[Any], Any]] = {
            "i": lambda t: int(t), "f": lambda t: float(t), "b": lambda t: bool(t),
            "s": lambda t: t if isinstance(t, str) else str(t), "t": lambda t: t,
            "is": lambda t: [int(x) for x in (t.reshape(-1) if isinstance(t, torch.Tensor) else t)],
            "fs": lambda t: [float(x) for x in (t.reshape(-1) if isinstance(t, torch.Tensor) else t)],
        }
        if desc not in converters:
            raise LegacyOnly(REASON_UNSUPPORTED, f"parse_args descriptor {desc!r}")
        return converters[desc](v)
    if node.kind() == "prim::ListConstruct":
        if desc == "is" and all(_is_onnx_constant(i) for i in node.inputs()):
            return [int(i.node()["value"]) for i in node.inputs()]
        raise LegacyOnly(REASON_UNSUPPORTED, f"argument {arg_name!r} of {node_name}: a list "
                         f"that is not constant, parsed as {desc!r}")
    raise LegacyOnly(REASON_UNSUPPORTED, f"argument {arg_name!r} of {node_name}: a {node.kind()} "
                     f"value where parse_args expects a constant ({desc!r})")


def parse_args(*arg_descriptors: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: convert the symbolic's arguments as the descriptors say ('v', 'i', 'is', ...)."""

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn._arg_descriptors = arg_descriptors  # type: ignore[attr-defined]

        @functools.wraps(fn)
        def wrapper(g: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                names = list(inspect.signature(fn).parameters)[1:]
            except (TypeError, ValueError):
                names = [None] * len(args)  # type: ignore[list-item]
            parsed = [_parse_arg(a, d, n, fn.__name__) for a, d, n in zip(args, arg_descriptors, names)]
            kwargs.pop("_outputs", None)
            return fn(g, *parsed, *args[len(parsed):], **kwargs)

        return wrapper

    return decorator


def quantized_args(*arg_q_descriptors: bool, scale: float | None = None,
                   zero_point: int | None = None, quantize_output: bool = True,
                   ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """torch's decorator for quantized inputs: inputs here are never quantized, so a no-op."""

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn

    return decorator


def _maybe_get_const(value: Any, desc: str) -> Any:
    if _is_value(value) and value.node().kind() == "onnx::Constant":
        return _parse_arg(value, desc)
    return value


def _maybe_get_scalar(value: Any) -> Any:
    v = _maybe_get_const(value, "t")
    if isinstance(v, torch.Tensor) and v.shape == ():
        return v
    return value


def _get_const(value: Any, desc: str, arg_name: str) -> Any:
    if not _is_constant(value):
        raise LegacyOnly(REASON_UNSUPPORTED, f"{arg_name} that is not a constant (a "
                         f"{value.node().kind()} value where a constant was required)")
    return _parse_arg(value, desc)


def _unpack_list(list_value: Any) -> list[Any]:
    if not _is_list(list_value):
        raise LegacyOnly(REASON_UNSUPPORTED, "_unpack_list of a value that is not a list")
    return list(list_value.node().inputs())


def _scalar(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.item() if x.numel() == 1 else None
    return x


def _if_scalar_type_as(self: Any, tensor: Any) -> Any:
    if isinstance(self, sv.SymbolicValue):
        return self
    scalar = tensor.type().scalarType() if _is_value(tensor) else None
    if scalar is not None:
        return getattr(self, scalar.lower())() if isinstance(self, torch.Tensor) else self
    return self


def _generate_wrapped_number(g: Any, scalar: Any) -> Any:
    if isinstance(scalar, torch.Tensor):
        return g.op("Constant", value_t=scalar)
    if isinstance(scalar, bool) or not isinstance(scalar, numbers.Number):
        return g.op("Constant", value_t=torch.tensor(scalar))
    dtype = torch.float64 if isinstance(scalar, float) else torch.int64
    return g.op("Constant", value_t=torch.tensor(scalar, dtype=dtype))


def _get_tensor_sizes(x: Any, allow_nonstatic: bool = True) -> list[int | None] | None:
    if not _is_tensor(x):
        return None
    sizes = x.type().varyingSizes()
    if sizes is None:
        return None
    if not allow_nonstatic and any(s is None for s in sizes):
        return None
    return sizes


def _get_tensor_rank(x: Any) -> int | None:
    return x.type().dim() if _is_tensor(x) else None


def _get_tensor_dim_size(x: Any, dim: int) -> int | None:
    sizes = _get_tensor_sizes(x)
    return sizes[dim] if sizes else None


def _get_dim_for_cross(x: Any, dim: int | None) -> int:
    if dim == -1:
        rank = _get_tensor_rank(x)
        return dim + (rank or 0)
    if dim is None:
        sizes = _get_tensor_sizes(x) or []
        return next(i for i, s in enumerate(sizes) if s == 3)
    return dim


def _const_list(g: Any, values: Sequence[int]) -> Any:
    return g.op("Constant", value_t=torch.tensor(list(values), dtype=torch.int64))


def _axes_value(g: Any, axes: Any) -> Any:
    return axes if _is_value(axes) else _const_list(g, axes)


def _unsqueeze_helper(g: Any, input: Any, axes_i: Any) -> Any:
    if g.opset < 13:
        return g.op("Unsqueeze", input, axes_i=list(axes_i))
    return g.op("Unsqueeze", input, _axes_value(g, axes_i))


def _squeeze_helper(g: Any, input: Any, axes_i: Any) -> Any:
    if g.opset < 13:
        return g.op("Squeeze", input, axes_i=list(axes_i))
    return g.op("Squeeze", input, _axes_value(g, axes_i))


def _reshape_helper(g: Any, input: Any, shape: Any, allowzero: int = 0) -> Any:
    shape = shape if _is_value(shape) else _const_list(g, shape)
    if g.opset < 14:
        return g.op("Reshape", input, shape)
    return g.op("Reshape", input, shape, allowzero_i=allowzero)


def _slice_helper(g: Any, input: Any, axes: Any, starts: Any, ends: Any, steps: Any = None) -> Any:
    if g.opset < 10:
        return g.op("Slice", input, axes_i=list(axes), starts_i=list(starts), ends_i=list(ends))
    return _slice_opset10(g, input, axes, starts, ends, steps)


INT64_MAX = 9223372036854775807


def _slice_opset10(g: Any, input: Any, axes: Any, starts: Any, ends: Any, steps: Any = None) -> Any:
    def to_input(value: Any, default: int | None = None) -> Any:
        if _is_none(value) and default is not None:
            value = [default]
        if isinstance(value, torch.Tensor):
            return g.op("Constant", value_t=value.clone().detach())
        if isinstance(value, list):
            return g.op("Constant", value_t=torch.tensor(value))
        rank = _get_tensor_rank(value)
        if rank == 0:
            return _unsqueeze_helper(g, value, [0])
        return value

    def const(value: Any) -> Any:
        if isinstance(value, (list, torch.Tensor)):
            return value[0] if len(value) == 1 else None
        return _maybe_get_const(value, "i")

    if const(starts) == 0 and const(ends) == INT64_MAX and (steps is None or const(steps) == 1):
        return input
    axes = to_input(axes)
    starts = to_input(starts, 0)
    ends = to_input(ends, INT64_MAX)
    if steps is None:
        return g.op("Slice", input, starts, ends, axes)
    return g.op("Slice", input, starts, ends, axes, to_input(steps, 1))


def _size_helper(g: Any, self: Any, dim: Any) -> Any:
    """``self.size(dim)``: opset 9's ``select`` of the shape, written here (as torch's helper
    imports it back from symbolic_opset9, a circle)."""
    full_shape = g.op("Shape", self)
    index = _maybe_get_scalar(dim)
    if not _is_value(index) and index < 0:
        end = INT64_MAX if index == -1 else index + 1
        sliced = _slice_helper(g, full_shape, axes=[0], starts=[index], ends=[end])
        return _squeeze_helper(g, sliced, [0])
    return g.op("Gather", full_shape, index, axis_i=0)


def _repeat_interleave_split_helper(g: Any, self: Any, reps: int, dim: int) -> Any:
    if g.opset <= 12:
        split_out = g.op("Split", self, split_i=[1] * reps, axis_i=dim, outputs=reps)
    else:
        repeats = g.op("Constant", value_t=torch.tensor([1] * reps))
        split_out = g.op("Split", self, repeats, axis_i=dim, outputs=reps)
    return split_out if reps > 1 else [split_out]


def _type_promote_from_values(*args: Any) -> torch.dtype:
    dtypes = [a.type().dtype() for a in args if _is_value(a) and a.type().dtype() is not None]
    out = dtypes[0] if dtypes else torch.float32
    for d in dtypes[1:]:
        out = torch.promote_types(out, d)
    return out


def args_have_same_dtype(args: Sequence[Any]) -> bool:
    return len({a.type().dtype() for a in args if _is_value(a)}) <= 1


def _get_interpolate_attributes(g: Any, mode: str, args: Sequence[Any]) -> tuple[Any, Any]:
    raise LegacyOnly(REASON_UNSUPPORTED, "symbolic_helper._get_interpolate_attributes")


def _interpolate_size_to_scales(g: Any, input: Any, output_size: Any, dim: int) -> Any:
    raise LegacyOnly(REASON_UNSUPPORTED, "symbolic_helper._interpolate_size_to_scales")


def _onnx_unsupported(op_name: str, value: Any = None) -> Any:
    raise LegacyOnly(REASON_UNSUPPORTED, f"an op it declares unsupported ({op_name})")


def _onnx_opset_unsupported(op_name: str, current_opset: int, supported_opset: int, value: Any = None) -> Any:
    raise LegacyOnly(REASON_UNSUPPORTED, f"{op_name}, unsupported at opset {current_opset} "
                     f"(supported from {supported_opset})")


def _onnx_opset_unsupported_detailed(op_name: str, current_opset: int, supported_opset: int,
                                     reason: str, value: Any = None) -> Any:
    raise LegacyOnly(REASON_UNSUPPORTED, f"{op_name}, unsupported at opset {current_opset} "
                     f"(supported from {supported_opset}): {reason}")


def _unimplemented(op: str, msg: str, value: Any = None) -> None:
    raise LegacyOnly(REASON_UNSUPPORTED, f"{op}, not implemented: {msg}")


def unavailable(module: str, name: str) -> Any:
    """A stand-in for a torch helper our graph context does not provide: refused by name when
    a symbolic calls it (importing it keeps working, as with torch)."""
    if name.startswith("__"):
        raise AttributeError(name)
    torch_name = f"torch.onnx.{module.rpartition('.')[2]}.{name}"

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise LegacyOnly(REASON_UNSUPPORTED, f"{torch_name}, which the shim's graph context does not provide")

    refused.__name__ = name
    refused.__compat_unavailable__ = True  # type: ignore[attr-defined]
    return refused


def __getattr__(name: str) -> Any:
    return unavailable(__name__, name)
