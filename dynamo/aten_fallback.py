"""``operator_export_type`` ONNX_ATEN_FALLBACK, ONNX_FALLTHROUGH and ONNX_ATEN on the torch.export route.

The TorchScript exporter's meanings, given at the exporter's decomposition step
(``torch_internals.decomposition_hook``), where the captured program meets torch's ONNX registry:

- ``ONNX_ATEN_FALLBACK``: every operator with an ONNX translation (torchlib's, a decomposition
  into translated operators, a custom translation or a legacy symbolic) is translated as usual;
  one without becomes an ``ATen`` node in domain ``org.pytorch.aten`` with the attributes
  ``operator`` and ``overload_name``.
- ``ONNX_FALLTHROUGH``: such an operator becomes a node named after it in its namespace's domain
  (``org.pytorch.aten`` for aten operators, ``mylib`` for ``mylib::op``).
- ``ONNX_ATEN``: every aten operator becomes an ``ATen`` node; operators of other namespaces are
  translated (one without a translation fails, as on the TorchScript route).

The node's inputs are the operator's arguments in schema order, as the TorchScript exporter wrote
them: tensors as they are, numbers and number lists as constants (int64, float64 or bool), ``None``
as an empty input, a string as a string constant, a tensor list as a ``SequenceConstruct``, a dtype
as its ATen ScalarType code. Where decomposing an operator is what produced one without a
translation (``digamma`` -> ``prims.digamma``), the operator the model called falls back, as the
TorchScript exporter saw it. ``overload_name`` is the overload's own (``""`` for the default
overload); the TorchScript exporter writes ``""`` for every fallback node, as its traced node has
lost its schema by then, so an ATen runtime would pick the default overload of e.g. ``median.dim``.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from compat.errors import CompatValueError, RouteFailed

from . import torch_internals
from .translation_fit import matches_every_node

ROUTE = "dynamo"
CODE = "ONX103"
OPTION = "operator_export_type"
MODES = ("ONNX_ATEN_FALLBACK", "ONNX_FALLTHROUGH", "ONNX_ATEN")
ATEN_DOMAIN = "org.pytorch.aten"
#: the version the TorchScript exporter imports ``org.pytorch.aten`` (and fall-through domains) at
DOMAIN_VERSION = 1
REASON = "operator without an ATen fallback form"
#: the plan's translation per mode; the operators it applied to are recorded after the export
MEANING = {
    "ONNX_ATEN_FALLBACK": "ONNX_ATEN_FALLBACK: operators with an ONNX translation translated; one "
                          f"without written as an {ATEN_DOMAIN} ATen node (operator, overload_name)",
    "ONNX_FALLTHROUGH": "ONNX_FALLTHROUGH: operators with an ONNX translation translated; one "
                        "without written as a node of its own name in its namespace's domain",
    "ONNX_ATEN": f"ONNX_ATEN: every aten operator written as an {ATEN_DOMAIN} ATen node "
                 "(operator, overload_name)",
}

#: ATen ScalarType codes (c10, stable: TorchScript files store them) by the exporter's ONNX dtype
_SCALAR_TYPES = {
    "UINT8": 0, "INT8": 1, "INT16": 2, "INT32": 3, "INT64": 4, "FLOAT16": 5, "FLOAT": 6,
    "DOUBLE": 7, "COMPLEX64": 9, "COMPLEX128": 10, "BOOL": 11, "BFLOAT16": 15,
}
#: schema types passed as an empty input (the exporter hands them over as strings)
_AS_NONE = ("Device", "Layout", "MemoryFormat", "Generator")


class NoFallbackForm(Exception):
    """An operator whose arguments or results have no ATen-node form here."""


@dataclass
class Session:
    """One export's fallback: installs the decomposition step, collects what fell back."""

    mode: str
    domain_version: Callable[[str], int]
    #: operators of the user's custom_translation_table (``ns::op.overload``)
    user_ops: frozenset[str] = frozenset()
    #: operator (``ns::op.overload``) -> the node it was written as, for the final graph
    fallen: dict[str, str] = field(default_factory=dict)
    failure: RouteFailed | None = None
    #: ONNX_ATEN: aten operator -> why it has no ATen node here (translated to ONNX instead)
    kept: dict[str, str] = field(default_factory=dict)
    _ours: dict[str, str] = field(default_factory=dict)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Open around the export; a fallback that cannot be written fails the route by name."""
        try:
            with torch_internals.decomposition_hook(self._step):
                yield
        except RouteFailed:
            raise
        except Exception as exc:
            if self.failure is not None:
                raise self.failure from exc
            raise

    def actions(self) -> list[str]:
        """The ledger's actions: one per operator written as a fallback node, or the summary."""
        kept = [f"ONNX_ATEN: {op} {why}; translated to ONNX instead (the TorchScript exporter "
                "wrote an ATen node)" for op, why in sorted(self.kept.items())]
        if self.fallen:
            what = ("an aten operator" if self.mode == "ONNX_ATEN"
                    else "no ONNX translation")
            return [f"{self.mode}: {op} ({what}) written as {node}, as the TorchScript exporter did"
                    for op, node in sorted(self.fallen.items())] + kept
        if self.mode == "ONNX_ATEN":
            return kept or ["ONNX_ATEN: no aten operator in the graph; nothing written as ATen"]
        node = "ATen node" if self.mode == "ONNX_ATEN_FALLBACK" else "fall-through node"
        return [(f"{self.mode}: every operator has an ONNX translation; no {node}, as the "
                 "TorchScript exporter wrote it")]

    # ---------------------------------------------------------------- the decomposition step

    def _step(self, program: Any, registry: Any, decompose: Callable[[Any], Any]) -> Any:
        if self.mode == "ONNX_ATEN":  # ahead of torchlib's translations; the user's table wins
            for target in _operators(program):
                if _namespace(target) == "aten" and target.name() not in self.user_ops:
                    self._register(registry, target, required=False)
        decomposed = decompose(program)
        missing = _untranslated(decomposed, registry)
        if missing and self.mode != "ONNX_ATEN":
            # the operator the model called, where decomposing it made the untranslated one
            called = {t.name(): t for t in _operators(program)}
            # (the program's own OpOverload: the decomposition table matches them by identity)
            originals = {called[o.name()] for _, o in missing
                         if o is not None and o.name() in called and not registry.is_registered(o)}
            if originals:
                for original in originals:
                    self._register(registry, original)
                decomposed = decompose(program)
                missing = _untranslated(decomposed, registry)
        for target, _ in missing:
            if self.mode != "ONNX_ATEN" or _namespace(target) == "aten":
                self._register(registry, target)
        if self.mode == "ONNX_ATEN":  # what decomposing (CompositeImplicit ops) brought in
            for target in _operators(decomposed):
                if (_namespace(target) == "aten" and target.name() not in self.user_ops
                        and target.name() not in self._ours):
                    self._register(registry, target, required=False)
        present = {t.name() for t in _operators(decomposed)}
        self.fallen = {name: node for name, node in self._ours.items() if name in present}
        return decomposed

    def _register(self, registry: Any, target: Any, required: bool = True) -> None:
        """Write ``target`` as its legacy node; without a form for it, fail the route by name
        (``required``) or leave it to its ONNX translation (ONNX_ATEN, noted in the ledger;
        operators without results are assertions torch's step removes)."""
        try:
            translate, node = _translation(target, self.mode, self.domain_version)
        except NoFallbackForm as exc:
            if not required:
                if torch_internals.op_schema(target).returns:
                    self.kept[target.name()] = str(exc)
                return
            self.failure = RouteFailed(ROUTE, REASON, CompatValueError(
                f"operator_export_type={self.mode}: {target.name()} {exc}; the TorchScript "
                "exporter (route='legacy') may export it"))
            raise self.failure from None
        registry.register_op(target, matches_every_node(translate))
        self._ours[target.name()] = node


