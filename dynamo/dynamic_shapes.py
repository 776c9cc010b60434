"""``dynamic_axes`` (TorchScript exporter) → ``dynamic_shapes`` (torch.export), with legacy meaning.

Legacy semantics kept here:

* keys name graph inputs (``input_names`` first, else a forward() parameter holding one tensor)
  or graph outputs (``output_names``); graph inputs are the tensor leaves of the call in forward()
  signature order (kwargs reordered, ``None`` and non-tensor values are not inputs);
* list-form axes get generated names ``{key}_dynamic_axes_{i}``;
* a key naming nothing is warned about and ignored;
* the ONNX graph's dims carry the user's names (one name on several axes = one ``dim_param``).

Every axis becomes a ``Dim.AUTO`` hint (torch infers the equalities the model needs) and the
exported graph's symbols are renamed afterwards. Example sizes of 1 on a dynamic axis are tiled to
2 before capture, because torch.export specialises 0/1 sizes and would silently bake them in; a
size-0 example is captured as it is, as plain torch captures it.

An axis the model itself fixes (channels a convolution's weights fix, image sizes a position table
fixes) was only labelled symbolic by the TorchScript exporter; torch's own ``Dim.DYNAMIC`` (AUTO plus
an error when tracing infers a constant) makes the whole export fail. Here it is exported static at
the size the model fixes, and said so (``ShapePlan.notes``, a ``LegacyExportWarning``). Every other
marked axis must come out symbolic: one that torch.export kept dynamic but the ONNX graph has static
still fails the route.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from compat.errors import CompatTypeError, CompatValueError, RouteFailed
from compat.request import ExportRequest
from compat.request.binding import Param, call_of

from . import torch_internals

#: the size a size-1 example is tiled to before capture
CAPTURE_SIZE = 2


class DynamicAxesWarning(UserWarning):
    """A ``dynamic_axes`` entry the legacy exporter only warned about."""


@dataclass(frozen=True)
class Axis:
    """One user-named dynamic axis of a graph input (``leaf`` = its position among tensor inputs)."""

    key: str
    leaf: int
    axis: int
    name: str


@dataclass
class ShapePlan:
    """The torch.export call (args/kwargs in signature order, ``dynamic_shapes``) and the renames
    to apply to the ONNX graph afterwards."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    dynamic_shapes: dict[str, Any] | None
    input_axes: list[Axis] = field(default_factory=list)
    output_axes: dict[str, dict[int, str]] = field(default_factory=dict)
    unmatched: list[str] = field(default_factory=list)
    enlarged: list[str] = field(default_factory=list)
    leaf_names: list[str] = field(default_factory=list)
    #: ``(leaf, axis) -> size`` of marked axes the model fixes (found after capture): exported static
    fixed: dict[tuple[int, int], int] = field(default_factory=dict)
    #: one line per fixed axis, for the ledger's translations
    notes: list[str] = field(default_factory=list)
    #: called with each note as it is found (the route records it as a Translation)
    on_note: Callable[[str], None] | None = None

    def rename(self, program: Any) -> None:
        """Post-process: keep the axes the model fixes static (noted and warned), give the other
        dims the user's names; fail if any other axis went static."""
        self.fixed = fixed_by_model(getattr(program, "exported_program", None), self)
        for ax in self.input_axes:
            size = self.fixed.get((ax.leaf, ax.axis))
            if size is None:
                continue
            who = self.leaf_names[ax.leaf] or ax.key
            note = f"axis {who}[{ax.axis}] ({ax.name!r}) is fixed by the model at {size}; exported static"
            self.notes.append(note)
            if self.on_note is not None:
                self.on_note(note)
        if self.notes:
            _warn_at_call_site(_legacy_warning("; ".join(self.notes)))
        rename_graph(program.model, self)


