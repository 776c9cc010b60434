"""Run an unchanged TorchScript-era symbolic inside the new exporter's translation.

The symbolic gets ``g``, a graph context of our own (``symbolic_graph``) over the ONNX IR values
being translated; no TorchScript piece is used, so the same runtime serves a torch with or
without the TorchScript exporter. ``torch.onnx.symbolic_helper`` / ``symbolic_opsetN`` calls
run on our implementations (``legacy_api``). The nodes the symbolic's outputs need are then
appended to the new exporter's graph as ONNX IR nodes (old-opset forms rewritten by
``opset_idioms``).
"""

from __future__ import annotations

import contextlib
import numbers
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from . import opset_idioms, torch_internals
from .symbolic_graph import (
    REASON_ATEN,
    REASON_BLOCKS,
    REASON_FAILED,
    REASON_RAW_GRAPH,
    REASON_UNSUPPORTED,
    LegacyOnly,
    SymbolicGraph,
    ir_attribute,
    needed_nodes,
    promote_scalars,
)
from .symbolic_values import SymbolicNode, SymbolicValue, ir_dtype, scalar_code, type_of_ir

__all__ = [
    "REASON_ATEN", "REASON_BLOCKS", "REASON_DATA_DEPENDENT", "REASON_FAILED", "REASON_NO_FAKE",
    "REASON_RAW_GRAPH", "REASON_UNSUPPORTED", "LegacyOnly", "call_symbolic", "check_none_outputs",
    "qualname",
]

REASON_DATA_DEPENDENT = "autograd.Function output shape is data-dependent"
REASON_NO_FAKE = "autograd.Function forward has no fake kernel"


def qualname(fn: Any) -> str:
    mod = getattr(fn, "__module__", None) or "?"
    return f"{mod}.{getattr(fn, '__qualname__', repr(fn))}"


_FUNCTIONS = threading.local()


@contextlib.contextmanager
def collect_functions() -> Iterator[list[Any]]:
    """The onnxscript functions symbolics call through ``g.onnxscript_op`` during the block
    (this thread's), for the export to add to the model (``add_functions``)."""
    outer = getattr(_FUNCTIONS, "active", None)
    _FUNCTIONS.active = collected = []
    try:
        yield collected
    finally:
        _FUNCTIONS.active = outer


def add_functions(model: Any, functions: Sequence[Any]) -> None:
    """Add each onnxscript function (and the opsets its body imports) to ``model``'s functions."""
    import onnx_ir as ir

    for fn in functions:
        function = ir.serde.deserialize_function(fn.to_function_proto())
        if function.identifier() in model.functions:
            continue
        model.functions[function.identifier()] = function
        for domain, version in function.opset_imports.items():
            if domain != "":  # the default domain's version is the model's (down-conversion)
                model.opset_imports.setdefault(domain, version)
        model.opset_imports.setdefault(function.domain, 1)


@dataclass
class Run:
    """Inputs of one symbolic call, and what the conversion produced."""

    g: SymbolicGraph
    inputs: set[int] = field(default_factory=set)  # ids of ir values given to the symbolic
    rewrites: list[str] = field(default_factory=list)


def _is_ir_value(x: Any) -> bool:
    import onnx_ir as ir

    return isinstance(x, ir.Value)


def _graph_input(run: Run, value: Any) -> SymbolicValue:
    run.inputs.add(id(value))
    return run.g.input(value, type_of_ir(value))


def _legacy_arg(run: Run, arg: Any) -> Any:
    """An FX-level argument as the legacy exporter would have handed it to a symbolic."""
    g = run.g
    if _is_ir_value(arg):
        return _graph_input(run, arg)
    if arg is None:
        return g.none()
    if isinstance(arg, (list, tuple)) and any(_is_ir_value(a) for a in arg):
        return g.list_value([_legacy_arg(run, a) for a in arg])
    if isinstance(arg, str):
        return g.op("Constant", value_s=arg)
    if isinstance(arg, torch.dtype):
        arg = scalar_code(arg)
    if isinstance(arg, (torch.device, torch.layout, torch.memory_format)):
        return g.none()
    if isinstance(arg, torch.Tensor):
        return g.constant(arg)
    if isinstance(arg, (bool, numbers.Number)) or (
        isinstance(arg, (list, tuple)) and all(isinstance(v, numbers.Number) for v in arg)
    ):
        # legacy graphs carry numbers as tensor constants (EraseNumberTypes)
        value = torch.tensor(arg) if not isinstance(arg, float) else torch.tensor(arg, dtype=torch.float64)
        return g.constant(value)
    return arg


