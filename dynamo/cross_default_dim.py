"""``torch.cross(x, y)`` without ``dim``: the first dimension of size 3, as torch computes it.

``aten::cross(Tensor self, Tensor other, int? dim=None)`` takes, when ``dim`` is None, the first
dimension of the broadcast shape whose size is 3 (the default torch has kept for compatibility,
and the TorchScript exporter exported). torchlib's translation defaults ``dim`` to -1, the last
dimension, so a call on ``(5, 3, 6)`` inputs splits the wrong axis into thirds and every value
differs. The translation here resolves the default the way torch does, from the static shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

OPTION = "torch.cross"


def translation_table() -> dict[Any, Callable[..., Any]]:
    return {torch.ops.aten.cross.default: _cross}


def default_dim(*shapes: Any) -> int:
    """The first dimension of the broadcast ``shapes`` whose size is 3 (static sizes only)."""
    rank = max(len(s) for s in shapes)
    for axis in range(rank):
        sizes = {_size(s, axis - rank + len(s)) for s in shapes if axis - rank + len(s) >= 0}
        sizes.discard(1)
        if sizes == {3}:
            return axis
    raise ValueError(f"torch.cross without dim: no dimension of size 3 in {[list(s) for s in shapes]}")


def _size(shape: Any, axis: int) -> int | None:
    dim = shape[axis]
    return dim if isinstance(dim, int) else None


def _cross(self: Any, other: Any, dim: int | None = None) -> Any:
    from onnxscript import opset18 as op

    if dim is None:
        dim = default_dim(self.shape, other.shape)
    a1, a2, a3 = op.Split(self, axis=dim, num_outputs=3)
    b1, b2, b3 = op.Split(other, axis=dim, num_outputs=3)
    c1 = op.Sub(op.Mul(a2, b3), op.Mul(a3, b2))
    c2 = op.Sub(op.Mul(a3, b1), op.Mul(a1, b3))
    c3 = op.Sub(op.Mul(a1, b2), op.Mul(a2, b1))
    return op.Concat(c1, c2, c3, axis=dim)


def record_uses(program: Any, record: Callable[[str, str, str], None]) -> None:
    """Post-process: record the translation when the program calls ``cross`` without ``dim``."""
    ep = getattr(program, "exported_program", None)
    if ep is None:
        return
    for node in ep.graph.nodes:
        default = len(node.args) < 3 and node.kwargs.get("dim") is None
        if node.op == "call_function" and node.target is torch.ops.aten.cross.default and default:
            record("ONX001", OPTION, "torch.cross without dim: the first dimension of size 3, as torch "
                   "and the TorchScript exporter take it (torch's ONNX translation took the last)")
            return
