"""ONX102's hint is true as printed: on plain torch's torch.export exporter ``model.train()``
does not keep train-mode BatchNorm (its running statistics are exported); the hint names what
does (``dynamo=False`` / ``compat.export``), and compat.export's train-mode model matches eager."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

import compat
from compat import catalog


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    with torch.no_grad():
        m[1].running_mean.fill_(3.0)  # running statistics far from any batch's
        m[1].running_var.fill_(0.01)
    return m


def _run(path: Path, x: torch.Tensor) -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]


def test_hint_does_not_promise_model_train_and_names_what_keeps_it(tmp_path: Path) -> None:
    x = torch.randn(2, 3, 8, 8)
    model = _model().train()
    with torch.no_grad():
        eager_train = model(x).numpy()
    model.load_state_dict(_model().state_dict())  # undo the running-stat update of that call
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.train(), (x,), str(tmp_path / "plain.onnx"), dynamo=True,
                          external_data=False)
        compat.export(_model(), (x,), str(tmp_path / "shim.onnx"),
                      training=torch.onnx.TrainingMode.TRAINING)
    plain_diff = float(np.abs(_run(tmp_path / "plain.onnx", x) - eager_train).max())
    shim_diff = float(np.abs(_run(tmp_path / "shim.onnx", x) - eager_train).max())
    assert plain_diff > 1.0, plain_diff  # model.train() + plain torch.export: not train mode
    assert shim_diff < 1e-4, shim_diff
    text = catalog.get("ONX102").message("a.py", None, "none") + catalog.SHORT_FIXES["ONX102"]
    assert "model.eval() or model.train()" not in text
    assert "dynamo=False" in text and "compat.export" in text
    assert "model.train() won't do" in catalog.SHORT_FIXES["ONX102"]
