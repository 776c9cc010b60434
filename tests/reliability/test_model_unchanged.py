"""An export never changes the user's model, on any route and any exit path: parameters and
buffers keep their values, and stay the very objects the model held."""

from __future__ import annotations

import copy
import io
import warnings

import numpy as np
import pytest
import torch
from rel_helpers import run_onnx

import compat
from compat.errors import ExportFailed

X = torch.randn(3, 4)


class CountsInEval(torch.nn.Module):
    """Updates a buffer in place even in eval mode (a running statistic, a step counter)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("steps", torch.zeros(1))
        self.register_buffer("running", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps.add_(1)
        self.running.mul_(0.9).add_(x.mean(0) * 0.1)
        return self.fc(x) + self.running


class ReassignsBuffer(torch.nn.Module):
    """Rebinds a buffer attribute in forward (``self.state = ...``)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("state", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state = self.state * 2
        return self.fc(x) * self.state


class WritesParameters(torch.nn.Module):
    """Changes parameters in place: through ``no_grad`` and behind autograd's back (``.data``)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.fc.bias.add_(1.0)
        self.fc.weight.data.mul_(2.0)
        return self.fc(x)


class SwapsParameterStorage(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.fc.weight.data = torch.zeros(4, 4)
        return self.fc(x)


class RegistersOnABareModule(torch.nn.Module):
    """Gives a submodule that had no parameter or buffer (an activation) one of each in forward
    (which torch's tracer refuses: the state dict changed)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.act.register_buffer("calls", torch.ones(1))
        self.act.scale = torch.nn.Parameter(torch.full((1,), 2.0))
        return self.act(self.fc(x)) * self.act.scale


class MutatesThenFails(CountsInEval):
    """Changes state, then fails on both routes (data-dependent branch returning a float)."""

    def forward(self, x: torch.Tensor):  # type: ignore[override]
        self.steps.add_(1)
        with torch.no_grad():
            self.fc.weight.mul_(3.0)
        self.state_attr = torch.ones(1)  # a plain attribute: not the exporter's business
        if x.sum() > 0:
            return float(x.sum())
        return x


class MutatesWithBranch(CountsInEval):
    """Changes state, then branches on a tensor value: torch.export stops at the branch, the
    torch.export route's draft capture bakes it (running forward on the example's values)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return torch.tanh(y) if y.abs().sum() > 0 else torch.sigmoid(y)  # clear of the threshold


class MutatesThenRefused(CountsInEval):
    """Changes state, then refuses torch.export's capture: auto falls back to the TorchScript route."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if torch.compiler.is_exporting():
            raise NotImplementedError("captured by the TorchScript tracer only")
        return torch.tanh(y)


def _state(model: torch.nn.Module) -> dict[str, tuple[int, torch.Tensor, int]]:
    """name -> (object id, a copy of the value, storage pointer)."""
    return {n: (id(t), t.detach().clone(), t.untyped_storage().data_ptr())
            for n, t in [*model.named_parameters(), *model.named_buffers()]}


def _assert_unchanged(model: torch.nn.Module, before: dict[str, tuple[int, torch.Tensor, int]]) -> None:
    after = _state(model)
    assert after.keys() == before.keys()
    for name, (ident, value, ptr) in before.items():
        assert after[name][0] == ident, f"{name} is a different object after the export"
        assert after[name][2] == ptr, f"{name} has other storage after the export"
        assert torch.equal(after[name][1], value), f"{name} changed value"


def _torch_export(model: torch.nn.Module, dynamo: bool) -> bytes:
    """What torch's own exporter makes of (a copy of) the model: the TorchScript exporter bakes
    the state the traced forward leaves into the initializers, and compat must give the same."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(copy.deepcopy(model), (X,), buf, dynamo=dynamo, input_names=["x"])
    return buf.getvalue()


def _same_outputs(ours, theirs: bytes) -> None:
    """Equal outputs at the example input (the models are static)."""
    for a, b in zip(run_onnx(ours, {"x": X.numpy()}), run_onnx(theirs, {"x": X.numpy()}), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-4)


CASES = [CountsInEval, ReassignsBuffer, WritesParameters, SwapsParameterStorage]
# torch 2.13's torch.export crashes the interpreter (SIGSEGV) on a forward writing through
# ``.data`` under pytest, with or without compat: that case runs on the TorchScript route only
DYNAMO_CASES = [CountsInEval, ReassignsBuffer, SwapsParameterStorage]


@pytest.mark.parametrize("cls", CASES, ids=[c.__name__ for c in CASES])
def test_torchscript_route_leaves_the_model_as_it_was(tmp_path, cls):
    model = cls().eval()
    before = _state(model)
    theirs = _torch_export(model, dynamo=False)
    target = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (X,), target, route="legacy", input_names=["x"])
    _assert_unchanged(model, before)
    _same_outputs(target, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("cls", DYNAMO_CASES, ids=[c.__name__ for c in DYNAMO_CASES])
def test_torch_export_route_leaves_the_model_as_it_was(tmp_path, cls):
    model = cls().eval()
    before = _state(model)
    theirs = _torch_export(model, dynamo=True)
    target = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # compared with plain torch's model: SwapsParameterStorage's eager output (zeroed weights)
        # differs from the torch.export model, which the acceptance check would refuse
        compat.export(model, (X,), target, route="dynamo", input_names=["x"], acceptance_check=False)
    _assert_unchanged(model, before)
    _same_outputs(target, theirs)
    if cls is SwapsParameterStorage:  # the check's own eager runs change nothing either
        with pytest.raises(compat.ExportFailed, match="differs from eager"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compat.export(model, (X,), target, route="dynamo", input_names=["x"])
        _assert_unchanged(model, before)


def test_fallback_from_torch_export_leaves_the_model_as_it_was(tmp_path):
    model = MutatesThenRefused().eval()
    before = _state(model)
    theirs = _torch_export(model, dynamo=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (X,), tmp_path / "m.onnx", input_names=["x"])
    assert compat.last_outcome().route == "legacy"
    _assert_unchanged(model, before)
    _same_outputs(tmp_path / "m.onnx", theirs)


def test_draft_capture_of_a_branch_leaves_the_model_as_it_was(tmp_path):
    model = MutatesWithBranch().eval()
    before = _state(model)
    with torch.no_grad():
        want = copy.deepcopy(model)(X).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (X,), tmp_path / "m.onnx", input_names=["x"])
    assert compat.last_outcome().route == "dynamo" and compat.last_outcome().baked
    _assert_unchanged(model, before)
    np.testing.assert_allclose(run_onnx(tmp_path / "m.onnx", {"x": X.numpy()})[0], want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("route", ["legacy", "auto"])
def test_failed_export_leaves_the_model_as_it_was(tmp_path, route):
    model = MutatesThenFails().eval()
    before = _state(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ExportFailed):
            compat.export(model, (torch.rand(3, 4),), tmp_path / "m.onnx", route=route)
    _assert_unchanged(model, before)
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("route", ["legacy", "auto"])
def test_what_a_forward_registers_on_a_parameterless_module_is_removed(tmp_path, route):
    """The TorchScript route fails on it (so does torch's); torch.export captures it. Either way
    the activation has no parameter or buffer after the call."""
    model = RegistersOnABareModule().eval()
    before = _state(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if route == "legacy":
            with pytest.raises(ExportFailed, match="TorchScript export failed"):
                compat.export(model, (X,), tmp_path / "m.onnx", route=route)
        else:
            program = compat.export(model, (X,), tmp_path / "m.onnx", route=route)
            assert program is not None  # an ONNXProgram: the torch.export route's model
    _assert_unchanged(model, before)
    assert not hasattr(model.act, "scale") and not hasattr(model.act, "calls")


def test_train_mode_export_restores_buffers_and_flags(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.2))
    model.train()
    before = _state(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (X,), tmp_path / "m.onnx", route="legacy",
                      training=torch.onnx.TrainingMode.TRAINING)
    assert all(m.training for m in model.modules())
    _assert_unchanged(model, before)
