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
    with pytest.raises(RouteUnavailable, match="TorchScript route is not available: .*TorchScript-based ONNX exporter"):
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy")
    assert not (tmp_path / "m.onnx").exists()


def test_auto_uses_only_torch_export(no_torchscript, small_net, parity, tmp_path, models):
    x = torch.randn(2, 4)
    compat.export(small_net, (x,), tmp_path / "m.onnx", input_names=["x"])
    assert compat.last_outcome().route == "dynamo"
    parity.check(tmp_path / "m.onnx", small_net, [x], ["x"])
    with pytest.raises(ExportFailed) as err:
        compat.export(models.TorchScriptOnly().eval(), (torch.rand(2, 4),), tmp_path / "t.onnx")
    # the TorchScript fallback was not tried, and the error says why
    assert list(err.value.failures) == ["dynamo", "legacy"]
    assert err.value.failures["legacy"].reason == "route unavailable"
    assert "not tried" in str(err.value)
    # a data-dependent branch needs no TorchScript exporter: the torch.export route bakes it
    with pytest.warns(compat.LegacyExportWarning, match="ONX003"):
        compat.export(models.DataDependent().eval(), (torch.rand(2, 4),), tmp_path / "d.onnx")
    assert compat.last_outcome().route == "dynamo" and compat.last_outcome().baked


def test_auto_refuses_an_option_only_torchscript_honours_before_exporting(no_torchscript, small_net, tmp_path):
    with pytest.raises(RouteUnavailable, match="ONX106.*Drop the option"):
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "m.onnx",
                      export_modules_as_functions=True)
    assert not (tmp_path / "m.onnx").exists()


def test_hide_variable_is_the_probe_switch(monkeypatch, small_net, tmp_path):
    """TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT=1 hides the exporter and what belongs to it, and the
    route's error names the variable (make test-no-torchscript runs the suite so)."""
    from compat.installed import torch_api

    monkeypatch.setenv(torch_caps.ENV_HIDE_TORCHSCRIPT, "1")
    assert not torch_caps.has_torchscript_exporter()
    assert not torch_caps.has_legacy_symbolic_registry()
    assert not torch_caps.has_legacy_graph_context()
    assert torch_api.torchscript_export() is None and legacy.available() is False
    with pytest.raises(RouteUnavailable, match=torch_caps.ENV_HIDE_TORCHSCRIPT):
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy")
    assert not (tmp_path / "m.onnx").exists()
    monkeypatch.setenv(torch_caps.ENV_HIDE_TORCHSCRIPT, "0")
    assert torch_caps.has_torchscript_exporter() is torch_caps._ships_torchscript_exporter()


def test_observe_refuses_a_dynamo_false_call_while_hidden(monkeypatch, small_net, tmp_path):
    """``compat run --observe`` passes calls to plain torch: with the exporter hidden, a
    ``dynamo=False`` call fails as on a torch without it, recorded; ``dynamo=True`` still runs."""
    import json

    from compat.tools import observe

    ledger = tmp_path / "L.jsonl"
    monkeypatch.setenv(torch_caps.ENV_HIDE_TORCHSCRIPT, "1")
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(ledger))
    x = torch.randn(2, 4)
    observe.install()
    try:
        with pytest.raises(RouteUnavailable, match=torch_caps.ENV_HIDE_TORCHSCRIPT):
            torch.onnx.export(small_net, (x,), str(tmp_path / "ts.onnx"), dynamo=False)
        torch.onnx.export(small_net, (x,), str(tmp_path / "d.onnx"), dynamo=True, external_data=False)
    finally:
        observe.uninstall()
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [r["status"] for r in records] == ["failed", "ok"]
    assert not (tmp_path / "ts.onnx").exists() and (tmp_path / "d.onnx").exists()


def test_every_test_listed_as_needing_torchscript_exists():
    """helpers/no_torchscript.NEEDS_TORCHSCRIPT names tests by id: a renamed one must be renamed there."""
    from pathlib import Path

    import no_torchscript

    root = Path(__file__).parents[2]
    for nodeid in no_torchscript.NEEDS_TORCHSCRIPT:
        path, name = nodeid.split("::")
        assert f"def {name.split('[')[0]}(" in (root / path).read_text(), nodeid
