"""The TorchScript route's copy-on-write guard (compat/routing/copy_on_write.py): it copies only
the parameters a traced forward writes to, puts every change back, and does not change what the
tracer records: the file is plain torch's byte for byte, its tracer warnings name the same lines.
A model whose parameters are small is copied up front instead (the mode costs more than the copy);
the tests of the mode set that threshold below every model's size."""

from __future__ import annotations

import copy
import io
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import compat
from compat.errors import ExportFailed, ModelChangedWarning
from compat.routing import copy_on_write as cow
from compat.routing import model_state

EAGER_COPY_BYTES = cow.EAGER_COPY_BYTES


@pytest.fixture(autouse=True)
def watch_every_model(monkeypatch):
    """The mode guards every model here, however small (the eager-copy tests put the threshold
    back)."""
    monkeypatch.setattr(cow, "EAGER_COPY_BYTES", -1)


class Branchy(torch.nn.Module):
    """Tracer warnings of every kind (bool, int, item, len, tolist) and a Python-level torch
    function that warns (interpolate)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        if y.sum() > 0:
            y = y * 2
        n = int(x.shape[0]) + x[0, 0].item()
        for _ in range(3):
            y = y + len(x)
        y = F.interpolate(y[None], scale_factor=2.0)
        return y + n + torch.tensor(x.tolist()).sum()


class OwnNames(torch.nn.Module):
    """Graph inputs without input_names take the tracer's names from the forward's locals."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.emb = torch.nn.Embedding(10, 3)

    def forward(self, images: torch.Tensor, ids: torch.Tensor):
        h = torch.relu(images)
        feats = self.conv(h)
        pooled = feats.mean(dim=(2, 3))
        scale = torch.sigmoid(pooled[:, :3] + self.emb(ids).sum(1))
        return F.softmax(scale, -1), feats


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, q: torch.Tensor):
        out, weights = self.mha(q, q, q)
        return self.ln(out + q), weights


class ScaleFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        return x * 2

    @staticmethod
    def symbolic(g, x):
        return g.op("Mul", x, g.op("Constant", value_t=torch.tensor(2.0)))


class WithFunction(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ScaleFn.apply(self.fc(x))


def _conv_bn() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 2))


def _cases() -> list[tuple[str, torch.nn.Module, tuple, dict]]:
    torch.manual_seed(0)
    encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2)
    return [
        ("conv-bn", _conv_bn().eval(), (torch.randn(1, 3, 16, 16),), {}),
        ("conv-bn train", _conv_bn().train(), (torch.randn(2, 3, 16, 16),),
         {"training": torch.onnx.TrainingMode.TRAINING}),
        ("conv-bn named, dynamic", _conv_bn().eval(), (torch.randn(1, 3, 16, 16),),
         {"input_names": ["x"], "output_names": ["y"], "dynamic_axes": {"x": {0: "b"}}, "opset_version": 13}),
        ("encoder", encoder.eval(), (torch.randn(2, 5, 32),), {}),
        ("lstm", torch.nn.LSTM(8, 16, 2), (torch.randn(5, 1, 8),), {}),
        ("branchy", Branchy().eval(), (torch.randn(3, 4),), {}),
        ("own names", OwnNames().eval(), (torch.randn(2, 3, 8, 8), torch.tensor([[1, 2], [3, 4]])), {}),
        ("attention", Attention().eval(), (torch.randn(2, 5, 16),), {}),
        ("autograd function", WithFunction().eval(), (torch.randn(2, 4),), {}),
    ]


CASES = _cases()


@pytest.mark.parametrize("name,model,args,options", CASES, ids=[c[0] for c in CASES])
def test_the_file_and_the_tracer_warnings_are_plain_torchs(tmp_path, name, model, args, options):
    theirs = io.BytesIO()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        torch.onnx.export(copy.deepcopy(model), args, theirs, dynamo=False, **options)
    their_lines = [(w.filename, w.lineno) for w in seen if issubclass(w.category, torch.jit.TracerWarning)]
    target = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        compat.export(copy.deepcopy(model), args, target, route="legacy", **options)
    assert target.read_bytes() == theirs.getvalue()
    ours = compat.api.last_outcome().tracer_warnings
    assert [(w["file"], w["line"]) for w in ours] == their_lines
    assert torch.overrides._get_current_function_mode_stack() == []


