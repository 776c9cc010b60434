"""The rewriter as a wheel user has it: one top-level package, ``torch_onnx_compat`` (staged by
hatch_build.py), no checkout and no editable install on ``sys.path`` (``python -S``). Its hints
and usage name a command that exists there, and the code it writes imports the shim by a name
that exists there."""

from __future__ import annotations

import importlib.util
import json
import runpy
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).parent / "fixtures" / "legacy_scripts" / "custom_symbolic.py"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a wheel install: the staged package and site-packages, nothing else."""
    pytest.importorskip("hatchling")
    spec = importlib.util.spec_from_file_location("hatch_build", REPO / "hatch_build.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    stage = tmp_path_factory.mktemp("wheel")
    hook.stage_installed_tree(str(REPO), str(stage))
    paths = sysconfig.get_paths()
    return {"PYTHONPATH": ":".join(dict.fromkeys([str(stage), paths["purelib"], paths["platlib"]])),
            "PATH": "/usr/bin:/bin", "HOME": str(stage), "PYTHONWARNINGS": "ignore",
            "TORCH_ONNX_COMPAT_CACHE_DIR": "off"}


def _python(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-S", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_printed_hint_and_usage_work_as_printed(installed, tmp_path: Path) -> None:
    code = "import importlib.util as u; print(u.find_spec('compat'), u.find_spec('migration'))"
    probe = _python(["-c", code], tmp_path, installed)
    assert probe.stdout.split() == ["None", "None"], probe.stderr  # really the wheel's layout
    shutil.copy(SCRIPT, tmp_path / "export.py")

    usage = _python(["-m", "torch_onnx_compat.migrate", "--help"], tmp_path, installed)
    assert usage.returncode == 0 and usage.stdout.startswith(
        "usage: python -m torch_onnx_compat.migrate "), usage.stderr

    report = _python(["-m", "torch_onnx_compat.migrate", "--output-format", "json", "export.py"],
                     tmp_path, installed)
    assert report.returncode == 1, report.stderr
    finding = next(f for f in json.loads(report.stdout) if f["code"] == "ONX301")
    hint = finding["message"].split("Migrate with: ", 1)[1].split(" [", 1)[0]
    assert hint.startswith("python -m torch_onnx_compat.migrate --fix --select ONX301")
    fixed = _python(shlex.split(hint)[1:], tmp_path, installed)  # `python` is sys.executable -S
    assert fixed.returncode == 0 and "Fixed 1 finding" in fixed.stdout, fixed.stderr
    text = (tmp_path / "export.py").read_text()
    assert "import torch_onnx_compat as compat\n" in text
    assert 'compat.register_custom_op_symbolic("::relu", relu_as_max, 9)' in text
    assert "ONX301" not in _python(["-m", "torch_onnx_compat.migrate", "export.py"], tmp_path,
                                   installed).stdout


@pytest.mark.slow
def test_migrated_custom_symbolic_script_runs_installed(installed, tmp_path: Path) -> None:
    """The migrated script (``import torch_onnx_compat as compat``) runs on the wheel's layout
    and its export honours the custom symbolic: onnxruntime matches eager torch at the example
    batch and at other sizes along the dynamic batch axis."""
    import onnx
    import onnxruntime as ort
    import torch

    work = tmp_path / "export.py"
    shutil.copy(SCRIPT, work)
    migrate = _python(["-m", "torch_onnx_compat.migrate", "--fix", "--select", "ONX0,ONX3",
                       str(work)], tmp_path, installed)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    assert "compat.export(model" in work.read_text()
    run = _python([str(work), str(tmp_path / "m.onnx")], tmp_path, installed)
    assert run.returncode == 0, run.stderr[-3000:]

    assert "Max" in [n.op_type for n in onnx.load(str(tmp_path / "m.onnx")).graph.node]
    ns = runpy.run_path(str(SCRIPT), run_name="eager")  # the original: plain torch only
    torch.manual_seed(0)
    model = ns["Net"]().eval()
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    for batch in (2, 1, 5):
        (x,) = ns["make_inputs"](batch)
        with torch.no_grad():
            expected = model(x).numpy()
        (got,) = sess.run(None, {"x": x.numpy()})
        assert got.shape == expected.shape and abs(got - expected).max() < 1e-5
