"""Coexistence in a checkout (issue 12 item 6): own frames are recognised by file, and the
route packages are ours even when a user's same-named package comes first on sys.path."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from .conftest import REPO, check_exported, make_user_project


@pytest.mark.parametrize("module", ["migration.tools", "dynamo.export_utils", "legacy.onnx", "compat_user"])
def test_user_modules_named_like_ours_are_the_call_site(tmp_path: Path, module: str) -> None:
    import compat
    from compat.policy import notices

    path = tmp_path / (module.replace(".", "/") + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    source = ("def run(compat, model, x, f):\n"
              "    compat.export(model, (x,), f, route='legacy', example_outputs=x)\n")
    path.write_text(source)
    namespace = {"__name__": module}
    exec(compile(source, str(path), "exec"), namespace)  # noqa: S102 - a user module
    model = torch.nn.Linear(3, 2).eval()
    x = torch.randn(1, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace["run"](compat, model, x, str(tmp_path / "m.onnx"))
    legacy_warnings = [w for w in caught if issubclass(w.category, compat.LegacyExportWarning)]
    assert legacy_warnings and {(w.filename, w.lineno) for w in legacy_warnings} == {(str(path), 2)}
    assert compat.last_outcome().route == "legacy"


def test_own_files_by_path_not_by_module_name(tmp_path: Path) -> None:
    from compat.policy import notices

    assert notices.is_own_file(str(REPO / "compat" / "api.py"))
    assert notices.is_own_file(str(REPO / "dynamo" / "route.py"))
    assert not notices.is_own_file(str(tmp_path / "dynamo" / "route.py"))
    assert not notices.is_own_file(str(REPO / "tests" / "packaging" / "conftest.py"))


def test_route_packages_are_never_a_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A foreign ``legacy`` already imported under that name: ours loads under a private name."""
    import types

    from compat.routing import route_packages

    foreign = types.ModuleType("legacy")
    foreign.__file__ = str(tmp_path / "legacy" / "__init__.py")
    monkeypatch.setitem(sys.modules, "legacy", foreign)
    monkeypatch.delitem(sys.modules, "_torch_onnx_compat_legacy", raising=False)
    monkeypatch.setattr(route_packages, "_found", {})  # as in a process that has not exported yet
    ours = route_packages.route_module("legacy")
    assert ours is not foreign and Path(ours.__file__) == REPO / "legacy" / "__init__.py"
    assert callable(ours.export) and route_packages.route_module("legacy") is ours
    with pytest.raises(ValueError, match="not a route package"):
        route_packages.route_module("migration")


@pytest.mark.slow
def test_compat_run_in_a_user_project_with_legacy_and_dynamo_packages(tmp_path: Path) -> None:
    """``python -m compat run`` from a checkout, in a project with its own ``legacy/``,
    ``dynamo/`` and ``migration/`` packages beside the script (first on sys.path)."""
    script = make_user_project(tmp_path / "proj", with_dynamo=True)
    proj = script.parent
    env = {"PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(REPO),
           "TORCH_ONNX_COMPAT_CACHE_DIR": "off", "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "compat", "run", "--route", "legacy", "--ledger",
                          "l.jsonl", "export.py", "m.onnx"], cwd=proj, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    check_exported(proj / "m.onnx", proj / "l.jsonl", "legacy")


def test_route_packages_are_imported_only_through_routes_helper() -> None:
    """An absolute ``import legacy``/``from dynamo import ...`` would find a user's same-named
    package in a checkout: the shim's own code reaches them through ``compat.routing.route_packages``."""
    import ast

    offenders = []
    for package in ("compat", "legacy", "dynamo", "migration"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0
                         else [])
                if any(n.split(".")[0] in ("legacy", "dynamo") for n in names):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []
