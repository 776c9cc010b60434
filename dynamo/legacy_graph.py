"""Run an unchanged TorchScript-era symbolic inside the new exporter's translation.

The symbolic gets a real ``GraphContext`` over a scratch ``torch._C.Graph`` whose inputs carry
the types of the values being translated, so ``g.op``, ``parse_args``, ``_maybe_get_const``,
``.type().sizes()``, ``setType`` and ``node().kind()`` behave exactly as under the legacy
exporter. The nodes it builds are then converted to ONNX IR nodes and appended to the new
exporter's graph (old-opset forms rewritten by ``opset_idioms``).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from . import opset_idioms, torch_internals


class LegacyOnly(Exception):
    """A construct the adapter cannot run on the torch.export route (the TorchScript route can)."""

    def __init__(self, reason: str, construct: str, symbolic: str = "?") -> None:
        self.reason = reason
        self.construct = construct
        self.symbolic = symbolic
        super().__init__(self._text())

    def _text(self) -> str:
        return (f"symbolic {self.symbolic} uses {self.construct}, which the torch.export route "
                "cannot run; use the TorchScript route (dynamo=False)")

    def named(self, symbolic: str) -> LegacyOnly:
        self.symbolic = symbolic
        self.args = (self._text(),)
        return self


# reason classes (short and stable: the ledger groups by them)
REASON_ATEN = "legacy symbolic uses ATen fallback"
REASON_BLOCKS = "legacy symbolic builds blocks"
REASON_RAW_GRAPH = "legacy symbolic uses raw _C.Graph methods"
REASON_DATA_DEPENDENT = "autograd.Function output shape is data-dependent"
REASON_NO_FAKE = "autograd.Function forward has no fake kernel"
REASON_UNSUPPORTED = "legacy symbolic emits an unsupported construct"
REASON_NO_GRAPH_CONTEXT = "legacy symbolic needs the TorchScript exporter's graph context"


def qualname(fn: Any) -> str:
    mod = getattr(fn, "__module__", None) or "?"
    return f"{mod}.{getattr(fn, '__qualname__', repr(fn))}"


def _make_context_class() -> type:
    base = torch_internals.graph_context_class()

    class LegacyGraphContext(base):  # type: ignore[misc, valid-type]
        """``g`` for legacy symbolics; Python scalars are accepted as inputs."""

        def op(self, opname: str, *raw_args: Any, outputs: int = 1, **kwargs: Any) -> Any:
            if opname.startswith("aten::"):
                raise LegacyOnly(REASON_ATEN, f"g.op({opname!r}) (an ATen node)")
            args = [_as_const_tensor(a) for a in raw_args]
            return super().op(opname, *args, outputs=outputs, **_list_suffixes(kwargs))

        def aten_op(self, operator: str, *args: Any, **kwargs: Any) -> Any:
            raise LegacyOnly(REASON_ATEN, f"g.at({operator!r}) (ATen fallback)")

        at = aten_op

        def onnxscript_op(self, onnx_fn: Any, *args: Any, **kwargs: Any) -> Any:
            raise LegacyOnly(REASON_UNSUPPORTED, "g.onnxscript_op")

        def __getattr__(self, name: str) -> Any:
            # GraphContext relays unknown attributes to the raw _C.Graph
            if name.startswith("__"):
                raise AttributeError(name)
            raise LegacyOnly(REASON_RAW_GRAPH, f"the raw _C.Graph method g.{name}")

    return LegacyGraphContext


_CTX_CLASS: type | None = None


def _context_class() -> type:
    global _CTX_CLASS
    if _CTX_CLASS is None:
        _CTX_CLASS = _make_context_class()
    return _CTX_CLASS


def _list_suffixes(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Accept ``dims_is=[..]`` (plural suffix) as well as torch's ``dims_i=[..]``."""
    out = {}
    for key, value in kwargs.items():
        head, _, suffix = key.rpartition("_")
        if head and suffix in ("is", "fs", "ss", "ts"):
            key, value = f"{head}_{suffix[0]}", list(value)
        out[key] = value
    return out


def _as_const_tensor(arg: Any) -> Any:
    if isinstance(arg, bool):
        return torch.tensor(arg)
    if isinstance(arg, numbers.Integral):
        return torch.tensor(int(arg), dtype=torch.int64)
    if isinstance(arg, numbers.Real):
        return torch.tensor(float(arg), dtype=torch.float32)
    if isinstance(arg, (list, tuple)) and arg and all(isinstance(v, numbers.Number) for v in arg):
        return torch.tensor(list(arg))
    return arg


# ---------------------------------------------------------------- dtype mappings (lazy onnx_ir)

