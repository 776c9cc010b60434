"""Give a call in the legacy form the graph inputs the TorchScript exporter gave it.

* The call goes to torch.export in forward() signature order (``call_of`` of the bound call), as
  the TorchScript exporter flattened it; keyword inputs given in another order are no longer
  reordered by the way they were written.
* A Python int leaf is a dynamic int (``Dim.AUTO``): the TorchScript exporter kept it as an int64
  scalar input, torch.export would bake its example value in. torch.export still specialises an
  int the model branches on (and 0/1), as the tracer baked such a branch.
* ``input_names`` name the inputs in the TorchScript exporter's order, which also counts the
  Python scalars it made inputs (``graph_inputs.legacy_inputs``), rather than torch's.
* A Python int torch.export specialised at its example value (an op's size, as
  ``hann_window(n)`` beside a static input) stays a graph input, unused: the TorchScript
  exporter kept it, the caller feeds it.
* Graph inputs the graph does not use are dropped, as the TorchScript exporter dropped them (a
  tensor used only for its static shape, the input of a ``zero_()``/``fill_()`` model, an unused
  ``position_bias``); recorded as a translation.

A call that chose the new exporter (``dynamo=True`` or ``dynamic_shapes``) keeps torch's own
interface. ``Interface.post_process`` also works out which leaf of the call each graph input of
the result takes (``input_leaves``), which the acceptance check feeds by.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compat.request import ExportRequest
from compat.request.graph_inputs import exported_leaves, legacy_form, legacy_inputs
from compat.request.layout import scalar_kind

#: the translation record's code and option (no catalog entry of its own: the exporter change)
CODE, OPTION = "ONX001", "args"


@dataclass
class Interface:
    """What the route does to the call's interface; ``input_leaves`` is set after export."""

    req: ExportRequest
    legacy: bool
    record: Callable[[str, str, str], None]
    input_leaves: list[int] | None = None
    dropped: list[str] = field(default_factory=list)

    def post_process(self, program: Any) -> None:
        """Name the inputs and drop the unused ones (legacy form); map inputs to call leaves."""
        from torch.export.graph_signature import ConstantArgument, InputKind

        ep = getattr(program, "exported_program", None)
        mapping = exported_leaves(self.req, ep) if ep is not None else None
        if mapping is None:
            if self.legacy:  # cannot tell the inputs apart: name them in order, as torch does
                for value, name in zip(program.model.graph.inputs, self.req.input_names or ()):
                    value.name = name
            return
        user = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
        leaves = [leaf for leaf, spec in zip(mapping, user) if not isinstance(spec.arg, ConstantArgument)]
        graph = program.model.graph
        inputs = list(graph.inputs)[: len(leaves)]
        if len(inputs) != len(leaves):
            return
        if self.legacy:
            names = {li.leaf: li.name for li in legacy_inputs(self.req) if li.name}
            for value, leaf in zip(inputs, leaves):
                if leaf in names:
                    value.name = names[leaf]
            specialised = _specialised_ints(self.req, ep, user, mapping)
            kept = [(v, leaf) for v, leaf in zip(inputs, leaves)
                    if v.uses() or v.is_graph_output() or leaf in specialised]
            unused = [v for v, leaf in zip(inputs, leaves)
                      if not (v.uses() or v.is_graph_output() or leaf in specialised)]
            if any(leaf in specialised for _, leaf in kept):
                names_kept = [v.name for v, leaf in kept if leaf in specialised and not v.uses()]
                if names_kept:
                    self.record(CODE, OPTION, f"Python int inputs {names_kept} kept as graph inputs: torch.export "
                                "specialised them at their example values (an op's size), the TorchScript "
                                "exporter kept them as inputs")
            if unused:
                for value in unused:
                    graph.inputs.remove(value)
                self.dropped = [v.name for v in unused]
                self.record(CODE, OPTION, f"graph inputs the graph does not use dropped, as the TorchScript "
                            f"exporter dropped them: {self.dropped}")
            leaves = [leaf for _, leaf in kept]
        self.input_leaves = leaves


def _specialised_ints(req: ExportRequest, ep: Any, user: list[Any], mapping: list[int]) -> set[int]:
    """Leaves of Python int inputs the TorchScript exporter kept (an op read them) that torch.export
    specialised to their example value (its placeholder holds a plain int, or a symbol whose range
    is that one value): unused in the graph, but no unused input the tracer would have dropped."""
    ints = set(int_leaves(req))
    if not ints:
        return set()
    nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    out: set[int] = set()
    for leaf, spec in zip(mapping, user):
        node = nodes.get(getattr(spec.arg, "name", None))
        value = node.meta.get("val") if node is not None else None
        if leaf in ints and (isinstance(value, int) and not isinstance(value, bool)
                             or _single_valued(ep, value)):
            out.add(leaf)
    return out


def _single_valued(ep: Any, value: Any) -> bool:
    expr = getattr(getattr(value, "node", None), "expr", None)
    if getattr(expr, "is_number", False):  # torch 2.9: the SymInt is its value, no range kept
        return True
    bounds = ep.range_constraints.get(expr) if expr is not None else None
    return bounds is not None and bounds.lower == bounds.upper


def plan(req: ExportRequest, record: Callable[[str, str, str], None]) -> Interface:
    return Interface(req, legacy=in_signature_order(req), record=record)


def in_signature_order(req: ExportRequest) -> bool:
    """Whether the route gives ``req`` the TorchScript exporter's interface: a legacy-form call
    of an ``nn.Module`` (or function) that binds to its forward()."""
    return legacy_form(req) and req.params is not None and not _exported(req)


def int_leaves(req: ExportRequest) -> list[int]:
    """Indices (in ``req.layout.leaves``) of the Python int leaves the TorchScript exporter made
    graph inputs: made dynamic ints for a legacy-form call."""
    if not in_signature_order(req):
        return []
    from . import torch_internals

    # read from the bound call, not req.layout: dynamic_axes is not validated yet
    leaves = [leaf for p in req.params or () for leaf in torch_internals.tree_leaves(p.value)]
    return [i for i, leaf in enumerate(leaves) if scalar_kind(leaf) == "int"]


def _exported(req: ExportRequest) -> bool:
    import torch

    return isinstance(req.model, torch.export.ExportedProgram)
