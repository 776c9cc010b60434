"""The cached pyproject.toml lookup follows the file system: a removed file is looked up again."""

from __future__ import annotations

from pathlib import Path

from compat.policy import config


def test_removed_pyproject_is_looked_up_again(tmp_path: Path) -> None:
    outer = tmp_path / "pyproject.toml"
    outer.write_text('[tool.torch-onnx-compat]\nroute = "legacy"\n')
    inner_dir = tmp_path / "pkg"
    inner_dir.mkdir()
    inner = inner_dir / "pyproject.toml"
    inner.write_text('[tool.torch-onnx-compat]\nroute = "dynamo"\n')
    assert config.load_project(str(inner_dir)).route == "dynamo"
    inner.unlink()
    assert config.load_project(str(inner_dir)).route == "legacy"
    outer.unlink()
    assert config.load_project(str(inner_dir)).route is None
