"""The TorchScript exporter is called from ``compat.export``'s own frame (compat.routing.steps).

torch's tracer records the whole Python stack at every traced operation, so each shim frame
between the user's call and the exporter costs (``make bench``: bench_dispatch). The dispatcher
and the TorchScript route yield the exporter's call instead of making it; what they raise on a
failed trace is what they raised before, with no implicit context from the driver.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

import compat
from compat.errors import ExportFailed, RouteFailed
from compat.request import ExportRequest
from compat.routing.route_packages import route_module

ROOT = Path(__file__).resolve().parents[2]
OURS = tuple(str(ROOT / package) for package in ("compat", "legacy", "dynamo", "migration"))


class RecordsTheStack(torch.nn.Module):
    """Its forward (run by the tracer) notes the shim's frames on the stack."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.seen: list[list[str]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frame, ours = sys._getframe(), []
        while frame is not None:
            if frame.f_code.co_filename.startswith(OURS):
                ours.append(f"{Path(frame.f_code.co_filename).relative_to(ROOT)}:{frame.f_code.co_name}")
            frame = frame.f_back
        self.seen.append(ours)
        return torch.relu(self.fc(x))


def test_only_compat_export_is_on_the_stack_while_torch_traces(tmp_path):
    model, x, out = RecordsTheStack().eval(), torch.randn(4, 3), tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (x,), str(out), route="legacy", input_names=["x"])
    assert model.seen and all(seen == ["compat/api.py:export"] for seen in model.seen), model.seen
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], expected, rtol=1e-5, atol=1e-6)


class FailsInTheTrace(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise IndexError("the forward failed while traced")


def test_a_failed_trace_is_the_routes_failure_with_no_context_from_the_driver(tmp_path):
    out = tmp_path / "m.onnx"
    with warnings.catch_warnings(), pytest.raises(ExportFailed) as info:
        warnings.simplefilter("ignore")
        compat.export(FailsInTheTrace(), (torch.randn(2, 3),), str(out), route="legacy")
    failure = info.value.failures["legacy"]
    assert isinstance(failure, RouteFailed) and isinstance(failure.cause, IndexError)
    # raised after the routes, not while handling the trace's error: a traceback shows it alone
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert not out.exists()


def test_the_route_export_runs_its_steps_for_other_callers():
    """``legacy.export`` (tests, tools) drives the same steps ``compat.export`` drives inline."""
    model, x = RecordsTheStack().eval(), torch.randn(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = route_module("legacy").export(ExportRequest(model=model, args=(x,), input_names=("x",)))
    sess = ort.InferenceSession(outcome.model_bytes, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(RouteFailed) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        route_module("legacy").export(ExportRequest(model=FailsInTheTrace(), args=(torch.randn(2, 3),)))
    assert isinstance(info.value.cause, IndexError)
