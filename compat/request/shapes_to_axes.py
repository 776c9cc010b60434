"""``dynamic_shapes`` for the TorchScript exporter, which only takes ``dynamic_axes``.

When the auto route falls back (or compare exports both routes), a call written for the new
exporter still means "these axes are dynamic": the spec becomes ``dynamic_axes`` keyed by graph
input names (the caller's ``input_names``, else forward()'s parameter names), Dim names kept.
"""

from __future__ import annotations

from compat.errors import RouteFailed
from compat.request import ExportRequest, Translation


def for_torchscript(req: ExportRequest) -> tuple[ExportRequest, Translation | None]:
    """``req`` with ``dynamic_shapes`` turned into ``dynamic_axes`` (unchanged without it)."""
    if req.dynamic_shapes is None:
        return req, None
    try:
        layout = req.layout
    except Exception as exc:
        raise RouteFailed("legacy", "dynamic_shapes not convertible to dynamic_axes", exc) from exc
    tensor_ix = layout.tensor_indices()
    names = list(req.input_names or ())
    for n, i in enumerate(tensor_ix[len(names):], start=len(names)):
        names.append(layout.names[i] or f"input_{n}")
    by_leaf = dict(zip(tensor_ix, names))
    axes = {by_leaf[i]: dict(sorted(ax.items())) for i, ax in layout.axes.items() if ax and i in by_leaf}
    if len(axes) != sum(1 for ax in layout.axes.values() if ax):
        raise RouteFailed("legacy", "dynamic_shapes not convertible to dynamic_axes")
    converted = req.replace(dynamic_shapes=None, dynamic_axes=axes or None, input_names=tuple(names))
    return converted, Translation(
        "ONX101", "dynamic_shapes", f"converted to dynamic_axes {axes} for the TorchScript exporter")
