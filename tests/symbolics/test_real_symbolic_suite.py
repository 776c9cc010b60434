"""The real third-party symbolics suite (issue 31, ``benchmarks/real_symbolics``): each case,
exported on the torch.export route in this process's mode (TorchScript present, or hidden in
``make test-no-torchscript``), has the TorchScript exporter's custom nodes, op kinds and
onnxruntime values, or fails naming its symbolic; never a silent skip.

The reference is the TorchScript exporter's model of every case, made once in a child process
where the exporter is not hidden (a golden model, as the TorchScript exporter's own output: the
route under test never calls it). Cases whose package or pinned source wheel is absent skip
with the reason (``make symbolic-sources`` downloads the wheels).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

from real_symbolics.cases import CASES
from real_symbolics.harness import export, judge

pytestmark = pytest.mark.slow

#: cases the TorchScript exporter itself cannot export on current torch (their forward or
#: symbolic trips it): no reference, so they are left out, as bench_real_symbolics counts them
NO_REFERENCE = {"mmdeploy.onnx_nms", "mmdeploy.onnx_nms_match", "mmdeploy.onnx_nms_rotated"}


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("torchscript-reference")
    env = {k: v for k, v in os.environ.items() if k != "TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT"}
    names = [c.name for c in CASES if c.name not in NO_REFERENCE and not c.missing()]
    subprocess.run([sys.executable, "-m", "real_symbolics.harness", "--mode", "torchscript",
                    "--out", str(out), "--case", *names], cwd=BENCH, env=env, check=False,
                   capture_output=True, timeout=900)
    results = out / "results.json"
    return out, json.loads(results.read_text()) if results.exists() else {}


@pytest.mark.parametrize("case", [c for c in CASES if c.name not in NO_REFERENCE], ids=lambda c: c.name)
def test_real_symbolic_applied_as_torchscript_exports_it(case, references, tmp_path):
    missing = case.missing()
    if missing:
        pytest.skip(missing)
    ref_dir, refs = references
    ref = refs.get(case.name)
    if ref is None or not ref.get("ok"):
        pytest.skip(f"no TorchScript reference for {case.name}: {ref and ref.get('error')}")
    ours = export(case, "dynamo", tmp_path / "ours.onnx")
    verdict = judge(case, ref, ours, ref_dir / f"{case.name}.onnx", tmp_path / "ours.onnx")
    assert verdict["verdict"] == "match", verdict["reason"]


#: the route's outcome where the TorchScript exporter has none: the symbolic's node, or a refusal
BEYOND_REFERENCE = {
    "mmdeploy.onnx_nms": ("", "NonMaxSuppression"),
    "mmdeploy.onnx_nms_rotated": ("mmdeploy", "NMSRotated"),
    "mmdeploy.onnx_nms_match": None,  # a data-dependent forward: refused naming the symbolic
}


@pytest.mark.parametrize("name", sorted(BEYOND_REFERENCE))
def test_cases_the_torchscript_exporter_fails_export_or_are_refused_by_name(name, tmp_path):
    import onnx

    case = next(c for c in CASES if c.name == name)
    missing = case.missing()
    if missing:
        pytest.skip(missing)
    ours = export(case, "dynamo", tmp_path / "ours.onnx")
    if BEYOND_REFERENCE[name] is None:
        assert not ours["ok"] and "ONNXNMSMatchOp.symbolic" in ours["error"], ours
        return
    assert ours["ok"], ours
    nodes = {(n.domain, n.op_type) for n in onnx.load(str(tmp_path / "ours.onnx")).graph.node}
    assert BEYOND_REFERENCE[name] in nodes



@pytest.mark.parametrize("name", ["mmdeploy.layer_norm", "onnxruntime.gelu"])
def test_the_judge_calls_an_export_without_the_symbolic_a_silent_skip(name, references, tmp_path):
    """The verdicts mean something: the same model exported without its registration (torch's
    own translation: LayerNormalization, an Erf-based Gelu) is judged a silent skip."""
    import warnings

    import compat

    case = next(c for c in CASES if c.name == name)
    if case.missing():
        pytest.skip(case.missing())
    ref_dir, refs = references
    if not refs.get(name, {}).get("ok"):
        pytest.skip(f"no TorchScript reference for {name}")
    setup = case.build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(setup.model.eval(), setup.args, str(tmp_path / "plain.onnx"), route="dynamo",
                      opset_version=setup.opset)
    verdict = judge(case, refs[name], {"ok": True, "names": []}, ref_dir / f"{name}.onnx",
                    tmp_path / "plain.onnx")
    assert verdict["verdict"] == "silent", verdict