def export_inputs(req: ExportRequest) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    """``(args, kwargs)`` for ``torch.onnx.export(dynamo=True)``: a legacy-form call in forward()
    signature order (``legacy_interface``), as the TorchScript exporter flattened it; else the
    call as given, except that a dict as the last positional input (without keyword inputs) goes
    by its parameter's name, since torch.onnx.export reads a trailing dict in ``args`` as keyword
    inputs."""
    from .legacy_interface import in_signature_order

    if in_signature_order(req):
        return call_of(list(req.params or ()))
    args, kwargs = tuple(req.args), req.kwargs
    if kwargs or not args or not isinstance(args[-1], dict):
        return args, kwargs
    last = len(args) - 1
    params = req.params or ()
    if last < len(params) and params[last].kind == "pos":
        return args[:-1], {params[last].name: args[-1]}
    return (*args, {}), None  # into *args: only torch's empty-dict marker keeps it positional


def translate(req: ExportRequest) -> ShapePlan:
    """Validate ``req.dynamic_axes`` against the bound call and build the torch.export call;
    raises ``CompatError`` early."""
    if req.params is None:
        raise CompatTypeError(req.unbound or "the call does not bind to forward()")
    params = list(req.params)
    dynamic_axes = req.dynamic_axes
    leaves, leaf_owner = _tensor_leaves(params)
    input_names = list(req.input_names or ())
    output_names = list(req.output_names or ())
    legacy_names = _legacy_tensor_names(req)
    leaf_names = [
        (legacy_names[i] if legacy_names is not None else input_names[i] if i < len(input_names) else None)
        or _default_name(params[leaf_owner[i]])
        for i in range(len(leaves))
    ]
    plan = ShapePlan(*call_of(params), dynamic_shapes=None, leaf_names=leaf_names)
    if dynamic_axes is None:
        return plan
    if not isinstance(dynamic_axes, Mapping):
        raise CompatTypeError(
            f"dynamic_axes must be a dict of input/output name -> axes, got {type(dynamic_axes).__name__}"
        )
    by_name = {n: i for i, n in enumerate(leaf_names) if n is not None}
    for key, spec in dynamic_axes.items():
        if not isinstance(key, str):
            raise CompatTypeError(f"dynamic_axes key {key!r} must be an input or output name (str)")
        axes = _axes_dict(key, spec)
        if key in by_name:
            leaf = by_name[key]
            rank = leaves[leaf].dim()
            seen: dict[int, int] = {}
            for axis, name in axes.items():
                norm = axis + rank if axis < 0 else axis
                if not 0 <= norm < rank:
                    raise CompatValueError(
                        f"dynamic_axes[{key!r}]: axis {axis} is out of range for input {key!r} of rank {rank}"
                    )
                if norm in seen:
                    raise CompatValueError(f"dynamic_axes[{key!r}]: axes {seen[norm]} and {axis} are the same axis")
                seen[norm] = axis
                plan.input_axes.append(Axis(key, leaf, norm, name))
        elif key in output_names:
            plan.output_axes[key] = axes
        else:
            plan.unmatched.append(key)
            _warn_at_call_site(DynamicAxesWarning(
                f"dynamic_axes key {key!r} names no graph input or output "
                f"(inputs: {[n for n in leaf_names if n]}, outputs: {output_names}); it is ignored, "
                "as the TorchScript exporter did"
            ))
    if not plan.input_axes:
        plan.dynamic_shapes = dynamic_ints(req)
        return plan
    leaves = _enlarge_small_examples(plan, leaves)
    params, plan.dynamic_shapes = _rebuild(params, plan, leaves, dynamic_ints=_has_dynamic_ints(req))
    plan.args, plan.kwargs = call_of(params)
    return plan


def _has_dynamic_ints(req: ExportRequest) -> bool:
    from .legacy_interface import int_leaves

    return bool(int_leaves(req))


