"""TorchScript-route tracer warnings are recorded whatever category torch emits them as."""

from __future__ import annotations

import warnings

import pytest
import torch

from compat.request import ExportRequest
from legacy import route

BAKED = ("Converting a tensor to a Python boolean might cause the trace to be incorrect. "
         "We can't record the data flow of Python values")


class Branches(torch.nn.Module):
    def forward(self, x):
        if x.sum() > -1e9:  # always taken: the trace bakes the branch in
            return x * 2
        return x


def _warns_as(category: type[Warning]) -> torch.nn.Module:
    class Warns(torch.nn.Module):
        def forward(self, x):
            warnings.warn(BAKED, category, stacklevel=1)
            return x + 1

    return Warns()


def _export(model: torch.nn.Module) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        return route.export(ExportRequest(model=model, args=(torch.randn(2, 3),))).tracer_warnings


def test_torchs_own_tracer_warning_is_recorded_at_the_model_line():
    (seen,) = [w for w in _export(Branches()) if w["category"] == "TracerWarning"]
    assert seen["file"] == __file__ and "trace to be incorrect" in seen["message"]
    assert seen["line"] == Branches.forward.__code__.co_firstlineno + 1


@pytest.mark.parametrize("category", [DeprecationWarning, FutureWarning, torch.jit.TracerWarning])
def test_tracer_text_is_recorded_in_every_category(category):
    (seen,) = _export(_warns_as(category))
    assert seen["category"] == category.__name__ and seen["message"] == BAKED


def test_deprecation_notices_are_not_tracer_warnings():
    """torch's "the TorchScript exporter / torch.jit.trace is deprecated" notices (DeprecationWarning
    before torch 2.14, FutureWarning since) say nothing about the model's trace."""
    recorded = _export(Branches())
    assert all(w["category"] == "TracerWarning" for w in recorded), recorded
    for category in (DeprecationWarning, FutureWarning):
        notice = warnings.WarningMessage(
            "`torch.jit.trace` is deprecated. Please switch to `torch.compile` or `torch.export`.",
            category, "torch/jit/_trace.py", 1006)
        assert not route.is_tracer_warning(notice)
