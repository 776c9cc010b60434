"""A few end-to-end calls through ``compat.export`` (signature → dispatch → dynamo route → save)."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import torch
from torch import nn

import compat
import route_parity as parity  # tests/helpers


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv1d(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x, scale=None):
        y = self.bn(self.conv(x))
        return y * scale if scale is not None else y


def _export(tmp_path, **kw):
    path = str(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(Net().eval(), (torch.randn(1, 4, 9),), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch", 2: "time"}, "y": {0: "batch", 2: "time"}}, **kw)
    return onnx.load(path), compat.last_outcome()


def test_legacy_script_on_dynamo_route_keeps_names_and_runs_at_other_sizes(tmp_path):
    proto, outcome = _export(tmp_path, route="dynamo")
    assert outcome.route == "dynamo"
    assert parity.describe(proto)["inputs"] == {"x": ["batch", 4, "time"]}
    assert parity.describe(proto)["outputs"] == {"y": ["batch", 4, "time"]}
    m = Net().eval()
    for shape in ((1, 4, 9), (3, 4, 9), (2, 4, 17)):
        x = torch.randn(*shape)
        np.testing.assert_allclose(parity.run(proto, {"x": x})[0], parity.eager(m, (x,))[0], rtol=1e-4, atol=1e-5)
    assert any(t.code == "ONX101" for t in outcome.translations)


def test_training_on_auto_route_stays_on_dynamo_with_batch_statistics(tmp_path):
    proto, outcome = _export(tmp_path, route="auto", training=torch.onnx.TrainingMode.TRAINING,
                             do_constant_folding=False)
    assert outcome.route == "dynamo" and outcome.fallback_reason is None
    assert {"ONX101", "ONX102", "ONX104"} <= {t.code for t in outcome.translations}
    x = torch.randn(5, 4, 11)
    np.testing.assert_allclose(parity.run(proto, {"x": x})[0], parity.eager(Net(), (x,), train=True)[0],
                               rtol=1e-4, atol=1e-4)
