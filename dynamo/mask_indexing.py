"""Boolean-mask indexing of two or more dimensions under ``torch.export.draft_export``.

torch 2.13 / 2.14's draft_export cannot capture ``x[mask]`` with a mask of two or more
dimensions (Piper's VITS: ``inputs[inside_interval_mask]``): real-value propagation decides a
guard on the count of selected elements, then ``PendingUnbackedSymbolNotFound`` ends the capture
(docs/upstream/draft-export-bool-mask-index.md). A one-dimensional mask captures, with the count
left dynamic. ``flat_masks()`` makes the draft capture index such a mask the one-dimensional way,
``x.flatten(0, k - 1)[mask.flatten()]``: the same elements in the same (row-major) order, so the
same values and shape as eager for every input. Only ``Tensor.__getitem__`` with one boolean
tensor covering the leading dimensions (``x[mask]``, ``x[mask, :]``, ``x[mask, ...]``) is
rewritten; everything else, assignments included (they capture), runs as written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import torch_internals


@contextmanager
def flat_masks() -> Iterator[None]:
    """Inside, ``x[mask]`` with a k-dimensional boolean ``mask`` (k >= 2, ``mask.shape ==
    x.shape[:k]``) is computed as ``x.flatten(0, k - 1)[mask.flatten()]``.

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

        class FlatMasks(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                                   kwargs: dict[str, Any] | None = None) -> Any:
                if func is torch.Tensor.__getitem__ and len(args) == 2 and not kwargs:
                    flat = _flat_index(*args)
                    if flat is not None:
                        return func(*flat)
                return func(*args, **(kwargs or {}))

        _MODE = FlatMasks
    return _MODE