def dynamic_ints(req: ExportRequest) -> dict[str, Any] | None:
    """``dynamic_shapes`` that make the Python int leaves of a legacy-form call dynamic ints
    (everything else static), or None when it has none."""
    if not _has_dynamic_ints(req):
        return None
    params = list(req.params or ())
    _, shapes = _rebuild(params, ShapePlan((), {}, None), [leaf for leaf in _tensor_leaves(params)[0]],
                         dynamic_ints=True)
    return shapes


def _legacy_tensor_names(req: ExportRequest) -> list[str | None] | None:
    """``input_names`` of each tensor leaf counted as the TorchScript exporter counted them (its
    Python scalar inputs take names too), for a legacy-form call; None: torch's counting."""
    from compat.request.graph_inputs import legacy_inputs

    from .legacy_interface import in_signature_order

    if not in_signature_order(req) or not req.input_names:
        return None
    return [li.name for li in legacy_inputs(req) if li.kind == "tensor"]


def _warn_at_call_site(warning: Warning) -> None:
    """Warn at the user's export call (not this module), so the default filter shows a warning
    once per call site and not on every call."""
    from compat.policy import notices

    notices.emit(warning, notices.find_call_site())


def _legacy_warning(note: str) -> Warning:
    from compat.policy import notices

    return notices.make_warning("ONX101", note, notices.find_call_site().filename)


def _axes_dict(key: str, spec: Any) -> dict[int, str]:
    """``{axis: name}`` from the dict or list form (list form: legacy generated names)."""
    if isinstance(spec, Mapping):
        items = list(spec.items())
    elif isinstance(spec, (list, tuple)):
        items = [(a, f"{key}_dynamic_axes_{i + 1}") for i, a in enumerate(spec)]
    else:
        raise CompatTypeError(
            f"dynamic_axes[{key!r}] must be a dict {{axis: name}} or a list of axes, got {type(spec).__name__}"
        )
    out: dict[int, str] = {}
    for axis, name in items:
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise CompatTypeError(f"dynamic_axes[{key!r}]: axis {axis!r} must be an int")
        if not isinstance(name, str) or not name:
            raise CompatTypeError(f"dynamic_axes[{key!r}][{axis}]: the axis name must be a non-empty str, got {name!r}")
        out[axis] = name
    return out


def _tensor_leaves(params: list[Param]) -> tuple[list[torch.Tensor], list[int]]:
    """Tensor leaves in graph-input order and, for each, the index of its parameter."""
    leaves: list[torch.Tensor] = []
    owner: list[int] = []
    for i, p in enumerate(params):
        for leaf in torch_internals.tree_leaves(p.value):
            if isinstance(leaf, torch.Tensor):
                leaves.append(leaf)
                owner.append(i)
    return leaves, owner


def _default_name(param: Param) -> str | None:
    """A parameter holding exactly one tensor is named after the parameter (as in legacy graphs)."""
    return param.name if param.kind in ("pos", "kw") and isinstance(param.value, torch.Tensor) else None


def _enlarge_small_examples(plan: ShapePlan, leaves: list[torch.Tensor]) -> list[torch.Tensor]:
    """Tile size-1 examples on dynamic axes to ``CAPTURE_SIZE`` (all axes sharing the name
    together). A size-0 example cannot be tiled and is captured as it is, as plain torch does (its
    capture treats 0 like any size); an axis that still comes out static fails in ``rename_graph``."""
    leaves = list(leaves)
    small = {ax.name for ax in plan.input_axes if leaves[ax.leaf].shape[ax.axis] == 1}
    for ax in plan.input_axes:
        if ax.name in small and leaves[ax.leaf].shape[ax.axis] == 1:
            t = leaves[ax.leaf]
            leaves[ax.leaf] = torch.cat([t] * CAPTURE_SIZE, dim=ax.axis)
            plan.enlarged.append(f"{ax.key}[{ax.axis}] ({ax.name})")
    return leaves


