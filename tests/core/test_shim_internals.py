"""Fails loudly when a torch upgrade moves a private piece the shim itself uses."""

from __future__ import annotations

import pytest
import torch

from compat.errors import TorchInternalsMoved
from compat.installed import torch_internals
from compat.routing import model_state


def test_every_shim_internal_is_where_we_expect():
    missing = torch_internals.check()
    assert missing == [], (
        f"torch {torch.__version__} moved {missing}: update compat/installed/torch_internals.py"
    )


def test_module_slots_are_the_live_dictionaries():
    m = torch.nn.Linear(2, 2)
    m.register_buffer("scratch", torch.zeros(1), persistent=False)
    params, buffers, non_persistent = torch_internals.module_slots(m)
    assert set(params) == {"weight", "bias"} and params["weight"] is m.weight
    assert set(buffers) == {"scratch"} and non_persistent == {"scratch"}
    del params["bias"]
    assert "bias" not in dict(m.named_parameters())  # live: the module sees the change


def test_snapshot_fails_loudly_when_a_slot_moved():
    class Odd(torch.nn.Module):
        pass

    m = Odd()
    del m.__dict__["_non_persistent_buffers_set"]  # what a torch that moved it would look like
    with pytest.raises(TorchInternalsMoved, match="_non_persistent_buffers_set"):
        with model_state.preserved(m, will_train=False):
            pass
