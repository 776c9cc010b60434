"""hatch_build.rewrite_imports: the wheel's import rewriting (issue 12 item 6)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hook():  # type: ignore[no-untyped-def]
    pytest.importorskip("hatchling")
    spec = importlib.util.spec_from_file_location("hatch_build", REPO / "hatch_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rewrites_every_form_and_keeps_lines(hook) -> None:  # type: ignore[no-untyped-def]
    source = (
        "import compat\n"
        "import dynamo\n"
        "import compat as c  # comment: import legacy\n"
        "from compat.errors import (\n    CompatError,\n    RouteFailed,\n)\n"
        "from legacy.route import export\n"
        "from . import sibling\n"
        "from .x import y\n"
        "import migration.cli as cli\n"
        "TEXT = 'from compat import x'\n"
        "def f():\n    from dynamo import torch_internals\n    import legacy\n"
        "import compatible, dynamometer\n"
    )
    out = hook.rewrite_imports(source)
    assert out.splitlines() == [
        "import torch_onnx_compat as compat",
        "from torch_onnx_compat import dynamo",
        "import torch_onnx_compat as c  # comment: import legacy",
        "from torch_onnx_compat.errors import (", "    CompatError,", "    RouteFailed,", ")",
        "from torch_onnx_compat.legacy.route import export",
        "from . import sibling",
        "from .x import y",
        "from torch_onnx_compat.migration import cli",
        "TEXT = 'from compat import x'",
        "def f():", "    from torch_onnx_compat.dynamo import torch_internals",
        "    from torch_onnx_compat import legacy",
        "import compatible, dynamometer",
    ]


def test_refuses_what_it_cannot_rewrite_faithfully(hook) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="one own package per line"):
        hook.rewrite_imports("import os, compat\n")
    with pytest.raises(ValueError, match="from dynamo import"):
        hook.rewrite_imports("import dynamo.route\n")


def test_every_source_file_of_the_four_packages_rewrites(hook, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tree = Path(hook.stage_installed_tree(str(REPO), str(tmp_path)))
    for path in tree.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module.split(".")[0] not in hook.OWN, (path, node.lineno)
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] not in hook.OWN for a in node.names), (path, node.lineno)
    assert (tree / "legacy" / "route.py").is_file() and (tree / "api.py").is_file()
    assert (tree / "py.typed").is_file() and not (tree / "compat").exists()