def _rebuild(params: list[Param], plan: ShapePlan, leaves: list[torch.Tensor],
             dynamic_ints: bool = False) -> tuple[list[Param], dict[str, Any]]:
    """Params with the (possibly tiled) leaves put back, and dynamic_shapes keyed like
    ``torch.export`` binds them (parameter name -> structure of the value); with
    ``dynamic_ints``, Python int leaves are dynamic ints (``Dim.AUTO``)."""
    dims: dict[int, dict[int, Any]] = {}
    for ax in plan.input_axes:
        # AUTO, not DYNAMIC: an axis the model fixes is then exported static (and reported by
        # ShapePlan.rename) instead of failing the whole capture
        dims.setdefault(ax.leaf, {})[ax.axis] = torch.export.Dim.AUTO
    counter = iter(range(len(leaves)))
    new_params: list[Param] = []
    shapes: dict[str, Any] = {}
    for p in params:
        flat, spec = torch_internals.tree_flatten(p.value)
        new_flat, shape_flat = [], []
        for leaf in flat:
            if isinstance(leaf, torch.Tensor):
                i = next(counter)
                new_flat.append(leaves[i])
                shape_flat.append(dims.get(i))
            else:
                new_flat.append(leaf)
                is_int = dynamic_ints and isinstance(leaf, int) and not isinstance(leaf, bool)
                shape_flat.append(torch.export.Dim.AUTO if is_int else None)
        new_params.append(Param(p.name, p.kind, torch_internals.tree_unflatten(new_flat, spec)))
        shapes[p.name] = torch_internals.tree_unflatten(shape_flat, spec)
    return new_params, shapes


# --- after export -------------------------------------------------------------------------------


def fixed_by_model(exported: Any, plan: ShapePlan) -> dict[tuple[int, int], int]:
    """``(leaf, axis) -> size`` for the marked axes torch.export captured as constants.

    Read from the ExportedProgram's user-input placeholders, which are the call's tensor leaves in
    order; if they do not line up with the plan's (an unexpected program), nothing counts as fixed
    and the post-check treats every static axis as a failure, as before."""
    if exported is None or not plan.input_axes:
        return {}
    from torch.export.graph_signature import InputKind, TensorArgument

    placeholders = {n.name: n for n in exported.graph.nodes if n.op == "placeholder"}
    shapes = []
    for spec in exported.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT and isinstance(spec.arg, TensorArgument):
            val = placeholders[spec.arg.name].meta.get("val")
            shapes.append(getattr(val, "shape", None))
    leaves = [t for t in torch_internals.tree_leaves((plan.args, plan.kwargs)) if isinstance(t, torch.Tensor)]
    if len(shapes) != len(leaves) or any(
        s is None or len(s) != t.dim() for s, t in zip(shapes, leaves)
    ):
        return {}
    fixed: dict[tuple[int, int], int] = {}
    for ax in plan.input_axes:
        dim = shapes[ax.leaf][ax.axis]
        if not isinstance(dim, torch.SymInt):
            fixed[(ax.leaf, ax.axis)] = int(dim)
            continue
        expr = torch_internals.symint_expr(dim)
        if expr.is_number:  # torch 2.9 keeps a specialized axis as a SymInt of a constant
            fixed[(ax.leaf, ax.axis)] = int(expr)
            continue
        # with deferred runtime asserts the symbol stays, its range pinned to one value
        value_range = exported.range_constraints.get(expr)
        if value_range is not None and value_range.is_singleton():
            fixed[(ax.leaf, ax.axis)] = int(value_range.lower)
    return fixed


