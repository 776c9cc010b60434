"""The built distributions: one top-level package, immune to same-named neighbours (issue 12
items 6 and 8). Builds the wheel offline (hatchling from this interpreter), installs it into a
fresh venv that borrows this interpreter's torch/onnx, next to a `dynamo` package (as ai-dynamo
installs one) and a user project with its own `legacy/` and `migration/` packages."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from .conftest import REPO, check_exported, make_dynamo_standin, make_user_project

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
         "--no-index", "-w", str(out), str(REPO)],
        check=True, capture_output=True, text=True, timeout=600,
    )
    (path,) = out.glob("torch_onnx_compat-*.whl")
    return path


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the wheel (and a `dynamo` package) installed; torch and the other
    dependencies come from this interpreter's site-packages through a .pth line (whose own .pth
    files, such as the checkout's editable install, are not processed)."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=600)
    py = root / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, text=True, timeout=600)
    make_dynamo_standin(site)
    return root


def test_wheel_holds_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"torch_onnx_compat", f"{wheel.name.split('-py3')[0]}.dist-info"}, tops
    for pkg in ("", "legacy/", "dynamo/", "migration/"):
        assert f"torch_onnx_compat/{pkg}py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any("/tests/" in n or n.startswith("tests/") or "__pycache__" in n for n in names)
    # test support stays in the checkout (tests/helpers/route_parity.py); the shared helpers ship
    assert "torch_onnx_compat/dynamo/parity.py" not in names
    assert {"torch_onnx_compat/files.py", "torch_onnx_compat/_lazy.py"} <= set(names)
    # every import of the four packages was rewritten to the installed names
    dispatch = zipfile.ZipFile(wheel).read("torch_onnx_compat/dynamo/route.py").decode()
    assert "from torch_onnx_compat.errors import" in dispatch and "from compat." not in dispatch
    entry = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/entry_points.txt").decode()
    assert "torch-onnx-compat = torch_onnx_compat.__main__:main" in entry
    assert "torch-onnx-migrate = torch_onnx_compat.migrate:main" in entry


def test_sdist_builds_the_same_wheel(tmp_path: Path) -> None:
    code = ("import sys; from hatchling.build import build_sdist; "
            "print(build_sdist(sys.argv[1]))")
    name = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, check=True,
                          capture_output=True, text=True, timeout=600).stdout.strip().splitlines()[-1]
    with tarfile.open(tmp_path / name) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
        tar.extractall(tmp_path / "src", filter="data")
    for required in ("LICENSE", "README.md", "pyproject.toml", "hatch_build.py", "compat/py.typed",
                     "legacy/route.py", "dynamo/route.py", "migration/cli.py"):
        assert required in members, required
    assert not any(m.startswith(("tests/", ".venv", "benchmarks/")) for m in members)
    (src,) = (tmp_path / "src").iterdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                    "--no-index", "-w", str(tmp_path / "w"), str(src)],
                   check=True, capture_output=True, text=True, timeout=600)
    (built,) = (tmp_path / "w").glob("*.whl")
    assert {n.split("/", 1)[0] for n in zipfile.ZipFile(built).namelist()} >= {"torch_onnx_compat"}


def test_installed_wheel_coexists_with_dynamo_and_a_user_legacy_package(venv: Path, tmp_path: Path) -> None:
    py = venv / "bin" / "python"
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "PYTHONWARNINGS": "ignore",
           "TORCH_ONNX_COMPAT_CACHE_DIR": "off", "HOME": str(tmp_path)}
    # no top-level name shared with ai-dynamo or django-compat
    probe = ("import importlib.util as u, dynamo, torch_onnx_compat as compat; "
             "from torch_onnx_compat import commands; "
             "print(u.find_spec('compat'), u.find_spec('legacy'), dynamo.NOT_THE_SHIM, "
             "compat.__version__, commands.MIGRATE, sep='|')")
    out = subprocess.run([str(py), "-c", probe], cwd=tmp_path, env=env, check=True,
                         capture_output=True, text=True, timeout=600).stdout.strip().split("|")
    assert out == ["None", "None", "True", "0.1.0", "python -m torch_onnx_compat.migrate"]

    script = make_user_project(tmp_path / "proj")
    proj = script.parent
    # the console script on the default (auto) route: torch.export
    run = subprocess.run([str(venv / "bin" / "torch-onnx-compat"), "run", "--ledger", "a.jsonl",
                          "export.py", "auto.onnx"], cwd=proj, env=env, capture_output=True,
                         text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    check_exported(proj / "auto.onnx", proj / "a.jsonl", "dynamo")
    # python -m on the TorchScript route, with the user's `legacy` package first on sys.path
    run = subprocess.run([str(py), "-m", "torch_onnx_compat", "run", "--route", "legacy",
                          "--ledger", "l.jsonl", "export.py", "legacy.onnx"], cwd=proj, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    check_exported(proj / "legacy.onnx", proj / "l.jsonl", "legacy")
    # the rewriter, through both of its entry points
    for cmd in ([str(py), "-m", "torch_onnx_compat.migrate", "--check", "migration"],
                [str(venv / "bin" / "torch-onnx-migrate"), "--check", "migration"]):
        check = subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True, timeout=600,
                               check=False)
        assert check.returncode == 1, check.stderr
        assert "tools.py:5" in check.stdout and "ONX201" in check.stdout


# pre-commit's manifest fields (pre_commit.clientlib MANIFEST_HOOK_DICT)
_HOOK_KEYS = {"id", "name", "entry", "language", "alias", "files", "exclude", "types", "types_or",
              "exclude_types", "additional_dependencies", "args", "always_run", "fail_fast",
              "pass_filenames", "description", "language_version", "log_file", "require_serial",
              "stages", "verbose", "minimum_pre_commit_version"}


def _readme_hooks() -> list[dict]:
    import yaml

    text = (REPO / "README.md").read_text()
    block = text[text.index("```yaml\n# .pre-commit-config.yaml") + len("```yaml\n"):]
    config = yaml.safe_load(block[: block.index("```")])
    (repo,) = config["repos"]
    assert repo["repo"] == "local"
    return repo["hooks"]


def test_pre_commit_hooks_run_as_declared(venv: Path, tmp_path: Path) -> None:
    """Each hook of .pre-commit-hooks.yaml and of the README's config, run as pre-commit runs
    it (entry, then the file names) with the installed wheel's commands."""
    import shlex

    import yaml

    manifest = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    hooks = manifest + _readme_hooks()
    assert {h["id"] for h in manifest} == {"torch-onnx-migrate", "torch-onnx-migrate-fix"}
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    legacy = "import torch\ntorch.onnx.export(model, x, 'm.onnx', example_outputs=y)\n"
    for hook in hooks:
        assert {"id", "name", "entry", "language"} <= set(hook) <= _HOOK_KEYS, hook
        assert hook["language"] in ("python", "system")
        assert set(hook["types_or"]) == {"python", "jupyter"}
        (tmp_path / "a.py").write_text(legacy)
        run = subprocess.run([*shlex.split(hook["entry"]), "a.py"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600, check=False)
        assert run.returncode in (0, 1), run.stderr
        if "--write" in hook["entry"]:
            assert "example_outputs" not in (tmp_path / "a.py").read_text()
        else:
            assert run.returncode == 1 and "a.py:2" in run.stdout and "ONX201" in run.stdout


def test_editable_install_exposes_the_installed_names_too(tmp_path: Path) -> None:
    """README's `pip install -e '.[runtime]'` (the runtime dependencies are this interpreter's,
    so the install resolves offline): both `compat` and `torch_onnx_compat` import the checkout."""
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=600)
    py = root / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                    "--no-index", "--no-build-isolation", "-e", f"{REPO}[runtime]"],
                   check=True, capture_output=True, text=True, timeout=600)
    env = {"PATH": f"{root / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    probe = ("import compat, torch_onnx_compat as tc; "
             "print(tc.CompatError is compat.CompatError, tc.__version__, compat.__file__)")
    out = subprocess.run([str(py), "-c", probe], cwd=tmp_path, env=env, check=True,
                         capture_output=True, text=True, timeout=600).stdout.split()
    assert out == ["True", "0.1.0", str(REPO / "compat" / "__init__.py")]
    catalog = subprocess.run([str(root / "bin" / "torch-onnx-compat"), "catalog"], cwd=tmp_path,
                             env=env, check=True, capture_output=True, text=True, timeout=600)
    assert catalog.stdout.startswith("ONX001")
