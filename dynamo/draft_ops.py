"""Operations torch's ``draft_export`` cannot capture, computed the way it can while it runs.

torch 2.13-2.15's draft_export (real-value propagation) ends in ``PendingUnbackedSymbolNotFound``
where ``torch.export.export`` captures:

* boolean-mask indexing with a mask of two or more dimensions (Piper's VITS:
  ``inputs[inside_interval_mask]``; docs/upstream/draft-export-bool-mask-index.md). A
  one-dimensional mask captures, with the count left dynamic: ``x[mask]`` with a k-dimensional
  mask over ``x``'s leading dimensions is computed as ``x.flatten(0, k - 1)[mask.flatten()]``,
  the same elements in the same (row-major) order. Only ``x[mask]``, ``x[mask, :]`` and
  ``x[mask, ...]`` are rewritten; assignments capture as written.
* floor division of integer tensors of a data-dependent size (torchvision's FCOS and RetinaNet:
  ``torch.div(topk_idxs, num_classes, rounding_mode="floor")``;
  docs/upstream/draft-export-integer-floor-division.md). Truncating division and ``fmod``
  capture: ``floor(a / b) = trunc(a / b) - 1`` where the remainder is non-zero and its sign is
  not the divisor's, exact for every integer.

``draft_ops()`` is a TorchFunctionMode for the draft capture only; everything else runs as
written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import torch_internals


@contextmanager
def draft_ops() -> Iterator[None]:
    """Inside, multi-dimensional boolean-mask indexing and integer floor division are computed
    the way draft_export captures (see the module).

    A TorchFunctionMode, not an assignment to ``torch.Tensor.__getitem__``: CPython cannot put a
    type's C slots back as they were, and the TorchScript exporter then takes 0-d tensors for
    sequences ("len() of a 0-d tensor"). draft_export names a guard's place by the frames around
    the innermost one outside torch, which would be the mode's under every torch call; that frame
    is skipped there (``torch_internals.user_stack_skips``), so a guard names the model's line
    (the ledger's ``baked``)."""
    with torch_internals.user_stack_skips(__file__), _mode_class()():
        yield


def _flat_index(x: Any, index: Any) -> tuple[Any, Any] | None:
    """``(x.flatten(0, k - 1), mask.flatten())`` for ``x[index]`` with a boolean mask of k >= 2
    dimensions over ``x``'s leading dimensions; None for any other index (eager's own runs)."""
    import torch

    if isinstance(index, tuple) and index and all(_whole(i) for i in index[1:]):
        index = index[0]  # x[mask], x[mask, :], x[mask, ...]: the trailing dimensions kept whole
    if not (isinstance(x, torch.Tensor) and isinstance(index, torch.Tensor)
            and index.dtype == torch.bool and index.dim() >= 2 and x.dim() >= index.dim()
            and tuple(x.shape[: index.dim()]) == tuple(index.shape)):
        return None
    return x.flatten(0, index.dim() - 1), index.flatten()


def _whole(index: Any) -> bool:
    return index is Ellipsis or (isinstance(index, slice) and index == slice(None))


_MODE: type | None = None


def _mode_class() -> type:
    global _MODE
    if _MODE is None:
        import torch
        from torch.overrides import TorchFunctionMode

        floors = _floor_divisions(torch)

        class DraftOps(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                                   kwargs: dict[str, Any] | None = None) -> Any:
                kwargs = kwargs or {}
                if func is torch.Tensor.__getitem__ and len(args) == 2 and not kwargs:
                    flat = _flat_index(*args)
                    if flat is not None:
                        return func(*flat)
                elif (func in floors and len(args) == 2 and _floors(func, kwargs, torch)
                      and _integer(args[0], torch) and _integer(args[1], torch)):
                    return floor_divide(*args)
                return func(*args, **kwargs)

        _MODE = DraftOps
    return _MODE


def _floor_divisions(torch: Any) -> tuple[Any, ...]:
    return (torch.div, torch.Tensor.div, torch.floor_divide, torch.Tensor.floor_divide,
            torch.Tensor.__floordiv__)


def _floors(func: Any, kwargs: dict[str, Any], torch: Any) -> bool:
    if func in (torch.div, torch.Tensor.div):
        return set(kwargs) == {"rounding_mode"} and kwargs["rounding_mode"] == "floor"
    return not kwargs


def _integer(value: Any, torch: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return not value.is_floating_point() and not value.is_complex() and value.dtype != torch.bool
    return isinstance(value, int) and not isinstance(value, bool)


def floor_divide(a: Any, b: Any) -> Any:
    """``torch.div(a, b, rounding_mode="floor")`` for integer ``a`` (a tensor) and ``b``, from
    truncating division and ``fmod``."""
    import torch

    q = torch.div(a, b, rounding_mode="trunc")
    r = torch.fmod(a, b)
    return q - ((r != 0) & ((r < 0) != (b < 0))).to(q.dtype)