class Writes(torch.nn.Module):
    """Writes parameters every way a forward can, and a buffer; ``untouched`` is only read."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 4)
        self.emb = torch.nn.Embedding(10, 4, max_norm=0.5)
        self.act = torch.nn.ReLU(inplace=True)
        self.register_buffer("steps", torch.zeros(1))
        self.p_relu, self.p_iadd, self.p_item, self.p_numpy, self.p_view, self.p_out, self.untouched = (
            torch.nn.Parameter(torch.randn(4)) for _ in range(7))
        self.view_of_p_view = self.p_view.data[1:]  # an alias taken before the export

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps.add_(1)
        with torch.no_grad():
            self.fc.bias.add_(1.0)
            F.relu(self.p_relu, True)
            self.p_iadd += 1
            self.p_item[0] = 3
            torch.nn.init.zeros_(self.view_of_p_view)
            torch.add(x[0], 1, out=self.p_out)
        self.fc.weight.data.mul_(2.0)
        self.p_numpy.detach().numpy()[:] = 7
        e = self.emb(torch.tensor([1, 2]))
        return self.act(self.fc(x)) + e.sum() + self.untouched.sum()


def _state(model: torch.nn.Module) -> dict[str, tuple[torch.Tensor, int]]:
    return {n: (t.detach().clone(), t.untyped_storage().data_ptr())
            for n, t in [*model.named_parameters(), *model.named_buffers()]}


def _assert_unchanged(model: torch.nn.Module, before: dict[str, tuple[torch.Tensor, int]]) -> None:
    for name, (value, ptr) in _state(model).items():
        assert ptr == before[name][1], f"{name} has other storage"
        assert torch.equal(value, before[name][0]), f"{name} changed value"


def test_every_write_is_put_back_and_only_written_parameters_are_copied(tmp_path, monkeypatch):
    model = Writes().eval()
    before = _state(model)
    copied: list[int] = []
    real = model_state.copied
    monkeypatch.setattr(model_state, "copied", lambda s: copied.append(id(s.tensor)) or real(s))
    x = torch.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (x,), tmp_path / "m.onnx", route="legacy", input_names=["x"])
    _assert_unchanged(model, before)
    names = {id(t): n for n, t in [*model.named_parameters(), *model.named_buffers()]}
    assert {names[i] for i in copied} == {
        "steps", "fc.bias", "fc.weight", "emb.weight", "p_relu", "p_iadd", "p_item", "p_numpy", "p_view", "p_out"}

    theirs = io.BytesIO()  # the file bakes what the forward left, as plain torch's does
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(copy.deepcopy(model), (x,), theirs, dynamo=False, input_names=["x"])
    assert (tmp_path / "m.onnx").read_bytes() == theirs.getvalue()


class FailsAfterWriting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.fc.weight.mul_(3.0)
        raise ValueError("broken forward")


def test_a_failing_forward_leaves_the_model_and_torch_as_they_were(tmp_path):
    model = FailsAfterWriting()
    before = _state(model)
    with pytest.raises(ExportFailed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy")
    _assert_unchanged(model, before)
    assert torch.overrides._get_current_function_mode_stack() == []
    assert not model._forward_hooks and not model._forward_pre_hooks
    # the tracer's own name lookup is back: a plain export names its input as before
    test_the_file_and_the_tracer_warnings_are_plain_torchs(tmp_path, *CASES[6])


@torch.jit.script
def _bump(t: torch.Tensor) -> torch.Tensor:
    return t.add_(1.0)


class WritesInTorchScript(torch.nn.Module):
    """A write the mode cannot see: TorchScript code writes a parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(4), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * _bump(self.scale)


