"""A registered symbolic that overrides an aten op torchlib also translates is the one applied,
on every supported torch (torch < 2.13 type-checks each candidate and would pick torchlib's)."""

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
