"""Snapshot and restore what an export may change on the user's model."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def preserved(model: Any, will_train: bool = True) -> Iterator[None]:
    """Restore every submodule's training flag and every buffer's value, whatever happens.

    Buffers are copied (BatchNorm running statistics move on a train-mode forward) unless no
    forward can run in train mode: the whole model is in eval mode and ``will_train`` is False.
    Parameters are not copied, since no route writes to them.
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        yield
        return
    modules = list(model.modules())
    flags = [m.training for m in modules]
    may_change = will_train or any(flags)
    buffers = [(b, b._version, b.detach().clone()) for b in model.buffers()] if may_change else []
    try:
        yield
    finally:
        for m, flag in zip(modules, flags):
            m.training = flag
        with torch.no_grad():
            for live, version, saved in buffers:
                if live._version != version and live.shape == saved.shape:
                    live.copy_(saved)


@contextlib.contextmanager
def inputs_preserved(args: Any, kwargs: Any) -> Iterator[None]:
    """Undo the marks torch.export leaves on example inputs (``_dynamo_dynamic_indices`` and
    friends): a failed attempt would otherwise make the next export of the same tensor dynamic."""
    from .signature import flat_tensors

    tensors = flat_tensors((args, kwargs))
    saved = [(t, {k: v for k, v in vars(t).items() if k.startswith("_dynamo_")}) for t in tensors]
    try:
        yield
    finally:
        for t, marks in saved:
            for k in [k for k in vars(t) if k.startswith("_dynamo_") and k not in marks]:
                delattr(t, k)
            for k, v in marks.items():
                setattr(t, k, v)