def _python_arg(run: Run, arg: Any) -> Any:
    """autograd.Function.symbolic: tensors become values, everything else stays Python."""
    if _is_ir_value(arg):
        return _graph_input(run, arg)
    if isinstance(arg, (list, tuple)) and arg and all(_is_ir_value(a) for a in arg):
        return type(arg)(_graph_input(run, a) for a in arg)
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
    Raises ``LegacyOnly`` naming the symbolic for whatever it cannot run.
    """
    from . import legacy_api

    name = label or qualname(symbolic)
    run = Run(SymbolicGraph(opset))
    with legacy_api.serving(opset):
        try:
            conv = _python_arg if python_constants else _legacy_arg
            jit_args = [conv(run, a) for a in args]
            result = symbolic(run.g, *jit_args)
        except LegacyOnly as exc:
            raise exc.named(name) from None
        except Exception as exc:
            raise LegacyOnly(REASON_FAILED, f"a call that failed in our graph context "
                             f"({type(exc).__name__}: {exc})").named(name) from exc
    outs = _flatten_outputs(result, name)
    active = getattr(_FUNCTIONS, "active", None)
    if active is not None:
        active.extend(f for f in run.g.onnx_functions if f not in active)
    if n_outputs is not None and len(outs) != n_outputs:
        raise RuntimeError(f"symbolic {name} returned {len(outs)} outputs; the op has {n_outputs}")
    try:
        promote_scalars(sorted(needed_nodes(outs), key=lambda n: n.order), run.g)
        ir_outs = _convert(run, outs, domain_version, name, source_opset)
    except LegacyOnly as exc:
        raise exc.named(name) from None
    return ir_outs, run.rewrites


def _flatten_outputs(result: Any, name: str) -> list[Any]:
    if isinstance(result, SymbolicValue):
        return [result]
    if (isinstance(result, (list, tuple)) and any(isinstance(v, SymbolicValue) for v in result)
            and all(v is None or isinstance(v, SymbolicValue) for v in result)):
        return list(result)  # None: an output the TorchScript route leaves unconverted
    raise LegacyOnly(REASON_UNSUPPORTED, f"a return value of type {type(result).__name__}, "
                     "not graph values").named(name)


def _topological(outs: Sequence[SymbolicValue | None]) -> list[SymbolicNode]:
    """The nodes the outputs need, each after its inputs' producers (promotion casts included)."""
    order: list[SymbolicNode] = []
    done: set[SymbolicNode] = set()

    def visit(node: SymbolicNode) -> None:
        stack = [(node, False)]
        while stack:
            current, expanded = stack.pop()
            if current in done:
                continue
            if expanded:
                done.add(current)
                order.append(current)
                continue
            stack.append((current, True))
            for i in reversed(current.inputs()):
                if isinstance(i, SymbolicValue) and i.node() not in done:
                    stack.append((i.node(), False))

    for v in outs:
        if v is not None:
            visit(v.node())
    return order


#: metadata key of the placeholder standing for an output a symbolic returned as None
NONE_OUTPUT_KEY = "torch_onnx_compat.none_output"


def _convert(
    run: Run, outs: list[Any], domain_version: Callable[[str], int], name: str,
    source_opset: int | None,
) -> list[Any]:
    import numpy as np
    import onnx_ir as ir

    from compat import symbolic_ops

    tracer = torch_internals.current_tracer()
    value_map: dict[int, Any] = {}  # id(SymbolicValue) -> ir value / list / None

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

    def lookup(v: Any, kind: str) -> Any:
        if v is None:
            return None
        mapped = value_map.get(id(v), v.ir)
        if isinstance(mapped, list):
            raise LegacyOnly(REASON_UNSUPPORTED, f"a prim::ListConstruct used as an input of {kind}")
        return mapped

    for node in _topological(outs):
        kind = node.kind()
        if kind == "prim::Param":
            continue
        if kind == "prim::Constant":
            value_map[id(node.output())] = None
            continue
        if kind == "prim::ListConstruct":
            value_map[id(node.output())] = [lookup(i, kind) for i in node.inputs()]
            continue
        domain, op = symbolic_ops.split_op_name(kind)
        inputs = [lookup(i, kind) for i in node.inputs()]
        attrs = dict(node.attrs)
        n_out = node.outputsSize()
        if domain == "":
            spec = opset_idioms.NodeSpec(op, inputs, {k: v for k, (_, v) in attrs.items()}, n_out)
            change = opset_idioms.rewrite(spec, const, dtype_of, source_opset=source_opset)
            if change:
                run.rewrites.append(change)
                kinds = {k: kind_ for k, (kind_, _) in attrs.items()}
                attrs = {k: (kinds.get(k) or symbolic_ops.kind_of(v), v) for k, v in spec.attrs.items()}
                op, inputs = spec.op_type, spec.inputs
        ir_attrs = [ir_attribute(k, kind_, v) for k, (kind_, v) in attrs.items()]
        results = emit(domain, op, inputs, ir_attrs, n_out)
        for sv, iv in zip(node.outputs(), results):
            _copy_type(sv, iv)
            value_map[id(sv)] = iv

    final = []
    for sv in outs:
        if sv is None:
            # the TorchScript route accepts None for an output the model never uses
            v = const(np.zeros((0,), dtype=np.float32))
            v.producer().metadata_props[NONE_OUTPUT_KEY] = name
            final.append(v)
            continue
        v = value_map.get(id(sv), sv.ir)
        if v is None or isinstance(v, list):
            raise LegacyOnly(REASON_UNSUPPORTED, "an output that is None or a list, not a tensor value")
        if id(v) in run.inputs or any(v is f for f in final):
            # the exporter names each output after its FX node: never rename an input
            v = emit("", "Identity", [v], [], 1)[0]
        final.append(v)
    return final


def _copy_type(sv: SymbolicValue, iv: Any) -> None:
    import onnx_ir as ir

    t = sv.type()
    dtype = ir_dtype(t.dtype()) if t.dtype() is not None else None
    if dtype is not None:
        iv.dtype = dtype
    sizes = t.varyingSizes()
    if sizes is not None:
        iv.shape = ir.Shape(list(sizes))


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
