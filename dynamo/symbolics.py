"""Custom symbolic registrations and ``autograd.Function.symbolic`` on the torch.export route.

``export_context(req)`` builds the translation table that runs each registered legacy symbolic
(``register_custom_op_symbolic``, whether made through compat or directly with torch) for every
overload of its op, and opens an ``autograd_functions`` session so Functions with a ``symbolic``
become opaque ops translated by that symbolic. Constructs only the TorchScript route can run
raise ``RouteFailed("dynamo", <reason>, LegacyOnly)`` naming the symbolic and the construct.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from compat.errors import RouteFailed, SymbolicNotApplied
from compat.request import ExportRequest, Translation

ROUTE = "dynamo"


@dataclass
class SymbolicPlan:
    """What the route merges into its export call. ``translations`` keeps growing during the
    export (Functions are found while tracing): read it after the export for the full list."""

    translation_table: dict[Any, Any] = field(default_factory=dict)
    translations: list[Translation] = field(default_factory=list)
    post_process: list[Callable[[Any], None]] = field(default_factory=list)


@dataclass
class _State:
    req: ExportRequest
    plan: SymbolicPlan
    limit: Exception | None = None
    seen: set[str] = field(default_factory=set)
    ran: set[str] = field(default_factory=set)  # registered ops whose symbolic actually ran

    def on_limit(self, exc: Exception) -> None:
        if self.limit is None:
            self.limit = exc

    def note(self, code: str, option: str, action: str) -> None:
        if (code, option, action) not in self.seen:
            self.seen.add((code, option, action))  # type: ignore[arg-type]
            self.plan.translations.append(Translation(code, option, action))


def target_opset(req: ExportRequest) -> int:
    from compat.installed import torch_caps

    return req.opset_version or torch_caps.dynamo_default_opset()


#: a custom domain's version when ``custom_opsets`` does not name it (as the TorchScript route does)
DEFAULT_DOMAIN_VERSION = 1


def _domain_version(req: ExportRequest) -> Callable[[str], int]:
    """Version of each custom domain a symbolic emits into: ``custom_opsets``, else 1.

    A registration's opset is the ONNX opset from which its symbolic applies, never the version
    of the domains it emits (onnxruntime refuses e.g. ``com.microsoft`` above 1)."""
    custom = dict(req.custom_opsets or {})
    return lambda domain: int(custom.get(domain, DEFAULT_DOMAIN_VERSION))


def overloads(name: str) -> list[Any]:
    """Every ``OpOverload`` of ``namespace::op`` that torch knows (empty when the op is not loaded)."""
    import torch

    ns, op = name.split("::", 1)
    try:
        packet = getattr(getattr(torch.ops, ns), op)
        return [getattr(packet, o) for o in packet.overloads()]
    except (AttributeError, RuntimeError):
        return []


def _bind(schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """FX args/kwargs -> every schema argument in order, defaults filled (what TorchScript passes)."""
    out = []
    for i, arg in enumerate(schema.arguments):
        if i < len(args) and not arg.kwarg_only:
            value = args[i]
        elif arg.name in kwargs:
            value = kwargs[arg.name]
            if arg.name == "dtype" and value == -1:  # the exporter's spelling of None
                value = None
        elif arg.has_default_value():
            value = arg.default_value
        else:
            value = None
        out.append(value)
    return out


def _op_translator(overload: Any, reg: Any, state: _State, opset: int) -> Callable[..., Any]:
    from . import legacy_graph, torch_internals

    schema = torch_internals.op_schema(overload)
    list_return = len(schema.returns) == 1 and "[]" in str(schema.returns[0].type)
    single = len(schema.returns) == 1 and not list_return
    label = legacy_graph.qualname(reg.fn)
    versions = _domain_version(state.req)

    def translate(*args: Any, **kwargs: Any) -> Any:
        try:
            outs, rewrites = legacy_graph.call_symbolic(
                reg.fn, _bind(schema, args, kwargs), opset=opset, domain_version=versions,
                n_outputs=None if list_return else len(schema.returns),
                label=label, source_opset=reg.opset_version,  # the opset it was written for
            )
        except legacy_graph.LegacyOnly as exc:
            state.on_limit(exc)
            raise
        except Exception as exc:
            raise RuntimeError(f"legacy symbolic {label} for {overload.name()} failed: {exc}") from exc
        if reg.name not in state.ran:
            state.ran.add(reg.name)
            state.note("ONX301", reg.name, f"translated by the legacy symbolic {label} (registered for "
                       f"opset {reg.opset_version}) in the shim's graph context")
        for change in rewrites:
            state.note("ONX301", reg.name, f"old-opset form rewritten for opset {opset}: {change}")
        return outs[0] if single else outs

    translate.__name__ = f"legacy_symbolic_{reg.op}"
    return translate


@contextlib.contextmanager
def export_context(req: ExportRequest) -> Iterator[SymbolicPlan]:
    """Translation table, translations and post-processing for the legacy symbolics in play."""
    from compat.installed import torch_caps

    plan = SymbolicPlan()
    # without the TorchScript graph context a symbolic in play fails its translation (LegacyOnly)
    if not torch_caps.has_exporter_tracer():
        yield plan
        return
    from compat.routing import registry

    from . import autograd_functions, legacy_graph

    state = _State(req, plan)
    opset = torch_caps.torchlib_min_opset()  # the opset the new exporter builds at
    user_table = set(req.custom_translation_table or {})
    registered = registry.active(target_opset(req))
    for name, reg in registered.items():
        for ov in overloads(name):
            if ov not in user_table:
                plan.translation_table[ov] = _op_translator(ov, reg, state, opset)
    plan.post_process.append(lambda program: _set_custom_opsets(program, req))
    plan.post_process.append(lambda program: _check_registered_ops_applied(program, registered, state))
    plan.post_process.append(_check_none_outputs)

    with contextlib.ExitStack() as stack:
        functions = stack.enter_context(legacy_graph.collect_functions())
        plan.post_process.append(lambda program: legacy_graph.add_functions(program.model, functions))
        # opened even when no such Function is loaded yet: a forward may import one
        fn_session = stack.enter_context(autograd_functions.session(
            on_limit=state.on_limit,
            on_translated=lambda cls: state.note(
                "ONX302", f"{cls.__module__}.{cls.__qualname__}", fn_session.describe(cls)),
            opset=opset, domain_version=_domain_version(req), source_opset=target_opset(req),
        ))
        plan.translation_table.update(fn_session.translation_table)
        try:
            yield plan
            if state.limit is not None:
                # torch fell back to strict capture, which traces through the Function: the
                # export "worked" without the custom node, so it must not count as a success
                raise _not_applied(state.limit)
            if fn_session.bypassed():
                bypassed = fn_session.bypassed()
                names = ", ".join(legacy_graph.qualname(autograd_functions._symbolic_of(c)) for c in bypassed)
                raise SymbolicNotApplied(ROUTE, "autograd.Function symbolic bypassed", RuntimeError(
                    f"{names}: torch.export traced through the Function, so its symbolic's custom "
                    "node would be missing from the model"), symbolic=names,
                    construct="a Function.apply call torch.export traced through")
        except RouteFailed:
            raise
        except Exception as exc:
            if state.limit is not None and exc is not state.limit:
                raise _not_applied(state.limit) from exc
            if isinstance(exc, legacy_graph.LegacyOnly):
                raise _not_applied(exc) from exc
            raise


def _not_applied(limit: Any) -> SymbolicNotApplied:
    """The route failure for a symbolic that could not run (``LegacyOnly``), naming it."""
    return SymbolicNotApplied(ROUTE, limit.reason, limit, symbolic=getattr(limit, "symbolic", "?"),
                              construct=getattr(limit, "construct", ""))


def _check_registered_ops_applied(program: Any, registered: dict[str, Any], state: _State) -> None:
    """A registered op the captured program reaches but whose symbolic never ran: torch.export
    replaced it before translation (``Tensor.to`` becomes ``aten::_to_copy``; a composite
    ``torch.library`` op is decomposed), so its nodes would be missing. Seen through the
    graph's ``torch_fn`` (the user-level call) and ``original_aten`` (the op decomposed) metadata."""
    pending = {name: reg for name, reg in registered.items() if name not in state.ran}
    if not pending:
        return
    called: set[str] = set()  # full op names
    called_ops: set[str] = set()  # user-level calls (torch_fn names no namespace)
    for node in program.exported_program.graph.nodes:
        fn = node.meta.get("torch_fn")
        if fn and isinstance(fn[1], str):
            called_ops.add(fn[1].rsplit(".", 1)[-1])
        for target in (node.meta.get("original_aten"), node.target):
            schema = getattr(target, "_schema", None)
            if schema is not None:
                called.add(schema.name)
    missed = sorted(name for name, reg in pending.items() if name in called or reg.op in called_ops)
    if missed:
        symbolics = ", ".join(f"{legacy_graph_qualname(pending[n].fn)} (for {n})" for n in missed)
        raise SymbolicNotApplied(ROUTE, "registered symbolic not applied", RuntimeError(
            f"{symbolics}: the model calls the op, but torch.export replaces it before ONNX "
            "translation, so the registered symbolic's nodes would be missing"),
            symbolic=symbolics, construct="an op torch.export replaces before translation")


def legacy_graph_qualname(fn: Any) -> str:
    from . import legacy_graph

    return legacy_graph.qualname(fn)


def _check_none_outputs(program: Any) -> None:
    from . import legacy_graph

    try:
        legacy_graph.check_none_outputs(program.model)
    except RuntimeError as exc:
        raise RouteFailed(ROUTE, "legacy symbolic returned None for a used output", exc) from exc


def _set_custom_opsets(program: Any, req: ExportRequest) -> None:
    """``custom_opsets`` wins for every custom domain the graph imports."""
    imports = program.model.opset_imports
    for domain, version in (req.custom_opsets or {}).items():
        if domain in imports:
            imports[domain] = int(version)


def legacy_only_reasons(req: ExportRequest) -> list[tuple[str, str]]:
    """Limits detectable before export: none (they show only when a symbolic runs)."""
    return []
