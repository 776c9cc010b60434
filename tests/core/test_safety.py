"""A failed export leaves nothing broken behind and never changes the user's model."""

from __future__ import annotations

import os
import threading

import pytest
import torch

import compat
from compat.errors import ExportFailed


def test_failed_export_keeps_old_file_and_leaves_no_temp(models, tmp_path):
    target = tmp_path / "model.onnx"
    target.write_bytes(b"previous model")
    with pytest.raises(ExportFailed):
        compat.export(models.Unexportable(), (torch.rand(2, 2),), target)
    assert target.read_bytes() == b"previous model"
    assert os.listdir(tmp_path) == ["model.onnx"]


def test_checker_failure_writes_nothing(small_net, tmp_path):
    """enable_onnx_checker=True on a model the checker rejects: no file at f."""
    target = tmp_path / "m.onnx"

    class BadOpset(torch.nn.Module):
        def forward(self, x):
            return x + 1

    # a custom domain node without an opset import is rejected by onnx.checker
    from torch.onnx import register_custom_op_symbolic  # noqa: F401  (exists on the TorchScript exporter)

    with pytest.warns(compat.LegacyExportWarning):
        compat.export(small_net, (torch.randn(2, 4),), target, route="legacy", enable_onnx_checker=True)
    assert target.exists()  # a valid model passes the checker and is written
    assert any(t.code == "ONX203" for t in compat.last_outcome().translations)


def test_successful_export_replaces_old_file(small_net, parity, tmp_path):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old")
    x = torch.randn(2, 4)
    compat.export(small_net, (x,), target, route="legacy", input_names=["x"])
    parity.check(target, small_net, [x], ["x"])
    assert os.listdir(tmp_path) == ["m.onnx"]


@pytest.mark.parametrize("route", ["legacy", "dynamo"])
def test_training_flag_and_buffers_restored(route, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.5))
    net.train()
    net[2].eval()  # a mixed-mode model: each submodule's flag must come back as it was
    before = {k: v.clone() for k, v in net.state_dict().items()}
    compat.export(net, (torch.randn(4, 4),), tmp_path / "m.onnx", route=route)
    assert net.training and net[0].training and net[1].training and not net[2].training
    for k, v in net.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_state_restored_after_failure(models, tmp_path):
    m = models.Unexportable()
    m.train()
    with pytest.raises(ExportFailed):
        compat.export(m, (torch.rand(2, 2),), tmp_path / "m.onnx", training=torch.onnx.TrainingMode.EVAL)
    assert m.training


def test_concurrent_exports_are_serialised(small_net, parity, tmp_path):
    errors: list[BaseException] = []
    x = torch.randn(2, 4)

    def job(i: int) -> None:
        try:
            compat.export(small_net, (x,), tmp_path / f"m{i}.onnx", route="legacy", input_names=["x"])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(4):
        parity.check(tmp_path / f"m{i}.onnx", small_net, [x], ["x"])