_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def rename_graph(model: Any, plan: ShapePlan) -> None:
    """Name the dims of the exported ``onnx_ir.Model`` after the user's axes.

    Graph inputs and named outputs get the user's names per axis; every other value's symbolic
    dims are renamed symbol by symbol (expressions such as ``s0 + 1`` included). An axis in
    ``plan.fixed`` gets its size instead (its symbol, if torch kept one, becomes that number)."""
    import onnx_ir as ir

    graph = model.graph
    inputs = list(graph.inputs)
    by_name = {v.name: v for v in inputs}
    mapping: dict[str, str | int] = {}
    per_input: dict[int, dict[int, str | int]] = {}
    for ax in plan.input_axes:
        name = plan.leaf_names[ax.leaf]
        value = by_name.get(name) if name else None
        if value is None and ax.leaf < len(inputs) and len(inputs) == len(plan.leaf_names):
            value = inputs[ax.leaf]
        if value is None or value.shape is None:
            _warn_at_call_site(DynamicAxesWarning(f"dynamic_axes[{ax.key!r}]: input not found in the exported graph"))
            continue
        dim = value.shape[ax.axis]
        size = plan.fixed.get((ax.leaf, ax.axis))
        if size is not None:  # the model fixes it: static (noted in ShapePlan.rename)
            if isinstance(dim, ir.SymbolicDim) and dim.value is not None:
                mapping[dim.value] = size
            per_input.setdefault(inputs.index(value), {})[ax.axis] = size
            continue
        if not isinstance(dim, ir.SymbolicDim) or dim.value is None:
            raise RouteFailed(
                "dynamo",
                "dynamic axis specialised",
                CompatValueError(
                    f"dynamic_axes[{ax.key!r}]: torch.export made axis {ax.axis} ({ax.name!r}) of input "
                    f"{ax.key!r} static ({dim}); the model's code depends on that size. Use dynamo=False, "
                    "or rewrite the size-dependent code"
                ),
            )
        mapping.setdefault(dim.value, ax.name)
        per_input.setdefault(inputs.index(value), {})[ax.axis] = ax.name
    _rename_symbols(model, mapping)
    for idx, axes in per_input.items():
        _set_dims(inputs[idx], axes)
    outputs = {v.name: v for v in graph.outputs}
    for key, axes in plan.output_axes.items():
        value = outputs.get(key)
        if value is None:
            continue
        rank = len(value.shape) if value.shape is not None else None
        norm: dict[int, str] = {}
        for axis, name in axes.items():
            a = axis + rank if rank is not None and axis < 0 else axis
            if rank is not None and not 0 <= a < rank:
                raise CompatValueError(
                    f"dynamic_axes[{key!r}]: axis {axis} is out of range for output {key!r} of rank {rank}"
                )
            norm[a] = name
        _set_dims(value, norm)


def _set_dims(value: Any, axes: Mapping[int, str | int]) -> None:
    """Give ``value`` a name (symbolic) or a size (static) on each axis of ``axes``."""
    import onnx_ir as ir

    if value.shape is None:
        return
    dims = list(value.shape.dims)
    for axis, name in axes.items():
        dims[axis] = name if isinstance(name, int) else ir.SymbolicDim(name)
    value.shape = ir.Shape(dims)


def _rename_symbols(model: Any, mapping: Mapping[str, str | int]) -> None:
    """Rename symbols in every value's dims; a symbol mapped to an int becomes a static dim (and
    that number, inside an expression)."""
    import onnx_ir as ir

    if not mapping:
        return

    def sub(text: str) -> str:
        return _SYMBOL.sub(lambda m: str(mapping.get(m.group(0), m.group(0))), text)

    for value in _all_values(model):
        if value.shape is None:
            continue
        dims = list(value.shape.dims)
        changed = False
        for i, dim in enumerate(dims):
            if isinstance(dim, ir.SymbolicDim) and isinstance(dim.value, str):
                new = mapping.get(dim.value)
                if new is None:
                    new = sub(dim.value)
                if new != dim.value:
                    dims[i] = new if isinstance(new, int) else ir.SymbolicDim(new)
                    changed = True
        if changed:
            value.shape = ir.Shape(dims)


def _all_values(model: Any):
    import onnx_ir as ir

    graphs = [model.graph, *(f for f in model.functions.values())]
    for graph in graphs:
        yield from graph.inputs
        yield from graph.initializers.values()
        for node in ir.traversal.RecursiveGraphIterator(graph):
            yield from node.outputs
        yield from graph.outputs

