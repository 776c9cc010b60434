"""``torch.cdist`` on the torch.export route (``dynamo/cdist.py``): torch's ONNX registry has no
``aten::_cdist_forward``, so the route failed and auto returned the TorchScript exporter's model,
which is wrong for ``p=1`` (NaN and infinities). Checked in onnxruntime against eager torch, at
the example and at other sizes along the dynamic axes."""

from __future__ import annotations

import math
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch

import compat


class Cdist(torch.nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.cdist(a, b, p=self.p)


AXES = {"input_names": ["a", "b"], "dynamic_axes": {"a": {0: "batch", 1: "rows"}, "b": {0: "batch", 1: "cols"}}}


def _matches_eager(path, model: torch.nn.Module) -> None:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    torch.manual_seed(1)
    for shape_a, shape_b in (((2, 5, 3), (2, 4, 3)), ((3, 7, 3), (3, 2, 3))):
        a, b = torch.randn(shape_a), torch.randn(shape_b)
        (got,) = sess.run(None, {"a": a.numpy(), "b": b.numpy()})
        np.testing.assert_allclose(got, model(a, b).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, math.inf])
def test_the_torch_export_route_exports_cdist(tmp_path, p):
    model = Cdist(p)
    torch.manual_seed(0)
    args = (torch.randn(2, 5, 3), torch.randn(2, 4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, args, tmp_path / "m.onnx", route="dynamo", **AXES)
    _matches_eager(tmp_path / "m.onnx", model)


def test_auto_returns_a_right_manhattan_cdist_not_the_torchscript_exporters(tmp_path):
    model = Cdist(1.0)
    torch.manual_seed(0)
    args = (torch.randn(2, 5, 3), torch.randn(2, 4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, args, tmp_path / "m.onnx", opset_version=13, **AXES)
    assert compat.last_outcome().route == "dynamo"
    _matches_eager(tmp_path / "m.onnx", model)
