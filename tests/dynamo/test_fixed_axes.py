"""ONX101: a ``dynamic_axes`` entry on an axis the model itself fixes.

The TorchScript exporter only labelled such an axis symbolic; torch's own ``Dim.DYNAMIC`` makes the
whole export fail. The torch.export route exports it static at the size the model fixes, says so
(LegacyExportWarning, ledger translation) and keeps every other marked axis dynamic.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import compat
import route_parity as parity  # tests/helpers


class ConvNet(nn.Module):
    """Conv2d weights fix the channels; height and width stay free (global pooling)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).mean(dim=(2, 3)))


AXES = {"x": {0: "batch", 1: "channels", 2: "height", 3: "width"}, "y": {0: "batch"}}


def _run(path, x: torch.Tensor) -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x.numpy()})[0]


@pytest.mark.parametrize("route", ["dynamo", "auto"])
def test_channel_axis_the_model_fixes_is_exported_static(route, tmp_path, monkeypatch):
    book = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    model, out = ConvNet().eval(), tmp_path / "conv.onnx"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compat.export(model, (torch.randn(2, 3, 8, 8),), str(out), input_names=["x"],
                      output_names=["y"], dynamic_axes=AXES, opset_version=18, route=route)

    note = "axis x[1] ('channels') is fixed by the model at 3; exported static"
    assert any(note in str(w.message) and isinstance(w.message, compat.LegacyExportWarning) for w in caught)
    (record,) = [json.loads(line) for line in book.read_text().splitlines()]
    assert record["status"] == "ok" and record["route_taken"] == "dynamo"
    assert {"code": "ONX101", "option": "dynamic_axes", "action": note} in record["translations"]
    assert not any("'height'" in t["action"] and "fixed" in t["action"] for t in record["translations"])

    proto = onnx.load(str(out))
    assert parity.dims(proto.graph.input[0]) == ["batch", 3, "height", "width"]
    assert parity.dims(proto.graph.output[0]) == ["batch", 2]
    # the example size, then other sizes along every axis that stays dynamic
    for shape in [(2, 3, 8, 8), (5, 3, 8, 8), (1, 3, 11, 6)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(_run(out, x), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(Exception, match="(?i)dimension|shape"):  # static: other channel counts refused
        _run(out, torch.randn(2, 4, 8, 8))


class Tokens(nn.Module):
    """A position table fixes the sequence length; batch stays free."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(10, 4)
        self.pos = nn.Parameter(torch.randn(6, 4))

    def forward(self, ids, mask):
        return (self.emb(ids) + self.pos) * mask[..., None]


def test_axis_shared_by_two_inputs_is_fixed_on_both(tmp_path):
    """One name on several axes (one dim_param): fixed on every input it marks, one note each."""
    model, out = Tokens().eval(), tmp_path / "tokens.onnx"
    ids, mask = torch.randint(0, 10, (2, 6)), torch.ones(2, 6)
    axes = {"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}}
    with pytest.warns(compat.LegacyExportWarning, match=r"ids\[1\] \('seq'\) is fixed by the model at 6"):
        compat.export(model, (ids, mask), str(out), input_names=["ids", "mask"], dynamic_axes=axes,
                      opset_version=18, route="dynamo")
    proto = onnx.load(str(out))
    assert [parity.dims(v) for v in proto.graph.input] == [["batch", 6], ["batch", 6]]
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for batch in (2, 7):
        ids, mask = torch.randint(0, 10, (batch, 6)), (torch.rand(batch, 6) > 0.3).float()
        with torch.no_grad():
            want = model(ids, mask).numpy()
        got = sess.run(None, {"ids": ids.numpy(), "mask": mask.numpy()})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_free_axes_give_no_note(tmp_path):
    """No axis fixed: no note, every marked axis named in the graph."""
    model, out = ConvNet().eval(), tmp_path / "conv.onnx"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compat.export(model, (torch.randn(2, 3, 8, 8),), str(out), input_names=["x"],
                      dynamic_axes={"x": {0: "batch", 2: "height"}}, opset_version=18, route="dynamo")
    assert not any("fixed by the model" in str(w.message) for w in caught)
    assert parity.dims(onnx.load(str(out)).graph.input[0]) == ["batch", 3, "height", 8]
