"""A torch without the TorchScript exporter: the legacy route says so, auto uses torch.export.

The capability probe is the one switch: nothing here replaces an exporter.
"""

from __future__ import annotations

import pytest
import torch

import compat
import legacy
from compat.installed import torch_caps
from compat.errors import ExportFailed, RouteUnavailable


@pytest.fixture
def no_torchscript(monkeypatch):
    monkeypatch.setattr(torch_caps, "has_torchscript_exporter", lambda: False)


def test_legacy_route_says_it_is_unavailable(no_torchscript, small_net, tmp_path):
    assert legacy.available() is False
    with pytest.raises(RouteUnavailable, match="no TorchScript-based ONNX exporter"):
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy")
    assert not (tmp_path / "m.onnx").exists()


def test_auto_uses_only_torch_export(no_torchscript, small_net, parity, tmp_path, models):
    x = torch.randn(2, 4)
    compat.export(small_net, (x,), tmp_path / "m.onnx", input_names=["x"])
    assert compat.last_outcome().route == "dynamo"
    parity.check(tmp_path / "m.onnx", small_net, [x], ["x"])
    with pytest.raises(ExportFailed) as err:
        compat.export(models.TorchScriptOnly().eval(), (torch.rand(2, 4),), tmp_path / "t.onnx")
    assert list(err.value.failures) == ["dynamo"]
    # a data-dependent branch needs no TorchScript exporter: the torch.export route bakes it
    with pytest.warns(compat.LegacyExportWarning, match="ONX003"):
        compat.export(models.DataDependent().eval(), (torch.rand(2, 4),), tmp_path / "d.onnx")
    assert compat.last_outcome().route == "dynamo" and compat.last_outcome().baked
