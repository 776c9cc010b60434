"""Flat memory: after ``compat.export`` returns (or raises), nothing the shim keeps refers to the
model, its ONNXProgram or a tensor. Each test exports fresh models in this one process, on every
route, drops the caller's references and checks with ``weakref`` that each one is collectable."""

from __future__ import annotations

import gc
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import compat
from compat import api
from compat.errors import OpsetNotReached
from compat.records.call_history import CallHistory
from compat.request import Outcome, Translation

N = 3


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 64), torch.nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class Branchy(torch.nn.Module):
    """A branch on a tensor value: the torch.export route's draft capture bakes it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return y * 2 if y.sum() > 0 else y - 1


class TorchScriptOnly(torch.nn.Module):
    """Refuses torch.export's capture (a stand-in for what it cannot capture): the TorchScript
    tracer exports it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_exporting():
            raise NotImplementedError("captured by the TorchScript tracer only")
        return self.fc(x) * 2


class GridSample(torch.nn.Module):
    """GridSample has no opset-15 form: torch.export builds it, but not at opset 15."""

    def forward(self, x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        return F.grid_sample(x, grid, align_corners=False)


def _collected(ref: weakref.ref[Any]) -> bool:
    gc.collect()
    return ref() is None


def _export_and_drop(make: Callable[[], torch.nn.Module], path: Path, **options: Any) -> dict[str, Any]:
    """Export a fresh model; return weak references to it and to what export returned, and the
    error it raised (as text) with nothing else kept."""
    model = make()
    refs: dict[str, Any] = {"model": weakref.ref(model), "result": None, "error": None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = compat.export(model, (torch.randn(2, 16),), path, **options)
        except compat.ExportFailed as exc:
            refs["error"] = f"{type(exc).__name__}: {exc}"
        else:
            if result is not None:
                refs["result"] = weakref.ref(result)
            del result
    del model
    return refs


@pytest.mark.parametrize(("label", "make", "options", "route", "fails"), [
    ("TorchScript route", Mlp, {"route": "legacy"}, "legacy", False),
    ("torch.export route", Mlp, {"route": "dynamo"}, "dynamo", False),
    ("auto, falling back to TorchScript", TorchScriptOnly, {}, "legacy", False),
    ("a failing export", TorchScriptOnly, {"route": "dynamo"}, None, True),
    ("a branch baked by the draft capture", Branchy, {"route": "dynamo"}, "dynamo", False),
])
def test_every_exported_model_is_collectable(
    label: str, make: Callable[[], torch.nn.Module], options: dict[str, Any], route: str | None, fails: bool,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(tmp_path / "ledger.jsonl"))  # records kept too
    for i in range(N):
        refs = _export_and_drop(make, tmp_path / f"m{i}.onnx", opset_version=18, **options)
        assert (refs["error"] is not None) == fails, refs["error"]
        assert _collected(refs["model"]), f"{label}: model {i} is still alive after export"
        if route == "dynamo":
            assert refs["result"] is not None, "the torch.export route returns the ONNXProgram"
            assert _collected(refs["result"]), f"{label}: the ONNXProgram of model {i} is still alive"
        if not fails:
            kept = api.last_outcome()
            assert kept is not None and kept.route == route and kept.output == str(tmp_path / f"m{i}.onnx")
            assert kept.program is None and kept.model_bytes is None
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert len(lines) == N


def test_an_error_kept_by_the_caller_carries_no_program(tmp_path: Path) -> None:
    """strict mode: the model below the asked opset is not delivered, and the OpsetNotReached in
    the error no longer holds it; once the caller drops the error the model is collectable."""
    model = GridSample()
    ref = weakref.ref(model)
    x, grid = torch.randn(1, 2, 5, 5), torch.rand(1, 3, 3, 2) * 2 - 1
    with pytest.raises(compat.ExportFailed) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (x, grid), tmp_path / "m.onnx", route="dynamo", strict=True, opset_version=15)
    failure = info.value.failures["dynamo"]
    assert isinstance(failure, OpsetNotReached) and (failure.wanted, failure.reached) == (15, 16)
    assert failure.program is None and failure.outcome is None
    del model, failure, info
    assert _collected(ref)


def test_the_call_history_is_text_and_bounded() -> None:
    history = CallHistory(limit=3)
    outcome = Outcome(route="dynamo", program=object(), model_bytes=b"x" * 100,
                      translations=[Translation("ONX101", "dynamic_axes", "converted")])
    for i in range(5):
        history.add_success(f"a.py:{i}", outcome)
    error = compat.ExportFailed({"dynamo": compat.errors.RouteFailed("dynamo", "unsupported op", ValueError("aten::foo"))})
    history.add_failure("b.py:1", error)
    assert (history.total, history.failed, history.dropped, len(history)) == (6, 1, 3, 3)
    calls = list(history)
    assert [c.call_site for c in calls] == ["a.py:3", "a.py:4", "b.py:1"]
    assert all(c.outcome.program is None and c.outcome.model_bytes is None for c in calls[:2])
    assert calls[0].outcome.translations == outcome.translations
    assert calls[0].outcome.translations is not outcome.translations  # a copy: the route's list may grow
    assert calls[2].error.startswith("ExportFailed: every export route failed")
    assert calls[2].route_causes == (("dynamo", "unsupported op: ValueError: aten::foo"),)
