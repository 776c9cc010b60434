"""ONX102: ``training=`` EVAL / PRESERVE / TRAINING on the torch.export route vs the TorchScript one."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from compat.request import ExportRequest
import route_parity as parity  # tests/helpers


class ConvBN(nn.Module):
    def __init__(self, p: float = 0.0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(p)
        self.head = nn.Linear(8, 4)
        self.bn1d = nn.BatchNorm1d(4)

    def forward(self, x):
        h = self.drop(torch.relu(self.bn(self.conv(x))))
        return self.bn1d(self.head(h.mean((2, 3))))


def _model(p: float = 0.0) -> ConvBN:
    torch.manual_seed(0)
    m = ConvBN(p)
    with torch.no_grad():  # running stats far from any batch's, so eval vs train differ clearly
        for bn in (m.bn, m.bn1d):
            bn.running_mean.fill_(0.5)
            bn.running_var.fill_(3.0)
    return m


def _state(m: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def _same_state(m: nn.Module, state: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(v, state[k]) for k, v in m.state_dict().items())


X = torch.randn(4, 3, 10, 10)


@pytest.fixture(scope="module")
def trained():
    """TRAINING on an eval-mode model, dynamic batch, both routes."""
    m = _model().eval()
    state = _state(m)
    axes = {"x": {0: "batch"}, "y": {0: "batch"}}
    req = ExportRequest(model=m, args=(X,), training="TRAINING", do_constant_folding=False,
                        input_names=("x",), output_names=("y",), dynamic_axes=axes,
                        given=frozenset({"training", "do_constant_folding", "dynamic_axes"}))
    new, outcome = parity.dynamo_proto(req)
    after_dynamo = (m.training, _same_state(m, state))
    old = parity.legacy_proto(m, (X,), training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                              input_names=["x"], output_names=["y"], dynamic_axes=axes, opset_version=18)
    m.load_state_dict(state)  # the TorchScript exporter's trace updates BatchNorm statistics
    return m, new, old, outcome, after_dynamo


def test_training_matches_eager_train_mode_on_both_routes(trained):
    m, new, old, _, _ = trained
    for batch in (4, 2, 7):
        x = torch.randn(batch, 3, 10, 10)
        ref = parity.eager(m, (x,), train=True)[0]
        np.testing.assert_allclose(parity.run(new, {"x": x})[0], ref, rtol=1e-4, atol=1e-4, err_msg=f"batch {batch}")
        if batch == 4:
            np.testing.assert_allclose(parity.run(old, {"x": x})[0], ref, rtol=1e-4, atol=1e-4)
    eval_ref = parity.eager(m, (X,), train=False)[0]
    assert np.abs(parity.run(new, {"x": X})[0] - eval_ref).max() > 0.1  # not the eval-mode model


def test_training_keeps_mode_and_buffers(trained):
    _, _, _, _, (training_flag, same_state) = trained
    assert training_flag is False
    assert same_state


def test_training_graph_shape_matches_legacy(trained):
    _, new, old, outcome, _ = trained
    a, b = parity.describe(new), parity.describe(old)
    assert a["inputs"] == b["inputs"] == {"x": ["batch", 3, 10, 10]}
    assert list(a["outputs"]) == list(b["outputs"]) == ["y"]
    assert a["outputs"]["y"][0] == b["outputs"]["y"][0] == "batch"
    # do_constant_folding=False: every parameter is an un-folded initializer under its own name
    params = {k for k, _ in trained[0].named_parameters()}
    assert params <= set(a["initializers"]) and params <= set(b["initializers"])
    codes = {t.code for t in outcome.translations}
    assert {"ONX101", "ONX102", "ONX104"} <= codes


def test_dropout_exported_in_training_mode():
    m = _model(p=0.5).eval()
    req = ExportRequest(model=m, args=(X,), training="TRAINING", given=frozenset({"training"}))
    proto, _ = parity.dynamo_proto(req)
    drops = [n for n in proto.graph.node if n.op_type == "Dropout"]
    assert drops, [n.op_type for n in proto.graph.node]
    consts = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    consts.update({n.output[0]: onnx.numpy_helper.to_array(n.attribute[0].t) for n in proto.graph.node if n.op_type == "Constant"})
    assert all(len(d.input) == 3 and bool(consts[d.input[2]]) for d in drops)
    assert m.training is False


def test_preserve_of_train_mode_model_exports_batch_statistics():
    m = _model().train()
    state = _state(m)
    req = ExportRequest(model=m, args=(X,), training="PRESERVE", given=frozenset({"training"}))
    proto, outcome = parity.dynamo_proto(req)
    assert m.training and _same_state(m, state)
    np.testing.assert_allclose(parity.run(proto, {proto.graph.input[0].name: X})[0],
                               parity.eager(m, (X,), train=True)[0], rtol=1e-4, atol=1e-4)
    assert any(t.code == "ONX102" and "PRESERVE" in t.action for t in outcome.translations)


def test_eval_default_exports_eval_model_and_restores_train_mode():
    m = _model().train()
    state = _state(m)
    req = ExportRequest(model=m, args=(X,))
    proto, _ = parity.dynamo_proto(req)
    assert m.training and all(mod.training for mod in m.modules()) and _same_state(m, state)
    np.testing.assert_allclose(parity.run(proto, {proto.graph.input[0].name: X})[0],
                               parity.eager(m, (X,), train=False)[0], rtol=1e-4, atol=1e-4)


# --- ExportedProgram: its mode was fixed when it was captured ------------------------------------

def test_training_on_an_exported_program_is_refused_before_export():
    import dynamo
    from compat.errors import CompatValueError

    m = _model().eval()
    ep = torch.export.export(m, (X,))
    with pytest.raises(CompatValueError, match="training") as info:
        dynamo.export(ExportRequest(model=ep, args=(X,), training="TRAINING", given=frozenset({"training"})))
    assert "train mode" in str(info.value) and "nn.Module" in str(info.value)
    train_ep = torch.export.export(_model().train(), (X,))
    with pytest.raises(CompatValueError, match="training=EVAL"):
        dynamo.export(ExportRequest(model=train_ep, args=(X,), training="EVAL", given=frozenset({"training"})))


@pytest.mark.parametrize("train", [True, False])
def test_exported_program_exports_the_mode_it_was_captured_in(train):
    m = _model().train(train)
    ep = torch.export.export(m, (X,))
    req = ExportRequest(model=ep, args=(X,), input_names=("x",), output_names=("y",))
    new, outcome = parity.dynamo_proto(req)
    np.testing.assert_allclose(parity.run(new, {"x": X})[0], parity.eager(m, (X,), train=train)[0],
                               rtol=1e-4, atol=1e-5)
    mode = "train" if train else "eval"
    want = (f"training=EVAL: an ExportedProgram keeps the mode it was captured in ({mode}); "
            "BatchNorm exported with batch statistics")
    assert [t.action for t in outcome.translations if t.code == "ONX102"] == ([want] if train else [])


# --- a train-mode capture the caller asked for: no torch "training mode" warning -----------------

class TopReadsTraining(nn.Module):
    """The top-level forward reads ``self.training`` too, not only its BatchNorms."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = _model()

    def forward(self, x):
        y = self.inner(x)
        return y * 3 if self.training else y


@pytest.mark.parametrize("mode", ["TRAINING", "PRESERVE"])
def test_requested_train_mode_capture_without_torchs_training_warning(mode):
    import warnings

    import dynamo

    m = TopReadsTraining().train(mode == "PRESERVE")
    flags = [x.training for x in m.modules()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = dynamo.export(ExportRequest(model=m, args=(X,), training=mode, input_names=("x",),
                                              given=frozenset({"training"})))
    assert not [w for w in caught if "training mode" in str(w.message)]
    got = parity.run(outcome.program.model_proto, {"x": X})[0]
    np.testing.assert_allclose(got, parity.eager(m, (X,), train=True)[0], rtol=1e-4, atol=1e-5)
    assert [x.training for x in m.modules()] == flags and not m._forward_pre_hooks
