"""``torch.cdist`` on the torch.export route: torch's ONNX registry has no translation of
``aten::_cdist_forward``, so the route failed and auto fell back to the TorchScript exporter,
whose ``p=1`` model is wrong (NaN and infinities where eager has distances). The translation
here computes the distances as torch defines them: the ``p``-norm of every row difference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch


def translation_table() -> dict[Any, Callable[..., Any]]:
    return {torch.ops.aten._cdist_forward.default: _cdist_forward}


def _cdist_forward(x1: Any, x2: Any, p: float, compute_mode: int | None = None) -> Any:
    """``(..., P, M)`` and ``(..., R, M)`` to ``(..., P, R)``: ``||x1[i] - x2[j]||_p``
    (``compute_mode`` picks torch's kernel, not the result)."""
    from onnxscript import opset18 as op

    del compute_mode
    diff = op.Abs(op.Sub(op.Unsqueeze(x1, op.Constant(value_ints=[-2])),
                         op.Unsqueeze(x2, op.Constant(value_ints=[-3]))))
    last = op.Constant(value_ints=[-1])
    if p == 0:  # how many coordinates differ
        zero = op.CastLike(op.Constant(value_float=0.0), diff)
        return op.ReduceSum(op.CastLike(op.Not(op.Equal(diff, zero)), diff), last, keepdims=0)
    if p == 1:
        return op.ReduceSum(diff, last, keepdims=0)
    if p == 2:
        return op.Sqrt(op.ReduceSumSquare(diff, last, keepdims=0))
    if math.isinf(p):
        return op.ReduceMax(diff, last, keepdims=0)
    power = op.CastLike(op.Constant(value_float=float(p)), diff)
    root = op.CastLike(op.Constant(value_float=1.0 / float(p)), diff)
    return op.Pow(op.ReduceSum(op.Pow(diff, power), last, keepdims=0), root)