def test_a_write_the_guard_could_not_see_is_named(tmp_path):
    model = WritesInTorchScript()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        with pytest.warns(ModelChangedWarning, match="scale"):
            compat.export(model, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy")


class Counts(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1.0)
        return self.fc(x) + self.calls


def test_torchscript_code_gets_every_value_copied(tmp_path, monkeypatch):
    """The mode does not see into TorchScript code: a ScriptModule is guarded by full copies."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = torch.jit.script(Counts())
    before = {n: t.clone() for n, t in [*model.named_parameters(), *model.named_buffers()]}
    used: list[object] = []
    real = model_state.values_preserved
    monkeypatch.setattr(model_state, "values_preserved", lambda m: used.append(m) or real(m))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (torch.randn(3, 4),), tmp_path / "m.onnx", route="legacy")
    assert used == [model]
    for n, t in [*model.named_parameters(), *model.named_buffers()]:
        assert torch.equal(t, before[n]), n


def test_the_guard_runs_only_on_the_exporting_thread_and_only_in_the_forward():
    import threading

    model = torch.nn.Linear(2, 2)
    seen: list[object] = []
    with cow.copy_on_write(model):
        assert torch.overrides._get_current_function_mode_stack() == []  # not before the forward

        def elsewhere() -> None:
            model(torch.randn(1, 2))
            seen.append(torch.overrides._get_current_function_mode_stack())

        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()
        model(torch.randn(1, 2))
        assert torch.overrides._get_current_function_mode_stack() == []  # not after it
    assert seen == [[]]


def test_numbers_of_a_written_model_match_eager_after_restore(tmp_path):
    """The restored model still computes what it computed before the export."""
    model = Writes().eval()
    x = torch.randn(3, 4)
    with torch.no_grad():
        probe = copy.deepcopy(model)
        expected = probe.fc(x).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (x,), tmp_path / "m.onnx", route="legacy")
    with torch.no_grad():
        np.testing.assert_allclose(model.fc(x).numpy(), expected)


class Watches(torch.nn.Module):
    """Records whether a torch function mode is active while its forward runs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.modes: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.modes.append(len(torch.overrides._get_current_function_mode_stack()))
        return self.fc(x)


def test_a_small_model_is_copied_up_front_not_watched(tmp_path, monkeypatch):
    """Below ``EAGER_COPY_BYTES`` the forward runs without the mode (whose per-call work cost
    more than copying a small model), and every write is put back, the unseen ones too."""
    monkeypatch.setattr(cow, "EAGER_COPY_BYTES", EAGER_COPY_BYTES)
    model = Watches().eval()
    compat.export(model, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy")
    assert model.modes == [0]

    watched = WritesInTorchScript()  # a write the mode cannot see: a full copy puts it back
    with warnings.catch_warnings():
        warnings.simplefilter("error", ModelChangedWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        compat.export(watched, (torch.randn(2, 4),), tmp_path / "w.onnx", route="legacy")
    assert torch.equal(watched.scale, torch.ones(4))


@pytest.mark.parametrize("name,model,args,options", CASES[:2], ids=[c[0] for c in CASES[:2]])
def test_a_small_models_file_is_plain_torchs_and_its_values_are_kept(tmp_path, monkeypatch, name, model, args,
                                                                     options):
    monkeypatch.setattr(cow, "EAGER_COPY_BYTES", EAGER_COPY_BYTES)
    assert cow._parameter_bytes(model) <= cow.EAGER_COPY_BYTES
    test_the_file_and_the_tracer_warnings_are_plain_torchs(tmp_path, name, model, args, options)
    written = Writes().eval()
    before = _state(written)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(written, (torch.randn(3, 4),), tmp_path / "w.onnx", route="legacy")
    _assert_unchanged(written, before)


def test_a_large_model_is_watched(tmp_path, monkeypatch):
    monkeypatch.setattr(cow, "EAGER_COPY_BYTES", 4 * 4 * 4)  # fc.weight alone is 64 bytes
    model = Watches().eval()
    compat.export(model, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy")
    assert model.modes == [1]


class _OwnParameter(torch.nn.Parameter):
    pass


class SharesStorage(torch.nn.Module):
    """Parameters that are views of one flat storage, a tied weight, and a parameter of a
    subclass (copied through torch, not as bytes); the forward writes behind autograd's back
    (``.data``, numpy)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        flat = torch.randn(4 * 4 + 4)
        self.w = torch.nn.Parameter(flat[:16].view(4, 4))
        self.b = torch.nn.Parameter(flat[16:])
        self.head = torch.nn.Linear(4, 4, bias=False)
        self.tail = torch.nn.Linear(4, 4, bias=False)
        self.tail.weight = self.head.weight
        self.scale = _OwnParameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.w.data.mul_(2.0)
        self.b.detach().numpy()[:] = 5.0
        self.head.weight.data.zero_()
        self.scale.data.fill_(3.0)
        return self.tail(x @ self.w + self.b) * self.scale


def test_a_small_models_values_come_back_through_shared_storage_without_moving_versions(tmp_path, monkeypatch):
    """The up-front copy of a small model (storage bytes) puts back writes through views of a
    shared storage and a tied weight, and moves no version counter (a graph the caller holds on
    the parameters stays valid)."""
    monkeypatch.setattr(cow, "EAGER_COPY_BYTES", EAGER_COPY_BYTES)
    model = SharesStorage().eval()
    loss = (model.w * model.b).sum()  # autograd saved both: a version change would break backward
    before = _state(model)
    versions = {n: t._version for n, t in model.named_parameters()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy")
    _assert_unchanged(model, before)
    assert model.w.untyped_storage().data_ptr() == model.b.untyped_storage().data_ptr()
    assert model.tail.weight is model.head.weight
    assert {n: t._version for n, t in model.named_parameters()} == versions
    loss.backward()
    assert torch.equal(model.w.grad, model.b.detach().expand(4, 4))


def test_the_guard_keeps_no_parameter_alive_after_the_export(tmp_path, monkeypatch):
    """The guard and its mode refer to each other: after the export the guard lets go of the
    model's tensors, so a dropped model is freed at once, as after plain torch's TorchScript
    export, not at the next garbage collection (a loop exporting fresh models grew by a model
    per export until the collector ran)."""
    import gc
    import weakref

    monkeypatch.setattr(cow, "EAGER_COPY_BYTES", -1)  # watched, not copied up front
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    x = torch.randn(3, 8)
    with torch.no_grad():  # no autograd graph holding the weights
        expected = model(x)
    out = tmp_path / "m.onnx"
    weight = weakref.ref(model[0].weight)
    gc.collect()
    gc.disable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compat.export(model, (x,), str(out), route="legacy")
        del model
        assert weight() is None, "a parameter outlived its model: something still refers to it"
    finally:
        gc.enable()
    import onnxruntime as ort

    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, expected.detach().numpy(), rtol=1e-5, atol=1e-6)
