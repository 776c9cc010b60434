"""The graph inputs of one export call: the list the TorchScript exporter gives it, decided from
the request alone, and which of the call's leaves each input of a torch.export program takes.

The TorchScript exporter flattened the call in forward() signature order (``InputLayout``
leaves) and made every tensor, int, float and bool leaf a graph input (the tracer handed forward
an int as an int64 scalar tensor, a float as a float64 one, a bool as a bool one); ``None`` and
other values are no input. ``input_names`` name those inputs in that order, then inputs the graph
does not use are dropped (names stay where they were). Imports torch on use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compat.request import ExportRequest
from compat.request.binding import bind
from compat.request.layout import scalar_kind

#: the dtype the TorchScript exporter gave a Python scalar leaf
SCALAR_DTYPES = {"int": "int64", "float": "float64", "bool": "bool"}


@dataclass(frozen=True)
class LegacyInput:
    """One graph input of the TorchScript exporter's model (before unused ones are dropped)."""

    leaf: int  # index in ``InputLayout.leaves``
    name: str | None  # from ``input_names``; None: the exporter generated one
    kind: str  # tensor, int, float or bool
    dtype: str  # torch's name without ``torch.``: float32, int64, ...
    rank: int
    label: str = ""  # the name, else forward()'s parameter name, else ``input N``

    def describe(self) -> str:
        """``'x' (float32, rank 2)``; ``'n' (int64 scalar, a Python int)``."""
        what = f"{self.dtype} scalar" if self.rank == 0 else f"{self.dtype}, rank {self.rank}"
        if self.kind != "tensor":
            what += f", a Python {self.kind}"
        return f"{self.label!r} ({what})"


def legacy_form(req: ExportRequest) -> bool:
    """Whether the call asks for the TorchScript exporter's interface: it neither chose the new
    exporter (``dynamo=True``) nor described its inputs the new way (``dynamic_shapes``)."""
    return req.dynamo is not True and req.dynamic_shapes is None


def legacy_inputs(req: ExportRequest) -> list[LegacyInput]:
    """The TorchScript exporter's graph inputs for ``req``, in order, before it drops unused ones."""
    import torch

    from compat.installed import torch_internals

    # the bound call flattened as InputLayout flattens it (not req.layout: this runs before
    # dynamic_axes is validated)
    leaves: list[Any] = []
    labels: list[str | None] = []
    for p in req.params or ():
        for leaf in torch_internals.tree_leaves(p.value):
            leaves.append(leaf)
            labels.append(p.name if p.kind in ("pos", "kw") and p.value is leaf else None)
    given = list(req.input_names or ())
    out: list[LegacyInput] = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor):
            kind, dtype, rank = "tensor", str(leaf.dtype).replace("torch.", ""), leaf.dim()
        elif (kind := scalar_kind(leaf)) is not None:
            dtype, rank = SCALAR_DTYPES[kind], 0
        else:
            continue
        n = len(out)
        name = given[n] if n < len(given) else None
        out.append(LegacyInput(i, name, kind, dtype, rank, name or labels[i] or f"input {n}"))
    return out


class _Slot:
    """Stands for one input of an exported program while its call is bound to forward()."""

    def __init__(self, index: int) -> None:
        self.index = index


def exported_leaves(req: ExportRequest, exported_program: Any) -> list[int] | None:
    """For each user input of ``exported_program`` in order, the index of the call's leaf
    (``req.layout.leaves``) it takes; None when its call does not bind to forward() as ``req``'s
    does (then the inputs cannot be told apart).

    The program's input spec is filled with placeholders, bound to forward() like the request's
    call, and flattened parameter by parameter as ``InputLayout`` flattens the request."""
    from compat.installed import torch_internals

    if req.params is None:
        return None
    spec = exported_program.call_spec.in_spec
    try:
        count = spec.num_leaves
        structure = torch_internals.tree_unflatten([_Slot(i) for i in range(count)], spec)
        args, kwargs = structure
        params = bind(req.model, tuple(args), dict(kwargs or {}))
    except Exception:  # noqa: BLE001 - a spec of another shape: cannot map
        return None
    found: list[int | None] = [None] * count
    position = 0
    for p in params:
        for leaf in torch_internals.tree_leaves(p.value):
            if isinstance(leaf, _Slot):
                found[leaf.index] = position
            position += 1
    if position != len(req.layout.leaves) or any(f is None for f in found):
        return None
    return [f for f in found if f is not None]