_TORCH_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                 "uint8", "bool")
_IR_NAMES = ("FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16", "INT64", "INT32", "INT16", "INT8", "UINT8",
             "BOOL")


def _ir_to_torch_dtype(dtype: Any) -> torch.dtype | None:
    if dtype is None:
        return None
    for t, i in zip(_TORCH_DTYPES, _IR_NAMES):
        if dtype.name == i:
            return getattr(torch, t)
    return None


def _torch_to_ir_dtype(dtype: torch.dtype | None) -> Any:
    import onnx_ir as ir

    for t, i in zip(_TORCH_DTYPES, _IR_NAMES):
        if dtype == getattr(torch, t):
            return getattr(ir.DataType, i)
    return None


def _jit_type_for(value: Any) -> Any:
    """A TensorType carrying the dtype and (possibly symbolic) sizes of an ONNX IR value."""
    dtype = _ir_to_torch_dtype(getattr(value, "dtype", None)) or torch.float32
    shape = getattr(value, "shape", None)
    sizes = None if shape is None else [d if isinstance(d, int) else None for d in shape]
    return torch_internals.jit_tensor_type(dtype, sizes)


# ---------------------------------------------------------------- the run


@dataclass
class Run:
    """Inputs of one symbolic call, and what the conversion produced."""

    graph: Any
    ctx: Any
    value_map: dict[Any, Any] = field(default_factory=dict)  # _C.Value -> ir value / list / None
    inputs: set[int] = field(default_factory=set)  # ids of ir values given to the symbolic
    rewrites: list[str] = field(default_factory=list)


def _new_run(opset: int) -> Run:
    torch_internals.clear_shape_records(opset)
    graph = torch_internals.new_jit_graph()
    ctx = _context_class()(graph=graph, block=graph.block(), opset=opset, original_node=None,
                           params_dict={}, env={}, values_in_env=set())
    return Run(graph, ctx)


def _is_ir_value(x: Any) -> bool:
    import onnx_ir as ir

    return isinstance(x, ir.Value)


def _graph_input(run: Run, value: Any) -> Any:
    jv = run.graph.addInput()
    jv.setType(_jit_type_for(value))
    run.value_map[jv] = value
    run.inputs.add(id(value))
    return jv


def _none_value(run: Run) -> Any:
    node = run.graph.insertNode(run.graph.create("prim::Constant"))
    node.output().setType(torch_internals.jit_none_type())
    return node.output()


def _legacy_arg(run: Run, arg: Any) -> Any:
    """An FX-level argument as the legacy exporter would have handed it to a symbolic."""
    if _is_ir_value(arg):
        return _graph_input(run, arg)
    if arg is None:
        return _none_value(run)
    if isinstance(arg, (list, tuple)) and any(_is_ir_value(a) for a in arg):
        items = [_legacy_arg(run, a) for a in arg]
        return run.ctx.op("prim::ListConstruct", *items)
    if isinstance(arg, str):
        return run.ctx.op("Constant", value_s=arg)
    if isinstance(arg, torch.dtype):
        arg = torch_internals.jit_scalar_type(arg)
    if isinstance(arg, (torch.device, torch.layout, torch.memory_format)):
        return _none_value(run)
    if isinstance(arg, torch.Tensor):
        return run.ctx.op("Constant", value_t=arg)
    if isinstance(arg, (bool, numbers.Number)) or (
        isinstance(arg, (list, tuple)) and all(isinstance(v, numbers.Number) for v in arg)
    ):
        # legacy graphs carry numbers as tensor constants (EraseNumberTypes)
        value = torch.tensor(arg) if not isinstance(arg, float) else torch.tensor(arg, dtype=torch.float64)
        return run.ctx.op("Constant", value_t=value)
    return arg


def _python_arg(run: Run, arg: Any) -> Any:
    """autograd.Function.symbolic: tensors become values, everything else stays Python."""
    if _is_ir_value(arg):
        return _graph_input(run, arg)
    return arg


