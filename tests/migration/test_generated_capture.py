"""What the generated module holds for a migrated call: the explicit draft capture of a
value-dependent branch (30.6) and the train-mode BatchNorm translations (30.4), rendered,
imported and exported with torch's own exporter, checked against eager torch."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import onnxruntime as ort
import torch
import torch._functorch.config
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from migration import draft_plan, generated, train_mode
from migration.core import Options, fix_text


def _module(tmp_path, entries):
    path = generated.module_path(str(tmp_path / "model.py"))
    text, problem = generated.plan(path, list(entries))
    assert problem is None
    generated.write(path, text)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Gate(torch.nn.Module):
    """A branch on a value computed from the weights (docs/upstream/draft-export-parameter-values.md)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)
        with torch.no_grad():
            self.proj.bias.fill_(1.0)

    def forward(self, x):
        h = self.proj(x)
        if h.sum() > 0:  # about 12 at the example
            return torch.tanh(h)
        return torch.sigmoid(h)


def test_generated_draft_export_decides_a_guard_reading_a_weight_as_eager(tmp_path):
    mod = _module(tmp_path, draft_plan.entries(str(tmp_path / "model.py"), 3))
    torch.manual_seed(1)
    model, x = Gate().eval(), torch.rand(2, 6)
    # the real value a draft capture propagates for a parameter is the parameter's
    with torch._functorch.config.patch(fake_tensor_propagate_real_tensors=True), \
            mod.parameters_keep_real_values():
        fake = FakeTensorMode(shape_env=ShapeEnv()).from_tensor(
            torch.nn.Parameter(torch.full((3,), 5.0)), static_shapes=True)
        assert torch.equal(fake.real_tensor, torch.full((3,), 5.0))
    for _ in range(3):
        program = mod.draft_export(model, (x,))
        assert torch.allclose(program.module()(x), model(x))
    onnx_program = torch.onnx.export(program, (x,), dynamo=True)
    session = ort.InferenceSession(onnx_program.model_proto.SerializeToString())
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(got, model(x).detach().numpy(), atol=1e-5)


BAKED_RECORD = {"route_taken": "dynamo", "status": "ok", "baked": [
    {"file": "t.py", "line": 12, "source": "if y.sum() > 0:", "guard": "Eq(u0, 1) -> False"}]}


def test_a_baked_branch_migrates_to_the_generated_draft_export():
    """30.6 regression: plain ``torch.export.draft_export`` decided the guard on uninitialized
    parameter memory (the migrated value_branch differed from the shim's by PYTHONHASHSEED)."""
    src = "import torch\n\ntorch.onnx.export(m, (x,), 'm.onnx')\n"
    out, _, _, _ = fix_text(src, "t.py", Options(fix=True), {3: BAKED_RECORD})
    assert "exported_program = t_onnx.draft_export(m, (x,))\n" in out, out
    assert "torch.export.draft_export(" not in out and "import t_onnx\n" in out


def test_generated_batch_statistics_translations_match_eager_train_mode(tmp_path):
    mod = _module(tmp_path, train_mode.entries(str(tmp_path / "model.py"), 3, "TRAINING"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    with torch.no_grad():
        model[1].running_mean.fill_(3.0)  # running statistics far from any batch's
        model[1].running_var.fill_(0.01)
    model.eval()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for n in (2, 5):  # the example size and another one (the batch axis dynamic)
        x = torch.randn(n, 3, 8, 8)
        with torch.no_grad():
            expected = model.train()(x).numpy()
        model.load_state_dict(state)
        model.eval()
        with mod.train_mode(model):
            program = torch.onnx.export(model, (x,), dynamo=True,
                                        custom_translation_table=mod.translation_table())
        assert not model.training and all(torch.equal(v, state[k])
                                           for k, v in model.state_dict().items())
        session = ort.InferenceSession(program.model_proto.SerializeToString())
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        np.testing.assert_allclose(got, expected, atol=1e-4)


def test_a_baked_branch_in_train_mode_stays_pinned_with_the_reason():
    """The explicit capture runs before the call, outside ``train_mode(model)``: not the shim's
    train-mode capture, so the call keeps dynamo=False and says why (ONX102)."""
    src = ("import torch\n\ntorch.onnx.export(m, (x,), 'm.onnx', "
           "training=torch.onnx.TrainingMode.TRAINING)\n")
    record = {**BAKED_RECORD, "translations": [
        {"code": "ONX102", "option": "training", "action": "training=TRAINING: batch statistics"}]}
    out, _, _, _ = fix_text(src, "t.py", Options(fix=True), {3: record})
    assert "dynamo=False" in out and "baked by an explicit capture" in out, out
    assert "train_mode(" not in out
