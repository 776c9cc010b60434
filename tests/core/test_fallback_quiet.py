"""Fallbacks are quiet and precise (issue 9 item 4).

A failed torch.export attempt prints nothing on the user's terminal: its output (progress lines,
graph dumps) and traceback go to a log file named in the ledger. The fallback reason names the
model line that blocked capture, with the fix. A TorchScript-route export records its
TracerWarnings (the branch it baked in) in the ledger.
"""

from __future__ import annotations

import inspect
import json
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch

import compat


class Branchy(torch.nn.Module):
    """torch.export cannot capture it (its forward refuses, a stand-in for what torch.export
    cannot capture); the TorchScript tracer exports it, baking the branch the example takes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_exporting():
            raise NotImplementedError("captured by the TorchScript tracer only")
        if x.mean() > 0:  # data-dependent: the tracer bakes it
            return x * 2
        return x - 1


REFUSED_LINE = inspect.getsourcelines(Branchy.forward)[1] + 2
BRANCH_LINE = REFUSED_LINE + 1


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_failed_attempt_is_quiet_logged_and_names_the_line(tmp_path, monkeypatch, capfd):
    book, out = tmp_path / "ledger.jsonl", tmp_path / "m.onnx"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    model = Branchy().eval()
    x = torch.ones(2, 3)
    with pytest.warns(compat.LegacyExportWarning) as caught:  # compat's own warnings still show
        compat.export(model, (x,), str(out), input_names=["x"], dynamic_axes={"x": {0: "b"}})
    assert any(getattr(w.message, "code", "") == "ONX101" for w in caught)
    terminal = capfd.readouterr()
    assert "def forward" not in terminal.err + terminal.out  # no graph dump
    assert "torchvision is not installed" not in terminal.err  # no exporter progress/log lines
    assert "NotImplementedError" not in terminal.err

    outcome = compat.last_outcome()
    assert outcome.route == "legacy"
    where = f"test_fallback_quiet.py:{REFUSED_LINE} `raise NotImplementedError("
    assert outcome.fallback_reason.startswith(
        f"dynamo: torch.export failed (NotImplementedError) at {where}")

    (record,) = _records(book)
    assert record["fallback_reason"] == outcome.fallback_reason
    log = open(record["attempt_logs"]["dynamo"], encoding="utf-8").read()
    assert "== exception ==" in log and "captured by the TorchScript tracer only" in log
    # the TorchScript route baked the branch in: recorded with its line
    (tracer,) = record["tracer_warnings"]
    assert tracer["file"].endswith("test_fallback_quiet.py") and tracer["line"] == BRANCH_LINE
    assert "Python boolean" in tracer["message"]
    # the export itself is the legacy one: right at the example, the branch baked in
    for batch in (2, 5):
        xb = torch.ones(batch, 3)
        sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(sess.run(None, {"x": xb.numpy()})[0], model(xb).numpy())


def test_without_a_ledger_the_log_goes_under_the_cache_folder(tmp_path, monkeypatch, capfd):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_CACHE_DIR", str(cache))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(Branchy(), (torch.ones(2, 3),), str(tmp_path / "m.onnx"))
    assert "NotImplementedError" not in capfd.readouterr().err
    (log,) = (cache / "export-logs").glob("*-dynamo.log")
    assert "NotImplementedError" in log.read_text()


class Plain(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + 1


def test_successful_attempt_output_is_shown_as_before(tmp_path, monkeypatch, capfd):
    book, out = tmp_path / "ledger.jsonl", tmp_path / "m.onnx"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    compat.export(Plain(), (torch.randn(2, 3),), str(out), route="dynamo", verbose=True,
                  input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    assert "ir_version" in capfd.readouterr().out  # verbose: the model printed, as before
    (record,) = _records(book)
    assert record["attempt_logs"] == {} and record["tracer_warnings"] == []
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for batch in (2, 5):
        x = torch.randn(batch, 3)
        np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], Plain()(x).numpy(), rtol=1e-6)
