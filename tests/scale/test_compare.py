"""compat.compare on real models: both routes exported, run in onnxruntime, checked against eager."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from scale_models import TorchScriptOnly, mlp, transformer

import compat
from compat.installed import torch_caps
from compat.tools.parity import ParityReport

AXES = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}


def _quiet_compare(model, args, **options) -> ParityReport:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compat.compare(model, args, **options)


@pytest.fixture(scope="module")
def transformer_report() -> tuple[ParityReport, torch.nn.Module]:
    model = transformer().train()  # compare must evaluate in eval mode and restore train mode
    report = _quiet_compare(model, (torch.randn(2, 5, 16),), input_names=["x"], output_names=["y"],
                            dynamic_axes=AXES)
    return report, model


@pytest.fixture(scope="module")
def mlp_report() -> ParityReport:
    return _quiet_compare(mlp(), (torch.randn(2, 4),), input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": [0], "y": [0]})


def test_routes_that_agree_are_equivalent(mlp_report: ParityReport) -> None:
    r = mlp_report
    assert r.verdict == "equivalent", r.differences
    assert r.differences == []
    for route in ("legacy", "dynamo"):
        res = r.routes[route]
        assert res.ok and res.error is None
        assert res.nodes and res.file_bytes and res.export_s and res.latency_ms
        assert [i["name"] for i in res.inputs] == ["x"] and [o["name"] for o in res.outputs] == ["y"]
        assert res.inputs[0]["dtype"] == "float32"
        assert res.inputs[0]["dims"] == ["x_dynamic_axes_1", 4]
        assert "" in res.opsets
        assert [c.probe for c in res.checks] == ["example inputs", "x_dynamic_axes_1=3"]
        assert all(c.status == "match" for c in res.checks)
    assert isinstance(compat.ParityReport, type) and isinstance(r, compat.ParityReport)


def test_transformer_differs_at_other_sequence_length(transformer_report) -> None:
    r, _ = transformer_report
    assert r.verdict == "differs"
    assert r.dynamic_axes == {"batch": 2, "seq": 5}
    legacy, dyn = r.routes["legacy"], r.routes["dynamo"]
    assert legacy.ok and dyn.ok
    assert all(c.status == "match" for c in dyn.checks), dyn.checks
    status = {c.probe: c.status for c in legacy.checks}
    assert status["example inputs"] == "match"
    assert status["seq=6"] == "error"  # the TorchScript route baked seq=5 into a Reshape
    assert status["batch=4, seq=7"] == "error"
    assert any("legacy" in d and "seq=6" in d and "onnxruntime" in d for d in r.differences), r.differences
    assert not any(d.startswith("dynamo") for d in r.differences)


def test_compare_restores_mode_and_serialises(transformer_report) -> None:
    r, model = transformer_report
    assert model.training  # eager ran in eval; the caller's mode is back
    data = json.loads(json.dumps(r.to_dict()))
    assert data["verdict"] == "differs"
    assert data["routes"]["legacy"]["checks"][2]["status"] == "error"
    md = r.to_markdown()
    assert "**differs**" in md and "legacy (TorchScript)" in md and "seq=6" in md
    assert "| numerics: example inputs |" in md
    summary = r.summary()
    assert summary["routes"]["legacy"]["failed_probes"] == ["seq=6", "batch=4, seq=7"]
    assert summary["routes"]["dynamo"]["failed_probes"] == []


def test_one_route_only() -> None:
    r = _quiet_compare(TorchScriptOnly(), (torch.randn(2, 3),))
    assert r.verdict == "one-route-only"
    assert r.routes["legacy"].ok and not r.routes["dynamo"].ok
    assert "NotImplementedError" in r.routes["dynamo"].error
    assert "only the legacy route exports" in r.differences[0]
    assert "**failed**" in r.to_markdown()


def test_tolerances_are_parameters(mlp_report: ParityReport) -> None:
    worst = max(c.max_abs_diff for c in mlp_report.routes["dynamo"].checks)
    assert worst > 0
    r = _quiet_compare(mlp(), (torch.randn(2, 4),), tolerances={"float32": (0.0, worst / 1e6)},
                       probes=[{"x_dynamic_axes_1": 5}], input_names=["x"], dynamic_axes={"x": [0]},
                       latency_runs=0)
    assert r.verdict == "differs"
    assert any("differs from eager torch" in d for d in r.differences)
    assert r.probes[1].label == "x_dynamic_axes_1=5"
    assert r.routes["legacy"].latency_ms is None


def test_dynamic_shapes_probes_with_integer_inputs() -> None:
    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(10, 4)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.emb(ids).sum(1)

    ids = torch.tensor([[1, 9, 3], [4, 5, 6]])
    batch = torch.export.Dim("batch")
    r = _quiet_compare(Embed(), (ids,), dynamic_shapes={"ids": {0: batch}}, latency_runs=0)
    # the TorchScript route gets the same axes as dynamic_axes
    assert r.verdict == "equivalent", r.differences
    assert r.dynamic_axes == {"batch": 2}
    for route in ("dynamo", "legacy"):
        assert [(c.probe, c.status) for c in r.routes[route].checks] == [
            ("example inputs", "match"), ("batch=3", "match")]


def test_generated_names_alone_are_not_a_difference() -> None:
    """Without input_names/output_names each exporter names the graph's values its own way."""
    report = _quiet_compare(mlp(), (torch.randn(2, 4),))
    assert report.verdict == "equivalent", report.differences


def test_dynamic_shapes_are_probed_on_both_routes() -> None:
    from torch.export import Dim

    report = _quiet_compare(transformer(), (torch.randn(2, 5, 16),),
                            dynamic_shapes={"src": {0: Dim("batch"), 1: Dim("seq")}})
    if torch_caps.at_least("2.10"):
        assert report.verdict == "differs"
    else:  # torch 2.9's torch.export specializes both axes of nn.TransformerEncoder
        assert report.verdict == "one-route-only"
        assert any("dynamo failed: dynamic shape constraints violated" in d for d in report.differences)
    assert any("legacy route's model fails in onnxruntime at seq=6" in d for d in report.differences)


def test_probe_naming_no_axis_is_an_error() -> None:
    with pytest.raises(compat.CompatError, match="nope"):
        compat.compare(mlp(), (torch.randn(2, 4),), input_names=["x"], dynamic_axes={"x": {0: "b"}},
                       probes=[{"nope": 3}])