def call_symbolic(
    symbolic: Callable[..., Any],
    args: Sequence[Any],
    *,
    opset: int,
    domain_version: Callable[[str], int],
    n_outputs: int | None,
    python_constants: bool = False,
    label: str | None = None,
    source_opset: int | None = None,
) -> tuple[list[Any], list[str]]:
    """Run ``symbolic(g, *args)`` and emit its nodes into the exporter's current graph.

    ``args`` hold ONNX IR values and Python constants (FX-level). Returns the ONNX IR outputs
    and the old-opset rewrites applied. ``source_opset`` is the opset the symbolic was written for
    (old-opset semantics such as RoiAlign's coordinates follow it).
    An output the symbolic returns as ``None`` (an unused output, as torchvision's ``roi_pool``
    returns) becomes a placeholder that ``check_none_outputs`` later requires to be unused.
    Raises ``LegacyOnly`` for constructs the route cannot run.
    """
    name = label or qualname(symbolic)
    from compat.installed import torch_caps

    if not torch_caps.has_legacy_graph_context():  # it goes with the TorchScript exporter
        raise LegacyOnly(REASON_NO_GRAPH_CONTEXT,
                         f"g (a GraphContext): {torch_caps.torchscript_missing_reason()}").named(name)
    run = _new_run(opset)
    with torch_internals.legacy_globals(opset):
        try:
            conv = _python_arg if python_constants else _legacy_arg
            jit_args = [conv(run, a) for a in args]
            result = symbolic(run.ctx, *jit_args)
        except LegacyOnly as exc:
            raise exc.named(name) from None
    outs = _flatten_outputs(result, name)
    if n_outputs is not None and len(outs) != n_outputs:
        raise RuntimeError(f"symbolic {name} returned {len(outs)} outputs; the op has {n_outputs}")
    _promote_scalars(run, outs, opset)
    try:
        ir_outs = _convert(run, outs, domain_version, name, source_opset)
    except LegacyOnly as exc:
        raise exc.named(name) from None
    return ir_outs, run.rewrites


def _promote_scalars(run: Run, outs: list[Any], opset: int) -> None:
    """The TorchScript exporter's scalar type analysis: a wrapped number (0-d double/int64
    constant from ``_generate_wrapped_number``) takes the dtype of the tensor operand of Add,
    Mul, Pow, Where, ... Run on the scratch graph exactly as the TorchScript route runs it."""
    values = [v for v in outs if v is not None]
    if not values or any(list(n.blocks()) for n in run.graph.nodes()):
        return  # blocks are refused by the conversion, with their own reason
    for v in values:
        run.graph.registerOutput(v)
    torch_internals.scalar_type_analysis(run.graph, opset)
    promoted = list(run.graph.outputs())
    for _ in promoted:
        run.graph.eraseOutput(0)
    it = iter(promoted)
    outs[:] = [None if v is None else next(it) for v in outs]


def _flatten_outputs(result: Any, name: str) -> list[Any]:
    if torch_internals.is_jit_value(result):
        return [result]
    if (isinstance(result, (list, tuple)) and any(torch_internals.is_jit_value(v) for v in result)
            and all(v is None or torch_internals.is_jit_value(v) for v in result)):
        return list(result)  # None: an output the TorchScript route leaves unconverted
    raise RuntimeError(f"symbolic {name} returned {type(result).__name__}, not graph values")


def _needed_nodes(outs: list[Any]) -> set[Any]:
    seen: set[Any] = set()
    stack = [v.node() for v in outs if v is not None]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(i.node() for i in node.inputs())
    return seen


def _attr_value(node: Any, name: str) -> Any:
    kind = node.kindOf(name)
    if kind in ("g", "gs"):
        raise LegacyOnly(REASON_BLOCKS, f"a subgraph attribute '{name}' on {node.kind()}")
    if kind == "c":  # torch reports FLOATS as "c"
        kind = "fs"
    try:
        return kind, getattr(node, kind)(name)
    except (AttributeError, RuntimeError) as exc:
        raise LegacyOnly(REASON_UNSUPPORTED, f"attribute '{name}' of kind {kind!r}") from exc


def _ir_attr(name: str, kind: str, value: Any) -> Any:
    import onnx_ir as ir

    if kind == "i":
        return ir.AttrInt64(name, int(value))
    if kind == "f":
        return ir.AttrFloat32(name, float(value))
    if kind == "s":
        return ir.AttrString(name, value)
    if kind == "t":
        return ir.AttrTensor(name, _ir_tensor(value))
    if kind == "is":
        return ir.AttrInt64s(name, [int(v) for v in value])
    if kind == "fs":
        return ir.AttrFloat32s(name, [float(v) for v in value])
    if kind == "ss":
        return ir.AttrStrings(name, list(value))
    if kind == "ts":
        return ir.AttrTensors(name, [_ir_tensor(v) for v in value])
    raise LegacyOnly(REASON_UNSUPPORTED, f"attribute '{name}' of kind {kind!r}")


def _ir_tensor(t: torch.Tensor) -> Any:
    import onnx_ir as ir

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return ir.Tensor(t.numpy())


#: metadata key of the placeholder standing for an output a symbolic returned as None
NONE_OUTPUT_KEY = "torch_onnx_compat.none_output"


