"""verify-migration explains what it finds: unseeded weights are named as the cause of a
difference, a script that edits its own model file after the export (yolov5 adds metadata) is
compared as it left the file and is no "overwrite", and "same" needs onnxruntime to have run
both models. Real exports, real onnxruntime."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import onnx
import pytest
import warm_python  # tests/helpers

from compat.tools import verify_migration

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "helpers" / "run_scripts.py"
HEAD = '''\
import sys
import onnx
import torch

torch.seed()  # as after other random work in a real script: no fixed seed for the model
unseeded = torch.nn.Linear(4, 3).eval()  # new weights each run
torch.manual_seed(0)
seeded = torch.nn.Linear(4, 3).eval()
x = torch.randn(2, 4)
'''
TAIL = '''
m = onnx.load(sys.argv[2])  # yolov5's export.py: re-open the file, add metadata, save it
m.metadata_props.add(key="stride", value="32")
onnx.save(m, sys.argv[2])
'''
OLD = HEAD + '''
torch.onnx.export(unseeded, (x,), sys.argv[1], input_names=["x"], dynamic_axes={"x": {0: "n"}})
torch.onnx.export(seeded, (x,), sys.argv[2], input_names=["x"], dynamic_axes={"x": {0: "n"}})
''' + TAIL
NEW = HEAD + '''
torch.onnx.export(unseeded, (x,), sys.argv[1], input_names=["x"], dynamic_shapes={"input": {0: "n"}},
                  dynamo=True, external_data=False)
torch.onnx.export(seeded, (x,), sys.argv[2], input_names=["x"], dynamic_shapes={"input": {0: "n"}},
                  dynamo=True, external_data=False)
''' + TAIL


def _compat(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return warm_python.run([sys.executable, "-W", "ignore", "-m", "compat", *args], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("explain")
    for name, text in (("old", OLD), ("new", NEW)):
        (base / name).mkdir()
        (base / name / "pyproject.toml").write_text(f"[project]\nname = '{name}'\nversion = '0'\n")
        (base / name / "export.py").write_text(text)
    shim = _compat("run", "-q", "--ledger", str(base / "old.jsonl"), "export.py",
                   str(base / "old-u.onnx"), str(base / "old-s.onnx"), cwd=base / "old")
    assert shim.returncode == 0, shim.stderr[-3000:]
    spec = [{"script": str(base / "new" / "export.py"),
             "argv": [str(base / "new-u.onnx"), str(base / "new-s.onnx")], "ledger": str(base / "new.jsonl")}]
    (base / "spec.json").write_text(json.dumps(spec))
    observed = _compat("run", "-q", "--observe", "--ledger", str(base / "other.jsonl"), str(DRIVER),
                       str(base / "spec.json"), cwd=base)
    assert observed.returncode == 0, observed.stderr[-3000:]
    return base


def test_unseeded_weights_and_a_script_that_edits_its_file(runs, capsys):
    rc = verify_migration.main([str(runs / "old.jsonl"), str(runs / "new.jsonl"), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    unseeded, edited = data["rows"]
    assert unseeded["verdict"] == "differs"
    assert unseeded["differences"][0] == "weights differ between runs: the script does not seed its model"
    assert edited["verdict"] == "same", edited  # compared the files the scripts left
    assert any("changed" in n and "compared the file the script left" in n for n in edited["notes"])
    assert not any("overwritten" in d for d in edited["differences"] + edited["notes"])
    assert rc == 1


def test_a_real_overwrite_is_named(runs, tmp_path, capsys):
    recs = [json.loads(line) for line in (runs / "old.jsonl").read_text().splitlines()]
    # a later export of the same run writes the first call's file
    clobber = {**recs[1], "output": recs[0]["output"],
               "output_files": {**recs[1]["output_files"], "model": {**recs[0]["output_files"]["model"]}},
               "call_site": recs[1]["call_site"].rsplit(":", 1)[0] + ":99"}
    ledger = tmp_path / "old.jsonl"
    ledger.write_text("".join(json.dumps(r) + "\n" for r in (recs[0], clobber)))
    sites = verify_migration.read_sites(str(ledger))
    (first,) = [r for s in sites.values() for site in s.values() for r in site.records
                if r["call_site"] == recs[0]["call_site"]]
    assert first["_overwritten_by"].endswith(":99")


def test_same_needs_onnxruntime_to_run_both(tmp_path):
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    node = onnx.helper.make_node("NoSuchOp", ["x"], ["y"], domain="custom.domain")
    model = onnx.helper.make_model(onnx.helper.make_graph([node], "g", [x], [y]),
                                   opset_imports=[onnx.helper.make_opsetid("", 18),
                                                  onnx.helper.make_opsetid("custom.domain", 1)])
    for name in ("a.onnx", "b.onnx"):
        onnx.save(model, str(tmp_path / name))
    differences, notes, ran = verify_migration.compare_model_files(
        str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), [])
    assert not differences and not ran and any("onnxruntime cannot load" in n for n in notes)


def test_train_mode_dropout_is_named(tmp_path):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).train()
    for name in ("a.onnx", "b.onnx"):
        torch.onnx.export(model, (torch.randn(2, 4),), str(tmp_path / name), dynamo=True,
                          external_data=False)
    why = verify_migration._why_differs(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"))
    assert why == ["outputs are random: the model exports train-mode Dropout (call model.eval() "
                   "before the export)"]
