"""The inputs of one export call as the graph sees them: leaves in forward() order, their names,
their dynamic axes, and inputs regenerated at other sizes along those axes.

Read from the call ``normalize`` bound (``ExportRequest.params``), never bound again; used by
``compat.request.shapes_to_axes`` (``dynamic_shapes`` as ``dynamic_axes`` for the TorchScript
route), ``compat.tools.parity`` (probing other sizes) and ``compat.routing.route_memory`` (keys
that wildcard dynamic axes). Imports torch on use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from compat.request import ExportRequest
from compat.request.binding import Param, call_of


@dataclass
class InputLayout:
    """The call's leaves in graph-input order, their names (``input_names`` count the Python
    scalars the TorchScript exporter made inputs, see ``graph_inputs``), dynamic axes
    ``{leaf: {axis: name}}`` and how to rebuild ``(args, kwargs)`` from replaced leaves."""

    leaves: list[Any]
    names: list[str | None]
    axes: dict[int, dict[int, str]]
    rebuild: Callable[[list[Any]], tuple[tuple[Any, ...], dict[str, Any]]]

    def tensor_indices(self) -> list[int]:
        return [i for i, x in enumerate(self.leaves) if _is_tensor(x)]

    def axis_sizes(self) -> dict[str, int]:
        """Example size of each named dynamic axis."""
        out: dict[str, int] = {}
        for i, axes in self.axes.items():
            for axis, name in axes.items():
                out.setdefault(name, int(self.leaves[i].shape[axis]))
        return out


def scalar_kind(value: Any) -> str | None:
    """int, float or bool for a Python scalar leaf (a graph input of the TorchScript exporter),
    else None."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return None


def _is_tensor(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def input_layout(req: ExportRequest) -> InputLayout:
    """Leaves of ``req``'s bound call in forward() signature order (the legacy graph-input
    order); ``req.layout`` caches it."""
    from compat.installed import torch_internals

    params = list(req.params) if req.params is not None else _unbound_params(req)
    flat: list[tuple[list[Any], Any]] = [torch_internals.tree_flatten(p.value) for p in params]
    leaves: list[Any] = [x for values, _ in flat for x in values]
    owners = [i for i, (values, _) in enumerate(flat) for _ in values]

    # graph inputs as the TorchScript exporter counted them: tensors and Python scalars
    input_ix = [i for i, x in enumerate(leaves) if _is_tensor(x) or scalar_kind(x) is not None]
    names: list[str | None] = [None] * len(leaves)
    given = list(req.input_names or ())
    for n, i in enumerate(input_ix):
        p = params[owners[i]]
        if n < len(given):
            names[i] = given[n]
        elif p.kind in ("pos", "kw") and p.value is leaves[i]:
            names[i] = p.name

    axes: dict[int, dict[int, str]] = {}
    if req.dynamic_axes:
        by_name = {nm: i for i, nm in enumerate(names) if nm is not None}
        for key, spec in req.dynamic_axes.items():
            i = by_name.get(key)
            if i is None:
                continue
            rank = leaves[i].dim()
            items = spec.items() if isinstance(spec, Mapping) else (
                (a, f"{key}_dynamic_axes_{n + 1}") for n, a in enumerate(spec))
            for a, nm in items:
                axes.setdefault(i, {})[a + rank if a < 0 else a] = str(nm)
    elif req.dynamic_shapes is not None:
        axes = _axes_from_dynamic_shapes(req.dynamic_shapes, params, flat)

    def rebuild(new_leaves: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        it = iter(new_leaves)
        new_params = []
        for p, (values, spec) in zip(params, flat):
            value = torch_internals.tree_unflatten([next(it) for _ in values], spec)
            new_params.append(Param(p.name, p.kind, value))
        return call_of(new_params)

    return InputLayout(leaves, names, axes, rebuild)


def _unbound_params(req: ExportRequest) -> list[Param]:
    """A call forward() cannot take, in the order given, without names."""
    params = [Param(f"arg{i}", "pos", a) for i, a in enumerate(req.args)]
    return params + [Param(k, "kw", v) for k, v in (req.kwargs or {}).items()]


def _axes_from_dynamic_shapes(dynamic_shapes: Any, params: list[Any], flat: list[Any]) -> dict[int, dict[int, str]]:
    """``{leaf: {axis: name}}`` from a ``dynamic_shapes`` spec (dict by parameter name, or by position)."""
    axes: dict[int, dict[int, str]] = {}
    base = 0
    for n, (p, (values, _)) in enumerate(zip(params, flat)):
        if isinstance(dynamic_shapes, Mapping):
            spec = dynamic_shapes.get(p.name)
        elif isinstance(dynamic_shapes, (list, tuple)) and n < len(dynamic_shapes):
            spec = dynamic_shapes[n]
        else:
            spec = None
        found: list[dict[int, str]] = []
        if spec is not None and _match_spec(p.value, spec, p.name, found):
            for k, ax in enumerate(found):
                if ax:
                    axes[base + k] = ax
        base += len(values)
    return axes


def _match_spec(value: Any, spec: Any, path: str, out: list[dict[int, str]]) -> bool:
    """Walk ``value`` and ``spec`` together in pytree leaf order; one ``{axis: name}`` per leaf."""
    if _is_tensor(value):
        if spec is None:
            items: list[tuple[int, Any]] = []
        elif isinstance(spec, Mapping):
            items = list(spec.items())
        elif isinstance(spec, (list, tuple)):
            items = list(enumerate(spec))
        else:
            return False
        out.append({
            a + value.dim() if a < 0 else a: _dim_name(d, f"{path}.{a}")
            for a, d in items if d is not None and not _is_static(d)
        })
        return True
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)) and len(value) == len(spec):
        return all(_match_spec(v, s, f"{path}.{i}", out) for i, (v, s) in enumerate(zip(value, spec)))
    if isinstance(value, Mapping) and isinstance(spec, Mapping):
        return all(_match_spec(v, spec.get(k), f"{path}.{k}", out) for k, v in value.items())
    if not isinstance(value, (list, tuple, Mapping)):
        out.append({})
        return True
    return False


