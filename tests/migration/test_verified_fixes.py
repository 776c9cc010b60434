"""Verified fixes: each legacy script, rewritten, runs with plain python and exports a model
whose inputs, outputs and onnxruntime numerics match eager torch (and, once ``compat.tools.runner``
exists, the original script run under the shim)."""

import importlib.util
import json
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm

from migration.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).parent / "fixtures" / "legacy_scripts"
# script -> (extra eager kwargs, expected output count)
CASES = {
    "dynamic_axes_alias.py": {},
    "removed_options.py": {},
    "dynamo_export.py": {"scale": 2.0},
}


def _ort(path, inputs):
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = {n: t.numpy() for n, t in zip(names, inputs)}
    return model, names, sess.run(None, feeds)


def _run(args, cwd):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return warm_python.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(CASES))
def test_rewritten_script_matches_eager(script, tmp_path):
    import torch

    work = tmp_path / script
    shutil.copy(SCRIPTS / script, work)
    assert main(["--write", "--unsafe-fixes", str(work)]) == 0
    assert main(["--check", str(work)]) == 0
    out = tmp_path / "model.onnx"
    proc = _run([str(work), str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ns = runpy.run_path(str(work), run_name="verify")
    model = ns["Net"]()
    torch.manual_seed(0)
    model = ns["Net"]().eval()
    inputs = ns["make_inputs"]()
    with torch.no_grad():
        expected = model(*inputs, **CASES[script])
    expected = expected if isinstance(expected, tuple) else (expected,)
    _, names, got = _ort(out, inputs)
    assert len(names) == len(inputs) and len(got) == len(expected)
    for e, g in zip(expected, got):
        assert e.shape == tuple(g.shape)
        assert abs(e.numpy() - g).max() < 1e-4
    if script == "dynamic_axes_alias.py":  # named dynamic batch survives, other batch sizes run
        _, _, got3 = _ort(out, [torch.randn(5, 4), torch.randn(5, 3)])
        assert got3[0].shape == (5, 3)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(CASES))
def test_original_under_shim_matches_rewritten(script, tmp_path):
    if importlib.util.find_spec("compat.tools.runner") is None:
        pytest.skip("compat.tools.runner (python -m compat run) is not built yet")
    shutil.copy(SCRIPTS / script, tmp_path / "orig.py")
    shutil.copy(SCRIPTS / script, tmp_path / "new.py")
    assert main(["--write", "--unsafe-fixes", str(tmp_path / "new.py")]) == 0
    a = _run(["-m", "compat", "run", "orig.py", str(tmp_path / "a.onnx")], tmp_path)
    b = _run(["new.py", str(tmp_path / "b.onnx")], tmp_path)
    assert a.returncode == 0 and b.returncode == 0, a.stderr[-2000:] + b.stderr[-2000:]
    ns = runpy.run_path(str(tmp_path / "new.py"), run_name="verify")
    inputs = ns["make_inputs"]()
    ma, na, ra = _ort(tmp_path / "a.onnx", inputs)
    mb, nb, rb = _ort(tmp_path / "b.onnx", inputs)
    assert na == nb and [o.name for o in ma.graph.output] == [o.name for o in mb.graph.output]
    for x, y in zip(ra, rb):
        assert abs(x - y).max() < 1e-4


# -- the verified-fix promise with a ledger: original under the shim == migrated on plain torch --
# script -> (dynamic axis of the inputs or None, the route the migrated call must pin)
LEDGER_CASES = {
    # training=TRAINING: the shim's translations from the generated module, in train mode (30.4)
    "train_mode_batchnorm.py": (None, "train_mode_batchnorm_onnx.train_mode(model)", ()),
    "unfolded_constants.py": (None, "optimize=False", ()),  # do_constant_folding=False
    # weights moved to <f>.data after a TorchScript export (the shim took that route)
    "external_weights_old_opset.py": (None, "save_as_external_data=True", ("--route", "legacy")),
    "module_constants.py": (0, "dynamo=True", ()),  # OPSET_VERSION / DYNAMIC_AXES constants
    "version_branch.py": (0, "dynamo=True", ()),  # old-torch branch left alone, live one migrated
}


def _ops(model) -> list[str]:
    return [n.op_type for n in model.graph.node]


def _route_of(text: str) -> str:
    return "dynamo" if "dynamo=True" in text else "legacy"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(LEDGER_CASES))
