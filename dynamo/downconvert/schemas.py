"""What onnx's operator schemas say about one op across opsets: whether a version change is
type-only (same inputs, outputs and attributes), and whether a node's types fit a version."""

from __future__ import annotations

import functools

import onnx
import onnx.defs
import onnx_ir as ir

from .base import NoForm


@functools.cache
def schema(op: str, opset: int) -> onnx.defs.OpSchema | None:
    """The schema of ``op`` in force at ``opset`` (None when the op does not exist yet)."""
    try:
        return onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        return None


def _signature(s: onnx.defs.OpSchema) -> tuple[object, ...]:
    attrs = sorted((a.name, int(a.type), a.required, a.default_value.SerializeToString())
                   for a in s.attributes.values())
    return ([(f.name, int(f.option)) for f in s.inputs], [(f.name, int(f.option)) for f in s.outputs], attrs)


@functools.cache
def type_only(op: str, source: int, target: int) -> bool:
    """True when ``op``'s schema at ``target`` differs from ``source`` in type constraints only."""
    old, new = schema(op, target), schema(op, source)
    return old is not None and new is not None and _signature(old) == _signature(new)


def type_string(t: ir.TypeProtocol | None) -> str | None:
    """onnx's spelling of a value type (``tensor(float)``, ``seq(tensor(int64))``)."""
    if t is None:
        return None
    if isinstance(t, ir.TensorType):
        return f"tensor({onnx.TensorProto.DataType.Name(t.dtype.value).lower()})"
    inner = type_string(getattr(t, "elem_type", None))
    if inner is None:
        return None
    if isinstance(t, ir.SequenceType):
        return f"seq({inner})"
    if isinstance(t, ir.OptionalType):
        return f"optional({inner})"
    return None


def _type_misfit(node: ir.Node, s: onnx.defs.OpSchema) -> str | None:
    """Why ``node``'s input types do not fit schema ``s`` (None when they fit or are unknown)."""
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in s.type_constraints}
    bound: dict[str, str] = {}
    formals = list(s.inputs)
    for i, value in enumerate(node.inputs):
        if not formals:
            break
        formal = formals[min(i, len(formals) - 1)]
        if i >= len(formals) and formal.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
            break
        ts = type_string(None if value is None else value.type)
        if ts is None:
            continue
        ok = allowed.get(formal.type_str, {formal.type_str})
        if ts not in ok:
            return f"input {i} is {ts}"
        shared = formal.type_str in allowed and formal.is_homogeneous
        if shared and bound.setdefault(formal.type_str, ts) != ts:
            return f"inputs typed {bound[formal.type_str]} and {ts} must share one type"
    return None


def fits(node: ir.Node, target: int) -> bool:
    """Whether the node's types are allowed by its op's schema at ``target``."""
    s = schema(node.op_type, target)
    return s is not None and _type_misfit(node, s) is None


def check_types(node: ir.Node, source: int, target: int) -> None:
    """Raise ``NoForm`` when the node's types are not allowed by ``op``'s schema at ``target``."""
    op = node.op_type
    why = _type_misfit(node, schema(op, target))
    if why is None:
        return
    needs = next((v for v in range(target + 1, source + 1)
                  if _type_misfit(node, schema(op, v)) is None), source)
    raise NoForm(op, target, needs, why)


def lowest_relabel(op: str, source: int, target: int) -> int:
    """The lowest opset >= ``target`` that ``op`` can be relabelled to without an adapter."""
    return next((v for v in range(target, source) if type_only(op, source, v)), source)
