"""``[tool.torch-onnx-compat]`` and the pyproject around it (issue 12 items 7 and 11, issue 13
item 8): unknown keys, malformed files, Python 3.10 (tomli)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def export_from(folder: Path, f: Path, **options: object) -> None:
    """``compat.export`` called from a file in ``folder`` (the config is looked up from there)."""
    import compat

    source = "def run(compat, model, x, f, options):\n    compat.export(model, (x,), f, **options)\n"
    script = folder / "export_model.py"
    script.write_text(source)
    namespace: dict = {}
    exec(compile(source, str(script), "exec"), namespace)  # noqa: S102
    namespace["run"](compat, torch.nn.Linear(3, 2).eval(), torch.randn(2, 3), str(f), options)


def write_pyproject(folder: Path, body: bytes) -> Path:
    path = folder / "pyproject.toml"
    path.write_bytes(body)
    return path


@pytest.mark.parametrize(("body", "message"), [
    (b"[tool.torch-onnx-compat]\nstirct = true\n", r"unknown key 'stirct' .*did you mean 'strict'\?"),
    (b"[tool.torch-onnx-compat]\nrouts = {}\n", r"unknown key 'routs' .*did you mean 'routes'\?"),
    (b"[tool.torch-onnx-compat]\ncolour = 1\n", r"unknown key 'colour' .*\(known: route, strict"),
    (b"[tool.torch-onnx-compat\nroute = 1\n", r"not valid TOML"),
    (b"[tool.torch-onnx-compat]\nroute = \"legacy\" # caf\xe9\n", r"not UTF-8"),
    (b"tool = 1\n", r"`tool` must be a table"),
    (b"[tool]\ntorch-onnx-compat = \"legacy\"\n", r"\[tool.torch-onnx-compat\] must be a table"),
    (b"[tool.torch-onnx-compat]\nroutes = [\"a\"]\n", r"routes\] must be a table"),
    (b"[tool.torch-onnx-compat]\nstrict = \"yes\"\n", r"strict must be true or false"),
])
def test_bad_project_config_is_a_value_error_naming_the_file(tmp_path: Path, body: bytes, message: str) -> None:
    from compat.errors import CompatValueError

    path = write_pyproject(tmp_path, body)
    out = tmp_path / "m.onnx"
    with pytest.raises(CompatValueError, match=message) as info:
        export_from(tmp_path, out)
    assert str(path) in str(info.value)
    assert not out.exists()


def test_good_project_config_routes_the_export(tmp_path: Path) -> None:
    import onnxruntime as ort

    import compat

    write_pyproject(tmp_path, b'[tool.torch-onnx-compat]\nroute = "legacy"\nstrict = false\n'
                              b'[tool.torch-onnx-compat.migrate]\nselect = ["ONX1"]\n')
    out = tmp_path / "m.onnx"
    torch.manual_seed(0)
    export_from(tmp_path, out, input_names=["x"], dynamic_axes={"x": {0: "b"}})
    assert compat.last_outcome().route == "legacy"
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert sess.get_inputs()[0].shape[0] == "b"
    for batch in (2, 5):
        (y,) = sess.run(None, {"x": np.ones((batch, 3), np.float32)})
        assert y.shape == (batch, 2)


@pytest.mark.parametrize("body", [b"[tool.torch-onnx-compat\n", b"# caf\xe9\n[tool]\n"])
def test_migrate_reports_a_bad_pyproject_in_one_line_with_exit_2(tmp_path: Path, body: bytes) -> None:
    path = write_pyproject(tmp_path, body)
    (tmp_path / "a.py").write_text("import torch\ntorch.onnx.export(m, x, 'a.onnx')\n")
    run = subprocess.run([sys.executable, "-m", "compat.migrate", "--check", "a.py"], cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                         text=True, timeout=600, check=False)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and str(path) in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_python_310_reads_the_config_with_tomli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulated 3.10 in this interpreter: no ``tomllib``, so ``tomli`` reads the file."""
    import importlib.abc

    import tomli

    from compat.policy import config

    class NoTomllib(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
            if name == "tomllib":
                raise ModuleNotFoundError("No module named 'tomllib'", name=name)

    monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
    monkeypatch.delitem(sys.modules, "tomllib", raising=False)
    monkeypatch.setattr(sys, "meta_path", [NoTomllib(), *sys.meta_path])
    assert config._toml() is tomli
    path = write_pyproject(tmp_path, b'[tool.torch-onnx-compat]\nroute = "dynamo"\n')
    assert config._load_cached.__wrapped__(str(path), 0).route == "dynamo"


def _python310() -> str | None:
    pyenv = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"
    candidates = [str(p / "bin" / "python3.10") for p in sorted(pyenv.glob("3.10.*"))]
    candidates.append(shutil.which("python3.10") or "python3.10")
    for exe in candidates:
        try:
            ok = subprocess.run([exe, "-c", "import sys; assert sys.version_info[:2] == (3, 10)"],
                                capture_output=True, timeout=600, check=False).returncode == 0
        except OSError:
            continue
        if ok:
            return exe
    return None


@pytest.mark.skipif(_python310() is None, reason="no Python 3.10 interpreter on this machine")
def test_real_python_310_reads_the_config(tmp_path: Path) -> None:
    """The lowest supported Python: compat.policy.config (and the rewriter's config read) on 3.10, with
    the pure-Python tomli this interpreter has (the distribution depends on it below 3.11)."""
    import tomli

    write_pyproject(tmp_path, b'[tool.torch-onnx-compat]\nroute = "legacy"\nstirct = 1\n')
    code = ("import sys; assert sys.version_info[:2] == (3, 10)\n"
            "from compat.policy import config\n"
            "from compat.errors import CompatValueError\n"
            "try:\n"
            "    config.load_project(sys.argv[1])\n"
            "except CompatValueError as exc:\n"
            "    print(exc)\n")
    tomli_dir = str(Path(tomli.__file__).parent.parent)
    run = subprocess.run([_python310(), "-c", code, str(tmp_path)], cwd=tmp_path,
                         env={"PYTHONPATH": f"{REPO}{os.pathsep}{tomli_dir}", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr
    assert "unknown key 'stirct'" in run.stdout and "did you mean 'strict'" in run.stdout


@pytest.mark.slow
@pytest.mark.skipif(_python310() is None, reason="no Python 3.10 interpreter on this machine")
def test_rewriter_on_python_310_rewrites_like_this_python(tmp_path: Path) -> None:
    """The rewriter installed on the lowest supported Python (the base distribution: libcst,
    pathspec, packaging, tomli; no torch) makes the same edits as on this interpreter."""
    venv = tmp_path / "venv310"
    subprocess.run([_python310(), "-m", "venv", str(venv)], check=True, timeout=180)
    py310 = str(venv / "bin" / "python")
    pins = [line for line in (REPO / "requirements-pinned.txt").read_text().splitlines()
            if line.split("==")[0] in {"libcst", "pathspec", "packaging", "tomli"}]
    install = subprocess.run([py310, "-m", "pip", "install", "-q", str(REPO), *pins],
                             capture_output=True, text=True, timeout=900, check=False)
    if install.returncode != 0 and "No matching distribution" in install.stderr:
        pytest.skip(f"a dependency has no build for Python 3.10 here: {install.stderr[-300:]}")
    assert install.returncode == 0, install.stderr[-2000:]

    scripts = REPO / "tests" / "migration" / "fixtures" / "legacy_scripts"
    outputs = {}
    for name, cmd in (("3.10", [py310, "-m", "torch_onnx_compat.migrate"]),
                      ("this", [sys.executable, "-m", "compat.migrate"])):
        work = tmp_path / name
        shutil.copytree(scripts, work / "legacy_scripts")
        run = subprocess.run([*cmd, "--diff", "legacy_scripts"], cwd=work, capture_output=True,
                             text=True, timeout=300, check=False)
        assert run.returncode in (0, 1), run.stderr
        outputs[name] = (run.returncode, run.stdout)
    assert "+" in outputs["this"][1]  # there is something to rewrite
    assert outputs["3.10"] == outputs["this"]
