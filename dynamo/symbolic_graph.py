"""``g`` for legacy symbolics on the torch.export route: a graph context of our own over ONNX IR.

One runtime whether or not the TorchScript exporter is installed. ``g.op`` records
``SymbolicNode``s (attribute suffixes, ``outputs=``, custom domains ``'dom::Op'``) with the
output types symbolics read back; ``emit`` turns the nodes the outputs need into ONNX IR nodes
of the exporter's graph. ``g.at`` (an ATen node) and raw ``torch._C.Graph`` methods have no
ONNX meaning there: they raise ``LegacyOnly`` naming the construct.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import torch

from compat import symbolic_ops

from .symbolic_limits import (  # noqa: F401 (re-exported: the route and helpers use them)
    REASON_ATEN,
    REASON_BLOCKS,
    REASON_FAILED,
    REASON_RAW_GRAPH,
    REASON_UNSUPPORTED,
    LegacyOnly,
)
from .symbolic_values import (
    SymbolicNode,
    SymbolicType,
    SymbolicValue,
    dtype_from_onnx,
    type_of_tensor,
)


def _wrapped_number(value: Any) -> torch.Tensor | None:
    """A Python scalar (or list of them) given to ``g.op`` as an input, as a tensor."""
    if isinstance(value, bool):
        return torch.tensor(value)
    if isinstance(value, numbers.Integral):
        return torch.tensor(int(value), dtype=torch.int64)
    if isinstance(value, numbers.Real):
        return torch.tensor(float(value), dtype=torch.float32)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, numbers.Number) for v in value):
        return torch.tensor(list(value))
    return None


class SymbolicGraph:
    """The ``g`` a legacy symbolic receives."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list[SymbolicNode] = []
        self.original_node = None
        self.params_dict: dict[str, Any] = {}
        self.env: dict[Any, Any] = {}
        self.values_in_env: set[Any] = set()
        self.new_nodes: list[Any] = []
        self.onnx_functions: list[Any] = []  # onnxscript functions called through g.onnxscript_op

    # -------------------------------------------------------------- values the route hands in
    def input(self, ir_value: Any, type_: SymbolicType) -> SymbolicValue:
        node = SymbolicNode("prim::Param", [], {}, 0, self)
        value = SymbolicValue(node, type_, ir=ir_value)
        node._outputs = [value]
        return value

    def none(self) -> SymbolicValue:
        node = SymbolicNode("prim::Constant", [], {}, 1, self)
        node._outputs[0].setType(SymbolicType(kind="NoneType"))
        return node.output()

    def constant(self, tensor: torch.Tensor) -> SymbolicValue:
        return self.op("Constant", value_t=tensor)

    def list_value(self, items: Sequence[Any]) -> SymbolicValue:
        node = SymbolicNode("prim::ListConstruct", list(items), {}, 1, self)
        node.output().setType(SymbolicType(kind="ListType"))
        node.output().python = list(items)
        self.nodes.append(node)
        return node.output()

    # -------------------------------------------------------------- the symbolic-facing API
    def op(self, opname: str, *raw_args: Any, outputs: int = 1, **kwargs: Any) -> Any:
        domain, op = symbolic_ops.split_op_name(opname)
        if domain in symbolic_ops.NON_ONNX_NAMESPACES:
            if opname == "prim::ListConstruct":
                return self.list_value(raw_args)
            if opname == "prim::Constant" and not raw_args and not kwargs:
                return self.none()
            raise LegacyOnly(REASON_ATEN if domain == "aten" else REASON_RAW_GRAPH,
                             f"g.op({opname!r}) (a TorchScript {domain} node, no ONNX op)")
        inputs = [self._input(a) for a in raw_args]
        attrs: dict[str, tuple[str, Any]] = {}
        for key, value in kwargs.items():
            if value is None:
                continue  # torch drops None attributes
            name, kind = symbolic_ops.split_attribute(key, value)
            attrs[name] = (kind, _attribute_value(kind, value))
        kind_name = f"{domain or 'onnx'}::{op}"
        node = SymbolicNode(kind_name, inputs, attrs, int(outputs), self)
        self.nodes.append(node)
        # the scalar type analysis now, not only at emission: the output type the symbolic reads
        # back (and ONNX inference of the nodes after it) must see ``half * x`` as x's dtype
        promote_scalars([node], self)
        _infer_types(node)
        outs = node.outputs()
        return outs[0] if int(outputs) == 1 else tuple(outs)

    def _input(self, arg: Any) -> Any:
        if arg is None or isinstance(arg, SymbolicValue):
            return arg
        if isinstance(arg, torch.Tensor):
            return self.constant(arg)
        wrapped = _wrapped_number(arg)
        if wrapped is not None:
            value = self.constant(wrapped)
            return value
        if callable(getattr(arg, "type", None)) and callable(getattr(arg, "node", None)):
            raise LegacyOnly(REASON_RAW_GRAPH, "a TorchScript value (torch._C.Value) built outside g")
        raise LegacyOnly(REASON_UNSUPPORTED, f"a {type(arg).__name__} given to g.op as an input")

    def at(self, operator: str, *args: Any, **kwargs: Any) -> Any:
        raise LegacyOnly(REASON_ATEN, f"g.at({operator!r}) (an ATen fallback node)")

    aten_op = at

    def onnxscript_op(self, onnx_fn: Any, *args: Any, outputs: int = 1, **kwargs: Any) -> Any:
        """Call an onnxscript function: a node of its domain, the function added to the model."""
        opset = getattr(onnx_fn, "opset", None)
        name = getattr(onnx_fn, "name", None)
        if opset is None or name is None:
            raise LegacyOnly(REASON_UNSUPPORTED, f"g.onnxscript_op with {onnx_fn!r} (not an onnxscript function)")
        if onnx_fn not in self.onnx_functions:
            self.onnx_functions.append(onnx_fn)
        return self.op(f"{opset.domain}::{name}", *args, outputs=outputs, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise LegacyOnly(REASON_RAW_GRAPH, f"the raw _C.Graph method g.{name}")


def _attribute_value(kind: str, value: Any) -> Any:
    if kind == "i":
        return int(value)
    if kind == "f":
        return float(value)
    if kind == "is":
        return [int(v) for v in value]
    if kind == "fs":
        return [float(v) for v in value]
    if kind == "s":
        return value.decode() if isinstance(value, bytes) else str(value)
    if kind == "ss":
        return [v.decode() if isinstance(v, bytes) else str(v) for v in value]
    if kind == "t":
        return value if isinstance(value, torch.Tensor) else torch.tensor(value)
    if kind in ("g", "gs"):
        raise LegacyOnly(REASON_BLOCKS, "a subgraph attribute (If/Loop built in the symbolic)")
    return value


def _infer_types(node: SymbolicNode) -> None:
    """Output types symbolics may read back, as the TorchScript exporter's per-node ONNX shape
    inference gives them (constant inputs propagated); simple rules where ONNX cannot say."""
    if not node.kind().startswith("onnx::"):
        return
    op = node.kind().split("::", 1)[1]
    outs = node.outputs()
    if op == "Constant" and node.attrs.get("value", ("", None))[0] == "t":
        outs[0].setType(type_of_tensor(node.attrs["value"][1]))
        return
    inferred = _onnx_inference(node, op)
    if inferred is not None:
        for out, t in zip(outs, inferred):
            if t is not None:
                out.setType(t)
        return
    first = next((i for i in node.inputs() if i is not None), None)
    in_type = first.type() if isinstance(first, SymbolicValue) else SymbolicType()
    if op == "Cast" and "to" in node.attrs:
        outs[0].setType(SymbolicType(dtype_from_onnx(node.attrs["to"][1]), in_type.varyingSizes()))
    elif op in symbolic_ops.FIXED_DTYPE_OPS:
        dtype = dtype_from_onnx({"INT64": 7, "BOOL": 9}[symbolic_ops.FIXED_DTYPE_OPS[op]])
        outs[0].setType(SymbolicType(dtype))
    elif op in symbolic_ops.SAME_DTYPE_OPS:
        for out in outs:
            out.setType(SymbolicType(in_type.dtype()))


def _onnx_inference(node: SymbolicNode, op: str) -> list[SymbolicType | None] | None:
    import onnx

    from .symbolic_values import ONNX_CODES

    try:
        schema = onnx.defs.get_schema(op, node.graph.opset, "")
    except Exception:  # noqa: BLE001 - an op ONNX does not define at this opset: no inference
        return None
    names, types, data = [], {}, {}
    for k, value in enumerate(node.inputs()):
        if value is None:
            names.append("")
            continue
        name = f"in{k}"
        names.append(name)
        t = value.type()
        if t.kind() != "TensorType" or t.dtype() not in ONNX_CODES:
            return None
        sizes = t.varyingSizes()
        shape = None if sizes is None else [f"d{k}_{j}" if d is None else d for j, d in enumerate(sizes)]
        types[name] = onnx.helper.make_tensor_type_proto(ONNX_CODES[t.dtype()], shape)
        producer = value.node()
        if producer.kind() == "onnx::Constant" and producer.attrs.get("value", ("", None))[0] == "t":
            tensor = producer.attrs["value"][1]
            if tensor.numel() <= 64:
                data[name] = onnx.numpy_helper.from_array(ir_tensor(tensor).numpy(), name)
    attrs = []
    for key, (kind, value) in node.attrs.items():
        if kind == "t":
            value = onnx.numpy_helper.from_array(ir_tensor(value).numpy())
        elif kind == "ts":
            value = [onnx.numpy_helper.from_array(ir_tensor(v).numpy()) for v in value]
        attrs.append(onnx.helper.make_attribute(key, value, attr_type=_ATTR_TYPES.get(kind)))
    proto = onnx.helper.make_node(op, names, [f"out{k}" for k in range(node.outputsSize())])
    proto.attribute.extend(attrs)
    try:
        result = onnx.shape_inference.infer_node_outputs(
            schema, proto, types, data, opset_imports=[onnx.helper.make_opsetid("", node.graph.opset)])
    except Exception:  # noqa: BLE001 - inference refused (an input it cannot type): no types
        return None
    out: list[SymbolicType | None] = []
    for k in range(node.outputsSize()):
        tp = result.get(f"out{k}")
        if tp is None or not tp.HasField("tensor_type"):
            out.append(None)
            continue
        tt = tp.tensor_type
        sizes = None
        if tt.HasField("shape"):
            sizes = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        out.append(SymbolicType(dtype_from_onnx(tt.elem_type), sizes))
    return out


_ATTR_TYPES = {"i": 2, "f": 1, "s": 3, "t": 4, "is": 7, "fs": 6, "ss": 8, "ts": 9}


# ---------------------------------------------------------------- ONNX IR emission


def needed_nodes(outs: Sequence[SymbolicValue | None]) -> set[SymbolicNode]:
    seen: set[SymbolicNode] = set()
    stack = [v.node() for v in outs if v is not None]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for i in node.inputs():
            if isinstance(i, SymbolicValue):
                stack.append(i.node())
    return seen


def ir_attribute(name: str, kind: str, value: Any) -> Any:
    import onnx_ir as ir

    makers: dict[str, Callable[[], Any]] = {
        "i": lambda: ir.AttrInt64(name, int(value)),
        "f": lambda: ir.AttrFloat32(name, float(value)),
        "s": lambda: ir.AttrString(name, value),
        "t": lambda: ir.AttrTensor(name, ir_tensor(value)),
        "is": lambda: ir.AttrInt64s(name, [int(v) for v in value]),
        "fs": lambda: ir.AttrFloat32s(name, [float(v) for v in value]),
        "ss": lambda: ir.AttrStrings(name, list(value)),
        "ts": lambda: ir.AttrTensors(name, [ir_tensor(v) for v in value]),
    }
    if kind not in makers:
        raise LegacyOnly(REASON_UNSUPPORTED, f"attribute '{name}' of kind {kind!r}")
    return makers[kind]()


def ir_tensor(t: Any) -> Any:
    import onnx_ir as ir

    if not isinstance(t, torch.Tensor):
        t = torch.tensor(t)
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return ir.Tensor(t.numpy())


def _is_scalar_constant(value: Any) -> bool:
    return (isinstance(value, SymbolicValue) and value.node().kind() == "onnx::Constant"
            and value.node().attrs.get("value", ("", None))[0] == "t"
            and value.node().attrs["value"][1].dim() == 0)


def promote_scalars(nodes: Sequence[SymbolicNode], g: SymbolicGraph) -> None:
    """The TorchScript exporter's scalar type analysis: in Add, Mul, Pow, comparisons ..., a 0-d
    constant (a wrapped Python number) takes the dtype of the tensor operands (tensor operands
    of differing dtypes are left as they are, as there)."""
    for node in nodes:
        op = node.kind().split("::", 1)[1] if node.kind().startswith("onnx::") else ""
        if op not in symbolic_ops.PROMOTING_OPS and op not in symbolic_ops.COMPARING_OPS:
            continue
        ins = [i for i in node.inputs() if isinstance(i, SymbolicValue)]
        scalars = [i.type().dtype() for i in ins if _is_scalar_constant(i)]
        tensors = [i.type().dtype() for i in ins if not _is_scalar_constant(i)]
        if not scalars or any(d is None for d in tensors):
            continue
        target = (tensors or scalars)[0]
        for d in (tensors or scalars)[1:]:
            target = torch.promote_types(target, d)  # type: ignore[arg-type]
        if tensors and not target.is_floating_point and any(d.is_floating_point for d in scalars):  # type: ignore[union-attr]
            target = torch.get_default_dtype()
        node._inputs = [
            g.constant(i.node().attrs["value"][1].to(target))
            if _is_scalar_constant(i) and i.type().dtype() != target else i
            for i in node.inputs()
        ]
        if op in symbolic_ops.PROMOTING_OPS:
            for out in node.outputs():
                out.setType(out.type().with_dtype(target))