def session(req: Any) -> Session:
    """The fallback session for ``req`` (``operator_export_type`` in ``MODES``); a torch whose
    exporter cannot be hooked fails the route by name, so auto falls back to TorchScript."""
    if not torch_internals.can_hook_decomposition():
        from compat.installed import torch_caps

        raise RouteFailed(ROUTE, f"{CODE}: needs the TorchScript exporter", CompatValueError(
            f"operator_export_type={req.operator_export_type}: torch "
            f"{torch_caps.torch_version_str()}'s ONNX exporter has no decomposition step "
            "compat can extend; use route='legacy' (dynamo=False) or route='auto'"))
    custom = dict(req.custom_opsets or {})
    user = frozenset(op.name() for op in (req.custom_translation_table or {})
                     if callable(getattr(op, "name", None)))
    return Session(req.operator_export_type,
                   lambda domain: int(custom.get(domain, DOMAIN_VERSION)), user)


# ---------------------------------------------------------------- the graph


def _graphs(program: Any) -> Iterator[Any]:
    import torch

    for module in program.graph_module.modules():
        if isinstance(module, torch.fx.GraphModule):
            yield module.graph


def _operators(program: Any) -> list[Any]:
    """The distinct ``OpOverload`` targets of the program (subgraphs included), in order."""
    import torch

    seen: dict[str, Any] = {}
    for graph in _graphs(program):
        for node in graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                seen.setdefault(node.target.name(), node.target)
    return list(seen.values())


