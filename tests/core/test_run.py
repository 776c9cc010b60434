"""`python -m compat run` runs a script as `python script.py` would, with the shim installed."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm
import torch

from compat.catalog import DRAFT_DEFERRED
from compat.installed import torch_caps

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(args, cwd, env_extra=None, timeout=600):
    env = dict(os.environ)
    env.update(env_extra or {})
    return warm_python.run([sys.executable, "-m", "compat", "run", *args], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=timeout)


def test_fidelity_argv_path_main_exit_code(tmp_path):
    helper = tmp_path / "helper_mod.py"
    helper.write_text("VALUE = 41\n")
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import sys, json, torch
        import helper_mod  # found through sys.path[0], the script's folder
        print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__, "file": __file__,
                          "patched": torch.onnx.export.__module__, "v": helper_mod.VALUE + 1}))
        sys.exit(int(sys.argv[2]))
    """))
    out = run(["script.py", "--flag", "3"], cwd=tmp_path)  # as typed: a relative path
    assert out.returncode == 3, out.stderr
    info = json.loads(out.stdout.strip().splitlines()[0])
    file_seen = info.pop("file")
    assert info == {"argv": ["script.py", "--flag", "3"], "path0": str(tmp_path), "name": "__main__",
                    "patched": "compat.tools.patching", "v": 42}
    plain = warm_python.run([sys.executable, "script.py", "--flag", "3"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    plain_info = json.loads(plain.stdout.strip().splitlines()[0])
    assert plain.returncode == 3 and plain_info["argv"] == info["argv"]
    assert plain_info["path0"] == info["path0"] and plain_info["name"] == info["name"]
    assert plain_info["file"] == file_seen == str(script)


def test_uncaught_exception_exits_1_with_traceback(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("raise RuntimeError('boom')\n")
    out = run([str(script)], cwd=tmp_path)
    assert out.returncode == 1
    assert "RuntimeError: boom" in out.stderr and "Traceback" in out.stderr


def test_missing_script_is_usage_error(tmp_path):
    out = run([str(tmp_path / "nope.py")], cwd=tmp_path)
    assert out.returncode == 2 and "nope.py" in out.stderr


def _example_namespace(script: str) -> dict:
    """The example script's definitions (everything before it reads its arguments)."""
    ns: dict = {}
    src = (EXAMPLES / script).read_text().split("out_dir =")[0]
    exec(compile(src, script, "exec"), ns)
    return ns


def _session(path):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _ledger(path):
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines()]


@pytest.mark.slow
def test_torch_1x_script_runs_unchanged(tmp_path):
    book = tmp_path / "ledger.jsonl"
    out = run(["--ledger", str(book), str(EXAMPLES / "legacy_1x_export.py"), str(tmp_path)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    rec = _ledger(book)[-1]
    assert rec["status"] == "ok"
    assert {"ONX206", "ONX201", "ONX203", "ONX204"} <= set(rec["warnings"])
    # the script's own model, rebuilt with its seed, against the exported file
    ns = _example_namespace("legacy_1x_export.py")
    torch.manual_seed(0)
    model = ns["TinyClassifier"]().eval()
    sess = _session(tmp_path / "classifier.onnx")
    assert [i.name for i in sess.get_inputs()] == ["image"]
    for batch in (1, 3):
        x = torch.randn(batch, 3, 32, 32)
        got = sess.run(None, {"image": x.numpy()})[0]
        np.testing.assert_allclose(got, model(x).detach().numpy(), atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_data_dependent_branch_script_is_baked_and_says_where(tmp_path):
    """At opset 17 with fixed shapes auto tries the TorchScript route before the draft capture
    (both bake the example's branch), or, without that exporter, draft-captures; either way the
    bake is warned (ONX003) and recorded."""
    book = tmp_path / "ledger.jsonl"
    out = run(["--ledger", str(book), str(EXAMPLES / "control_flow_export.py"), str(tmp_path)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    rec = _ledger(book)[-1]
    if torch_caps.has_torchscript_exporter():
        assert rec["route_taken"] == "legacy" and DRAFT_DEFERRED in rec["fallback_reason"]
    else:
        assert rec["route_taken"] == "dynamo" and rec["fallback_reason"] is None
    (baked,) = rec["baked"]
    assert baked["file"].endswith("control_flow_export.py") and baked["source"].startswith("if h.sum() > 0:")
    assert "ONX003" in rec["warnings"] and "ONX003 branch baked" in out.stderr
    assert f"route={rec['route_taken']}" in out.stderr  # the exit summary says what happened
    ns = _example_namespace("control_flow_export.py")
    torch.manual_seed(1)
    model = ns["Gate"]().eval()
    with torch.no_grad():
        model.proj.bias.fill_(1.0)
    x = torch.rand(2, 6)
    got = _session(tmp_path / "gate.onnx").run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(got, model(x).detach().numpy(), atol=1e-5)


@pytest.mark.slow
def test_deploy_script_ships_a_self_contained_model(tmp_path):
    out = run([str(EXAMPLES / "deploy_single_file.py"), str(tmp_path)], cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    deployed = tmp_path / "deploy" / "model.onnx"
    assert os.listdir(tmp_path / "deploy") == ["model.onnx"]
    proto = onnx.load(str(deployed))  # loads without any external data file
    assert all(t.data_location != onnx.TensorProto.EXTERNAL for t in proto.graph.initializer)
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    sess = _session(deployed)
    for batch in (4, 1, 9):
        x = torch.randn(batch, 16)
        got = sess.run(None, {"features": x.numpy()})[0]
        np.testing.assert_allclose(got, model(x).detach().numpy(), atol=1e-5, rtol=1e-4)
