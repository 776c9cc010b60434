"""``compat check MODEL.onnx`` on models exported by real torch, and on broken copies of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import onnx
import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm
import torch
from onnx import helper

import compat
from compat.tools import check

ROOT = Path(__file__).resolve().parents[2]


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLP exported on the torch.export route with a named dynamic batch axis."""
    path = tmp_path_factory.mktemp("check") / "mlp.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(_mlp(), (torch.randn(2, 4),), str(path), input_names=["x"],
                      dynamic_axes={"x": {0: "batch"}}, route="dynamo")
    return path


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return warm_python.run([sys.executable, "-m", "compat", "check", *args], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=600, check=False)


def test_clean_model_reports_its_structure_and_exits_0(exported: Path) -> None:
    report = check.check(str(exported))
    assert report["problems"] == []
    assert report["opsets"]["ai.onnx"] >= 18
    assert report["ir_version"] >= 8
    (x,) = report["inputs"]
    assert (x["name"], x["type"], x["dims"]) == ("x", "float32", ["batch", 4])
    (y,) = report["outputs"]
    assert y["dims"][1] == 3 and isinstance(y["dims"][0], str)  # the batch dim_param carries through
    assert report["external_data"] == {"tensors": 0, "files": []}
    assert report["custom_domains"] == [] and report["custom_nodes"] == []
    assert report["checker"]["ok"] and report["shape_inference"]["ok"]
    smoke = report["smoke_run"]
    assert smoke["ok"] and smoke["inputs"] == [{"name": "x", "shape": [2, 4], "type": "float32"}]
    assert smoke["outputs"][0]["shape"] == [2, 3]
    assert check.main([str(exported)]) == 0


def test_cli_text_and_json(exported: Path) -> None:
    text = _run(str(exported), "--dim-size", "5", cwd=exported.parent)
    assert text.returncode == 0, text.stderr
    assert "x  float32  [batch, 4]" in text.stdout
    assert "onnx checker:   ok" in text.stdout and "strict shape inference: ok" in text.stdout
    assert "symbolic dims = 5" in text.stdout and "[5, 3]" in text.stdout
    assert text.stdout.rstrip().endswith("no problems found")
    js = _run(str(exported), "--format", "json", cwd=exported.parent)
    assert js.returncode == 0, js.stderr
    data = json.loads(js.stdout)
    assert data["path"] == str(exported) and data["problems"] == []
    assert data["smoke_run"]["outputs"][0]["type"] == "float32"


def test_external_data_present_then_missing(exported: Path, tmp_path: Path) -> None:
    model = onnx.load(str(exported))
    path = tmp_path / "ext.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="ext.onnx.data",
                    size_threshold=0)
    report = check.check(str(path))
    assert report["problems"] == []
    (f,) = report["external_data"]["files"]
    assert f["location"] == "ext.onnx.data" and f["exists"]
    assert report["external_data"]["tensors"] == len(model.graph.initializer)
    assert f["size"] == os.path.getsize(tmp_path / "ext.onnx.data") >= f["bytes_needed"] > 0

    (tmp_path / "ext.onnx.data").unlink()
    run = _run(str(path), cwd=tmp_path)
    assert run.returncode == 1
    assert "ext.onnx.data  (MISSING)" in run.stdout
    assert "external data file 'ext.onnx.data' is missing" in run.stdout
    assert "onnxruntime run: FAILED" in run.stdout  # the weights cannot be loaded either


def test_truncated_external_data_is_a_problem(exported: Path, tmp_path: Path) -> None:
    path = tmp_path / "cut.onnx"
    onnx.save_model(onnx.load(str(exported)), str(path), save_as_external_data=True,
                    location="cut.data", size_threshold=0)
    data = tmp_path / "cut.data"
    data.write_bytes(data.read_bytes()[:10])
    problems = check.check(str(path))["problems"]
    assert any("'cut.data' has 10 bytes, its tensors need" in p for p in problems), problems


def test_invalid_node_fails_checker_and_exits_1(exported: Path, tmp_path: Path) -> None:
    model = onnx.load(str(exported))
    out = model.graph.output[0].name
    model.graph.node.append(helper.make_node("NoSuchOperator", [out], ["bogus"]))
    path = tmp_path / "bad.onnx"
    onnx.save_model(model, str(path))
    report = check.check(str(path))
    assert not report["checker"]["ok"]
    assert "NoSuchOperator" in report["checker"]["error"]
    assert any(p.startswith("onnx checker:") and "NoSuchOperator" in p for p in report["problems"])
    assert check.main([str(path)]) == 1


def test_custom_domain_node_is_listed_and_its_run_fails(exported: Path, tmp_path: Path) -> None:
    model = onnx.load(str(exported))
    out = model.graph.output[0]
    node = helper.make_node("MyRelu", [out.name], ["custom_out"], domain="com.example")
    model.graph.node.append(node)
    model.graph.output.append(helper.make_tensor_value_info("custom_out", onnx.TensorProto.FLOAT, None))
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    path = tmp_path / "custom.onnx"
    onnx.save_model(model, str(path))
    report = check.check(str(path))
    assert report["opsets"]["com.example"] == 1
    assert report["custom_domains"] == ["com.example"]
    assert report["custom_nodes"] == [{"domain": "com.example", "op_type": "MyRelu", "count": 1,
                                       "onnxruntime_builtin": False}]
    assert not report["smoke_run"]["ok"] and "MyRelu" in report["smoke_run"]["error"]
    assert any(p.startswith("onnxruntime:") for p in report["problems"])


def test_not_a_model_and_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\xffnot a protobuf at all" * 10)
    assert check.main([str(junk)]) == 1
    assert "not an ONNX model" in capsys.readouterr().out
    assert check.main([str(tmp_path / "missing.onnx")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert check.main([]) == 2
    assert check.main([str(junk), "--dim-size", "0"]) == 2