def test_ledger_migration_exports_what_the_shim_exported(script, tmp_path, monkeypatch):
    """Run the original under ``python -m compat run --ledger``, migrate it in place with that
    ledger, run the result on plain torch (no compat import): same inputs, outputs, op sequence
    (when both took the same route) and onnxruntime numerics, at the example shape and at
    another size along the dynamic axis."""
    import torch

    axis, expected, shim_args = LEDGER_CASES[script]
    work = tmp_path / "proj" / script
    work.parent.mkdir()
    shutil.copy(SCRIPTS / script, work)
    ledger = tmp_path / "ledger.jsonl"
    shim = _run(["-m", "compat", "run", *shim_args, "--ledger", str(ledger), str(work),
                 str(tmp_path / "a.onnx")], tmp_path)
    assert shim.returncode == 0, shim.stderr[-3000:]
    record = json.loads(ledger.read_text().splitlines()[-1])
    rc = main(["--fix", "--unsafe-fixes", "--ledger", str(ledger), str(work)])
    assert rc == (1 if script == "version_branch.py" else 0)  # ONX501: delete the dead branch
    text = work.read_text()
    assert expected in text and "compat" not in text.replace("compat.migrate", "")
    assert torch.onnx.export.__module__ == "torch.onnx"  # plain torch, not the shim
    monkeypatch.syspath_prepend(str(work.parent))  # the generated module beside it, as a script
    ns = runpy.run_path(str(work), run_name="verify")  # plain torch: this process is unpatched
    ns["main"](str(tmp_path / "b.onnx"))
    inputs = list(ns["make_inputs"]())
    ma, na, ra = _ort(tmp_path / "a.onnx", inputs)
    mb, nb, rb = _ort(tmp_path / "b.onnx", inputs)
    assert na == nb and [o.name for o in ma.graph.output] == [o.name for o in mb.graph.output]
    if record["route_taken"] == _route_of(text):
        assert _ops(ma) == _ops(mb)
    for x, y in zip(ra, rb):
        assert x.shape == y.shape and abs(x - y).max() < 1e-4
    if script == "external_weights_old_opset.py":  # weights stay out of the .onnx file
        assert (tmp_path / "b.onnx.data").is_file() and (tmp_path / "a.onnx.data").is_file()
        import onnx

        weights = onnx.load(str(tmp_path / "b.onnx"), load_external_data=False).graph.initializer
        assert weights and all(i.data_location == onnx.TensorProto.EXTERNAL for i in weights)
    if axis is not None:  # another size along the dynamic axis
        bigger = [torch.cat([t, t, t[:1]], dim=axis) for t in inputs]
        _, _, ra = _ort(tmp_path / "a.onnx", bigger)
        _, _, rb = _ort(tmp_path / "b.onnx", bigger)
        for x, y in zip(ra, rb):
            assert x.shape[axis] == 5 and abs(x - y).max() < 1e-4


@pytest.mark.slow
def test_transformers_version_branch_migrates_to_a_working_export(tmp_path, monkeypatch):
    """transformers 4.2x ``export_pytorch`` (old-torch branch + live branch), migrated without a
    ledger, exports real (tiny, random-init) BERT and ViT models: the dead branch is reported
    and left alone; the live one passes the tokenizer's dict of keyword inputs with
    ``input_names`` (plain torch names the graph inputs in the dict's order, the shim in
    forward()'s: BERT's tokenizer order is not its forward()'s) and a computed ``dynamic_axes``
    (ViT fixes its image axes), so it goes through ``compat.export``, which says why, and each
    model matches eager torch at two shapes."""
    pytest.importorskip("transformers")
    work = tmp_path / "convert.py"
    shutil.copy(SCRIPTS.parent / "hf_export_427_branch.py", work)
    assert main(["--fix", str(work)]) == 1  # ONX501 stays: the dead branch is for the user
    text = work.read_text()
    assert text.count("compat.export(") == 1 and "dynamo=True" not in text
    said = re.sub(r"\n\s*#\s+", " ", text)  # the comment's lines, joined
    assert "compat.export because input_names with keyword inputs in a trailing dict" in said
    assert "enable_onnx_checker=True" in text
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "hf" / "fixtures"))
    import hf_zoo

    ns = runpy.run_path(str(work), run_name="verify")
    for name in ("bert", "vit"):
        model, config = hf_zoo.build(name)
        ns["export_pytorch"](model, config, config.default_onnx_opset, tmp_path / f"{name}.onnx")
        ok, detail = hf_zoo.parity(name, str(tmp_path / f"{name}.onnx"))
        assert ok, f"{name}: {detail}"
