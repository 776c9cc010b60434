"""A registered symbolic, or a ``custom_translation_table`` entry, that overrides an aten op
torchlib also translates is the one applied, on every supported torch (torch 2.9-2.10 match each
candidate's parameters against the op's arguments and would pick torchlib's)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch.onnx import symbolic_helper

import compat
from dynamo.translation_fit import matches_every_node

pytestmark = pytest.mark.slow


@symbolic_helper.parse_args("v", "s")
def sigmoid_gelu(g, x, approximate):
    """x * sigmoid(1.702 x): plain ONNX ops, and visibly not torchlib's Erf/Tanh form."""
    scale = g.op("Constant", value_t=torch.tensor(1.702))
    return g.op("Mul", x, g.op("Sigmoid", g.op("Mul", x, scale)))


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x):
        return torch.nn.functional.gelu(self.norm(x))


def test_registered_gelu_override_is_applied_on_the_torch_export_route(tmp_path):
    model = Block().eval()
    x = torch.randn(3, 4)
    path = tmp_path / "m.onnx"
    compat.register_custom_op_symbolic("::gelu", sigmoid_gelu, 11)
    try:
        compat.export(model, (x,), str(path), route="dynamo", input_names=["x"],
                      opset_version=18)  # torch's own opset-20 gelu would win at 20
    finally:
        compat.unregister_custom_op_symbolic("::gelu", 11)
    ops = [n.op_type for n in onnx.load(path).graph.node]
    assert "Sigmoid" in ops, ops
    assert "Erf" not in ops and "Tanh" not in ops, ops  # torchlib's gelu forms
    (got,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.numpy()})
    h = model.norm(x).detach()
    np.testing.assert_allclose(got, (h * torch.sigmoid(1.702 * h)).numpy(), rtol=1e-5, atol=1e-5)


class Clipped(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 3


def relu_as_max(x):
    """Its parameter is ``x``, aten::relu's argument is ``self``."""
    from onnxscript import opset18 as op

    return op.Max(x, op.Constant(value_float=-0.5))


def test_users_translation_table_entry_for_an_aten_op_is_applied(tmp_path, monkeypatch):
    """torch 2.9.1 and 2.10.0 silently export Relu here (measured): the shim applies the user's
    entry on every torch, through the torch.export route without the TorchScript exporter."""
    monkeypatch.setenv("TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT", "1")
    path = tmp_path / "m.onnx"
    x = torch.randn(3, 5)
    compat.export(Clipped().eval(), (x,), str(path), input_names=["x"],
                  dynamic_axes={"x": {0: "n"}},
                  custom_translation_table={torch.ops.aten.relu.default: relu_as_max})
    ops = [n.op_type for n in onnx.load(path).graph.node]
    assert "Max" in ops and "Relu" not in ops, ops
    for n in (3, 7):  # the example's size and another
        x = torch.randn(n, 5)
        (got,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            None, {"x": x.numpy()})
        np.testing.assert_allclose(got, (torch.clamp(x, min=-0.5) * 3).numpy(), rtol=1e-6)


def test_translations_declare_no_parameters_to_type_check():
    import inspect

    calls = []

    def translate(*args, **kwargs):
        calls.append((args, kwargs))
        return "out"

    wrapped = matches_every_node(translate)
    assert inspect.signature(wrapped).parameters == {}
    assert wrapped(1, k=2) == "out" and calls == [((1,), {"k": 2})]
    assert wrapped.__name__ == "translate"