def _untranslated(program: Any, registry: Any) -> list[tuple[Any, Any]]:
    """(operator, the operator whose decomposition made it or None) for every operator of the
    decomposed program the registry cannot translate."""
    import torch

    out: dict[str, tuple[Any, Any]] = {}
    for graph in _graphs(program):
        for node in graph.nodes:
            target = node.target
            if (node.op != "call_function" or not isinstance(target, torch._ops.OpOverload)
                    or _namespace(target) == "onnx" or registry.is_registered(target)):
                continue
            original = node.meta.get("original_aten")
            if not isinstance(original, torch._ops.OpOverload) or original.name() == target.name():
                original = None
            out.setdefault(target.name(), (target, original))
    return list(out.values())


def _namespace(target: Any) -> str:
    return target.name().split("::", 1)[0]


# ---------------------------------------------------------------- the node


def _translation(target: Any, mode: str, domain_version: Callable[[str], int]
                 ) -> tuple[Callable[..., Any], str]:
    """A translation writing ``target`` as its legacy node, and that node's description."""
    import onnx_ir as ir

    from .symbolics import _bind

    schema = torch_internals.op_schema(target)
    namespace, name = schema.name.split("::", 1)
    returns = [str(r.type) for r in schema.returns]
    if not returns or any(r.startswith("List") for r in returns):
        raise NoFallbackForm(f"returns {schema.returns!s} (an ATen node has a fixed number of "
                             "tensor outputs)")
    kinds = [str(a.real_type) for a in schema.arguments]
    for arg, kind in zip(schema.arguments, kinds):
        if "Optional[Tensor]]" in kind:
            raise NoFallbackForm(f"takes a list of optional tensors ({arg.name}: {kind})")
    if mode == "ONNX_FALLTHROUGH":
        domain = ATEN_DOMAIN if namespace == "aten" else namespace
        op_type, attrs = name, []
        shown = f"a {domain}::{name} node"
    else:
        domain, op_type = ATEN_DOMAIN, "ATen"
        overload = schema.overload_name if namespace == "aten" else ""
        attrs = [ir.AttrString("operator", name), ir.AttrString("overload_name", overload)]
        shown = f"{ATEN_DOMAIN}::ATen(operator={name!r}, overload_name={overload!r})"
    version = domain_version(domain)
    n_out = len(returns)

    def translate(*args: Any, **kwargs: Any) -> Any:
        tracer = torch_internals.current_tracer()
        values = _bind(schema, args, kwargs)
        inputs = [_input(tracer, kind, v) for kind, v in zip(kinds, values)]
        node = ir.Node(domain, op_type, inputs, attrs, num_outputs=n_out, version=version)
        tracer.nodes.append(node)
        return node.outputs[0] if n_out == 1 else list(node.outputs)

    translate.__name__ = f"aten_fallback_{name}"
    return translate, shown


def _input(tracer: Any, kind: str, value: Any) -> Any:
    """One argument as the TorchScript exporter fed it to an ATen node."""
    import numpy as np
    import onnx_ir as ir

    def emit(op: str, inputs: list[Any], attrs: list[Any]) -> Any:
        node = ir.Node("", op, inputs, attrs, num_outputs=1)
        tracer.nodes.append(node)
        return node.outputs[0]

    def const(array: Any) -> Any:
        return emit("Constant", [], [ir.AttrTensor("value", ir.Tensor(array))])

    if value is None or any(k in kind for k in _AS_NONE):
        return None
    if isinstance(value, ir.Value):
        return value
    if "ScalarType" in kind:
        code = _SCALAR_TYPES.get(ir.DataType(int(value)).name)
        if code is None:
            raise RuntimeError(f"dtype {ir.DataType(int(value)).name} has no ATen ScalarType code here")
        return const(np.array(code, dtype=np.int64))
    if isinstance(value, str):
        return emit("Constant", [], [ir.AttrString("value_string", value)])
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, ir.Value) for v in value):
            if "Tensor" in kind:
                return emit("SequenceConstruct", list(value), [])
            # sizes mixing symbolic and static ints: a 1-D int64 tensor, as ListConstruct became
            one = const(np.array([1], dtype=np.int64))
            parts = [emit("Reshape", [v, one], []) if isinstance(v, ir.Value)
                     else const(np.array([int(v)], dtype=np.int64)) for v in value]
            return emit("Concat", parts, [ir.AttrInt64("axis", 0)])
        return const(_number_array(list(value)))
    if isinstance(value, (bool, numbers.Number)):
        return const(_number_array(value))
    raise RuntimeError(f"argument {value!r} ({kind}) has no ATen-node input form")


def _number_array(value: Any) -> Any:
    """Numbers as the TorchScript exporter's constants: bool, int64, or float64 (Python float)."""
    import numpy as np

    items = value if isinstance(value, list) else [value]
    if all(isinstance(v, bool) for v in items):
        dtype: Any = np.bool_
    elif all(isinstance(v, numbers.Integral) for v in items):
        dtype = np.int64
    else:
        dtype = np.float64
    return np.array(value, dtype=dtype)