def _convert(
    run: Run, outs: list[Any], domain_version: Callable[[str], int], name: str,
    source_opset: int | None,
) -> list[Any]:
    import numpy as np
    import onnx_ir as ir

    tracer = torch_internals.current_tracer()
    needed = _needed_nodes(outs)

    def emit(domain: str, op: str, inputs: list[Any], attrs: list[Any], n: int) -> list[Any]:
        version = domain_version(domain) if domain else None
        node = ir.Node(domain, op, inputs, attrs, num_outputs=n, version=version)
        tracer.nodes.append(node)
        return list(node.outputs)

    def const(array: np.ndarray) -> Any:
        return emit("", "Constant", [], [ir.AttrTensor("value", ir.Tensor(array))], 1)[0]

    def dtype_of(value: Any) -> Any:
        dt = getattr(value, "dtype", None)
        return dt.numpy() if dt is not None else None

    for node in run.graph.nodes():
        if node not in needed:
            continue
        kind = node.kind()
        if list(node.blocks()):
            raise LegacyOnly(REASON_BLOCKS, f"a {kind} node with blocks (If/Loop built in the symbolic)")
        if kind == "prim::Constant" and node.mustBeNone():
            run.value_map[node.output()] = None
            continue
        if kind == "prim::ListConstruct":
            run.value_map[node.output()] = [run.value_map[i] for i in node.inputs()]
            continue
        domain, op = kind.split("::", 1)
        if domain in ("aten", "prim"):
            construct = "g.at / an ATen node" if domain == "aten" else f"a {kind} node"
            reason = REASON_ATEN if domain == "aten" else REASON_RAW_GRAPH
            raise LegacyOnly(reason, construct)
        domain = "" if domain == "onnx" else domain
        inputs = []
        for i in node.inputs():
            v = run.value_map[i]
            if isinstance(v, list):
                raise LegacyOnly(REASON_UNSUPPORTED, f"a prim::ListConstruct used as an input of {kind}")
            inputs.append(v)
        attrs = {a: _attr_value(node, a) for a in node.attributeNames()}
        n_out = len(list(node.outputs()))
        if domain == "":
            spec = opset_idioms.NodeSpec(op, inputs, {k: v for k, (_, v) in attrs.items()}, n_out)
            change = opset_idioms.rewrite(spec, const, dtype_of, source_opset=source_opset)
            if change:
                run.rewrites.append(change)
                kinds = {k: kind_ for k, (kind_, _) in attrs.items()}
                attrs = {k: (kinds.get(k) or _kind_of(v), v) for k, v in spec.attrs.items()}
                op, inputs = spec.op_type, spec.inputs
        ir_attrs = [_ir_attr(k, kind_, v) for k, (kind_, v) in attrs.items()]
        results = emit(domain, op, inputs, ir_attrs, n_out)
        for jv, iv in zip(node.outputs(), results):
            _copy_type(jv, iv)
            run.value_map[jv] = iv

    final = []
    for jv in outs:
        if jv is None:
            # the TorchScript route accepts None for an output the model never uses
            v = const(np.zeros((0,), dtype=np.float32))
            v.producer().metadata_props[NONE_OUTPUT_KEY] = name
            final.append(v)
            continue
        v = run.value_map[jv]
        if v is None or isinstance(v, list):
            raise RuntimeError("a symbolic output must be a tensor value, not None or a list")
        if id(v) in run.inputs or any(v is f for f in final):
            # the exporter names each output after its FX node: never rename an input
            v = emit("", "Identity", [v], [], 1)[0]
        final.append(v)
    return final


def _kind_of(value: Any) -> str:
    if isinstance(value, (bool, int)):
        return "i"
    if isinstance(value, float):
        return "f"
    if isinstance(value, str):
        return "s"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, int) for v in value):
            return "is"
        if all(isinstance(v, (int, float)) for v in value):
            return "fs"
        return "ss"
    return "t"


def _copy_type(jv: Any, iv: Any) -> None:
    jtype = jv.type()
    if not torch_internals.is_jit_tensor_type(jtype):
        return
    import onnx_ir as ir

    dtype = _torch_to_ir_dtype(jtype.dtype())
    if dtype is not None:
        iv.dtype = dtype
    sizes = jtype.varyingSizes()
    if sizes is not None:
        iv.shape = ir.Shape([d if d is not None else None for d in sizes])


def check_none_outputs(model: Any) -> None:
    """Drop the placeholders of ``None`` symbolic outputs; raise when the model uses one
    (the TorchScript route raises too: that output was never converted)."""
    import onnx_ir as ir

    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        label = node.metadata_props.get(NONE_OUTPUT_KEY)
        if label is None:
            continue
        value = node.outputs[0]
        if value.uses() or value.is_graph_output():
            raise RuntimeError(
                f"symbolic {label} returned None for an output the model uses (the TorchScript "
                "exporter cannot convert it either)")
        node.graph.remove(node, safe=True)
