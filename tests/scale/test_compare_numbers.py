"""compare reports numbers: max abs/rel difference per output and probe (each route against eager,
the routes against each other), dim-label differences as notes, full reasons, what it cost.

The expected numbers are computed here from the models compare saved (``workdir``), run in
onnxruntime, against eager torch."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch
from scale_models import mlp

import compat
from compat import request
from compat.request import normalize
from compat.tools import compare_hook, parity, report, report_html
from compat.tools.parity import ParityReport, RouteResult, diff_stats


def _quiet_compare(model: Any, args: Any, **options: Any) -> ParityReport:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compat.compare(model, args, **options)


def _run(path: Path, *inputs: torch.Tensor) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: t.numpy() for i, t in zip(sess.get_inputs(), inputs)})


def _expected(got: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    nonzero = ref != 0
    return float(diff.max()), float((diff[nonzero] / np.abs(ref[nonzero].astype(np.float64))).max())


def _row(r: ParityReport, probe: str, output: int = 0) -> dict[str, Any]:
    rows = [n for n in r.numbers if n["probe"] == probe and n["output"] == output]
    assert len(rows) == 1, r.numbers
    return rows[0]


class BatchNormNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(4)
        with torch.no_grad():
            self.bn.running_mean += 1.0  # eval (running stats) and batch stats then disagree

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


class Detect(torch.nn.Module):
    """yolov5's Detect head cut down: the output's last dim is a static 7, which the TorchScript
    route leaves as a generated label (``Concatoutput0_dim_2``) under dynamic height/width."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 14, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        bs, _, ny, nx = y.shape
        y = y.view(bs, 2, 7, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        xy, wh, conf = y.sigmoid().split((2, 2, 3), 4)
        y = torch.cat((xy * 2, wh**2, conf), 4)
        return torch.cat([y.view(bs, -1, 7)], 1)


def test_agreeing_routes_give_numbers_near_zero(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, x = mlp().eval(), torch.randn(2, 4)
    r = _quiet_compare(model, (x,), input_names=["x"], output_names=["y"],
                       dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, workdir=tmp_path, latency_runs=0)
    assert r.verdict == "equivalent", r.differences
    assert r.notes == []
    assert [(n["probe"], n["output"]) for n in r.numbers] == [("example inputs", 0), ("batch=3", 0)]
    row = _row(r, "example inputs")
    assert row["name"] == "y" and row["shape"] == [2, 3] and row["size"] == 6
    legacy, dyn = _run(tmp_path / "legacy.onnx", x)[0], _run(tmp_path / "dynamo.onnx", x)[0]
    with torch.no_grad():
        eager = model(x).numpy()
    assert row["legacy_vs_eager"]["max_abs"] == pytest.approx(_expected(legacy, eager)[0], abs=1e-9)
    assert row["dynamo_vs_eager"]["max_abs"] == pytest.approx(_expected(dyn, eager)[0], abs=1e-9)
    assert row["legacy_vs_dynamo"]["max_abs"] == pytest.approx(np.abs(legacy - dyn).max(), abs=1e-9)
    for pair in parity.PAIRS:
        assert _row(r, "batch=3")[pair]["max_abs"] < 1e-5
        assert row[pair]["max_rel"] is not None and row[pair]["max_rel"] < 1e-4
    check = r.routes["legacy"].checks[0]
    assert check.max_rel_diff == pytest.approx(row["legacy_vs_eager"]["max_rel"])
    assert check.outputs[0]["shape"] == [2, 3]
    assert r.compare_s is not None and r.compare_s >= r.routes["legacy"].export_s
    summary = json.loads(json.dumps(r.summary()))
    assert summary["numbers"][0]["legacy_vs_dynamo"]["max_abs"] < 1e-5
    assert summary["compare_s"] > 0
    assert "legacy vs dynamo" in r.to_markdown()


def test_numeric_difference_is_differs_with_the_real_numbers(tmp_path: Path) -> None:
    """training=TRAINING: both routes export BatchNorm with batch statistics; eager (compare runs
    it in eval mode) uses the running ones."""
    torch.manual_seed(0)
    model, x = BatchNormNet(), torch.randn(3, 4)
    r = _quiet_compare(model, (x,), training=torch.onnx.TrainingMode.TRAINING, workdir=tmp_path,
                       latency_runs=0)
    assert r.verdict == "differs"
    with torch.no_grad():
        eager = model.eval()(x).numpy()
    row = _row(r, "example inputs")
    for route in ("legacy", "dynamo"):
        got = _run(tmp_path / f"{route}.onnx", x)[0]
        want_abs, want_rel = _expected(got, eager)
        assert want_abs > 0.5  # a real difference, far beyond float32 tolerance
        assert row[f"{route}_vs_eager"]["max_abs"] == pytest.approx(want_abs, rel=1e-6)
        assert row[f"{route}_vs_eager"]["max_rel"] == pytest.approx(want_rel, rel=1e-6)
        assert any(d.startswith(f"{route} route's model differs from eager torch")
                   and f"max abs diff {want_abs:.3g}" in d and "max rel diff" in d for d in r.differences)
    # the two routes agree with each other
    assert row["legacy_vs_dynamo"]["max_abs"] < 1e-5


def test_dim_labels_only_are_a_note_not_differs() -> None:
    torch.manual_seed(0)
    r = _quiet_compare(Detect(), (torch.randn(1, 3, 4, 4),), input_names=["images"], output_names=["output0"],
                       dynamic_axes={"images": {0: "batch", 2: "height", 3: "width"},
                                     "output0": {0: "batch", 1: "anchors"}}, latency_runs=0)
    legacy_dims = r.routes["legacy"].outputs[0]["dims"]
    dynamo_dims = r.routes["dynamo"].outputs[0]["dims"]
    assert legacy_dims[2] != dynamo_dims[2] and 7 in (legacy_dims[2], dynamo_dims[2])  # the case itself
    assert r.verdict == "equivalent", r.differences
    assert r.differences == []
    assert len(r.notes) == 1 and "output 'output0' shape" in r.notes[0] and "labels" in r.notes[0]
    assert all(n["legacy_vs_dynamo"]["max_abs"] < 1e-5 for n in r.numbers)
    assert len({n["probe"] for n in r.numbers}) == len(r.probes) > 1
    assert r.summary()["notes"] == r.notes
    assert "**Notes** (no difference)" in r.to_markdown()
    # a note alone never makes a parity finding; with a difference the report pages show both
    summary = {**r.summary(), "verdict": "differs", "differences": ["output 0: max abs diff 1"]}
    data = report.build([{"call_site": "export.py:4", "model": "Detect", "status": "ok",
                          "route_taken": "dynamo", "parity": summary}])
    assert data["parity"]["by_verdict"] == {"differs": 1}
    assert "note: output 'output0' shape" in report.to_markdown(data)
    page = report_html.to_html(data)
    assert "note: output &#x27;output0&#x27; shape" in page or "note: output 'output0' shape" in page
    assert 'data-chart="parity" data-label="differs" data-value="1"' in page  # the verdict's bar


def test_static_sizes_that_differ_are_still_a_difference() -> None:
    a, b = RouteResult("legacy", "ok"), RouteResult("dynamo", "ok")
    a.outputs = [{"name": "y", "dtype": "float32", "dims": ["batch", 7]}]
    b.outputs = [{"name": "y", "dtype": "float32", "dims": ["batch", 8]}]
    diffs, notes = parity._interface_diffs(a, b, {})
    assert diffs == ["output 'y' shape: legacy [batch, 7], dynamo [batch, 8]"] and notes == []


def test_the_full_reason_is_kept() -> None:
    reason = "RuntimeError: " + " ".join(f"word{i}" for i in range(200))
    ok, failed = RouteResult("legacy", "ok"), RouteResult("dynamo", "failed", error=reason)
    verdict, diffs, _ = parity._verdict({"legacy": ok, "dynamo": failed}, [], {})
    assert verdict == "one-route-only"
    assert diffs[0].endswith(reason)  # no "…": the record holds all of it


def test_diff_stats() -> None:
    ref = np.array([1.0, 0.0, np.nan, np.inf, 4.0], dtype=np.float32)
    got = np.array([1.5, 0.25, np.nan, np.inf, 3.0], dtype=np.float32)
    assert diff_stats(got, ref) == {"max_abs": 1.0, "max_rel": 0.5}  # 0.25 at ref 0 counts only in abs
    assert diff_stats(np.array([np.nan, 1.0]), np.array([1.0, 1.0]))["nan_mismatches"] == 1
    assert diff_stats(np.array([True, False]), np.array([True, True]))["max_abs"] == 1.0
    assert diff_stats(np.zeros(0), np.zeros(0)) == {"max_abs": 0.0, "max_rel": None}


def test_the_record_says_what_compare_cost_and_the_table_where_the_full_text_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setenv(compare_hook.ENV_COMPARE, "1")
    monkeypatch.setattr(compare_hook, "results", [])
    req = normalize.normalize(BatchNormNet(), (torch.randn(3, 4),), None, training=torch.onnx.TrainingMode.TRAINING,
                              _call_site="export_bn.py:3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = compare_hook.maybe_compare(req, request.Outcome("dynamo", duration_s=0.5))
    assert summary is not None and summary["verdict"] == "differs"
    assert summary["export_s"] == 0.5 and summary["compare_s"] > 0
    assert summary["compare_ratio"] == pytest.approx(summary["compare_s"] / 0.5, abs=0.01)
    assert all(len(d) > 90 for d in summary["differences"])  # kept in full
    book = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    out = io.StringIO()
    compare_hook.print_parity_table(out)
    text = out.getvalue()
    assert "export_bn.py:3" in text and "differs" in text and "x export" in text and "…" in text
    assert f"the full texts are in the ledger {book}" in text
    # the report carries notes and the routes' largest difference
    record = {"call_site": "export_bn.py:3", "model": "BatchNormNet", "status": "ok",
              "route_taken": "dynamo", "parity": json.loads(json.dumps(summary))}
    data = report.build([record])
    assert data["parity"]["by_verdict"] == {"differs": 1}
    finding = data["parity"]["findings"][0]
    assert finding["compare_ratio"] == summary["compare_ratio"]
    assert finding["max_route_diff"] == compare_hook.worst_route_difference(summary) < 1e-5
    assert "max abs difference between the routes' models" in report.to_markdown(data)