def _is_static(dim: Any) -> bool:
    return isinstance(dim, int) or getattr(dim, "name", None) == "STATIC"


def _dim_name(dim: Any, fallback: str) -> str:
    name = getattr(dim, "__name__", None)
    return name if isinstance(name, str) and name else fallback


def default_probes(sizes: Mapping[str, int]) -> list[dict[str, int]]:
    """Each named axis alone at example+1, then (with several axes) all at example+2."""
    probes = [{name: s + 1} for name, s in sizes.items()]
    if len(sizes) > 1:
        probes.append({name: s + 2 for name, s in sizes.items()})
    return probes


def joint_probe(sizes: Mapping[str, int]) -> list[dict[str, int]]:
    """One probe with every named axis at example+1 (none without dynamic axes): each axis at
    another size in a single run, what the acceptance check pays for."""
    return [{name: s + 1 for name, s in sizes.items()}] if sizes else []


def skewed_probe(sizes: Mapping[str, int]) -> list[dict[str, int]]:
    """One probe far from the example and off its proportions: the named axes of size 4 or more
    alternately at half and at three quarters of their example size. Where a graph baked a count
    that follows the input's size (detections kept, lengths) or a size computed from the axes'
    ratio (an aspect-keeping resize, torchvision's detection transform), this gives another one;
    a probe that scales every axis alike would not."""
    eligible = [name for name, s in sizes.items() if s >= 4]
    skewed = {name: sizes[name] * (2 if k % 2 == 0 else 3) // 4 for k, name in enumerate(eligible)}
    return [skewed] if skewed else []


def resized_leaves(layout: InputLayout, sizes: Mapping[str, int], seed: int = 0) -> list[Any]:
    """The example leaves with the named axes resized: floats drawn like the example (its mean and
    std), integer/bool inputs (ids, masks) cycled from the example so their values stay valid."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    out = list(layout.leaves)
    for i, axes in layout.axes.items():
        t = layout.leaves[i].detach()  # an example with requires_grad=True: no autograd warning
        targets = {a: sizes[n] for a, n in axes.items() if n in sizes}
        if not targets:
            continue
        if t.is_floating_point() or t.is_complex():
            shape = [targets.get(a, d) for a, d in enumerate(t.shape)]
            real = t.real.float() if t.is_complex() else t.float()  # casting complex warns
            std = float(real.std()) if t.numel() > 1 else 1.0
            mean = float(real.mean()) if t.numel() else 0.0
            new = torch.randn(shape, generator=gen) * (std or 1.0) + mean
            out[i] = new.to(t.dtype)
        else:
            new = t
            for a, size in targets.items():
                index = torch.arange(size) % max(int(t.shape[a]), 1)
                new = new.index_select(a, index)
            out[i] = new.contiguous()
    return out


# --- the comparison -----------------------------------------------------------------------------
