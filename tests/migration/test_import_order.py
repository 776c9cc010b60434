"""Imports a fix inserts go where ruff's isort puts them (issue 30: plain, readable code): a user
who runs ``ruff check --select I --fix`` after ``compat.migrate --fix`` gets no diff when their
own block was sorted, and the user's own lines never move. Torch-free; the real ruff checks."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from migration import generated
from migration.cli import main
from migration.splice import Layout, splice

TORCH = "import torch"
DIM = "from torch.export import Dim"
SHIM = "import torch_onnx_compat as compat"


def _project(tmp_path: Path) -> Path:
    """A project ruff and the rewriter both root at ``tmp_path`` (first party: ``mylib``)."""
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\n")
    (tmp_path / "mylib.py").write_text("helper = 1\n")
    return tmp_path / "script.py"


def _insert(path: Path, text: str, imports: list[str]) -> str:
    return splice(Layout(text, ast.parse(text)), [], imports, str(path),
                  (generated.module_name(str(path)),))


def _ruff_sorted(path: Path, text: str) -> str:
    """``text`` after ruff's isort fix (run in the project, ruff's defaults)."""
    path.write_text(text)
    subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select",
                    "I", "--fix", "--quiet", path.name], cwd=path.parent, capture_output=True,
                   check=False, timeout=120)
    return path.read_text()


CASES = {
    "third party into its section": (
        '"""Doc."""\n\nimport os\nimport sys\n\nimport numpy as np\nimport onnx\n\nx = 1\n',
        [TORCH, DIM, SHIM]),
    "a new third-party section between stdlib and first party": (
        "import os\n\nfrom mylib import helper\n\n\ndef f():\n    return helper\n",
        [TORCH, SHIM, "import warnings"]),
    "a new section before the only one": (
        "import torch\n\nx = torch.ones(1)\n", ["import warnings", DIM]),
    "after __future__, no other import": (
        '"""Doc."""\n\nfrom __future__ import annotations\n\nx = 1\n', [TORCH, DIM]),
    "docstring then code, no import": ('"""Doc."""\n\n# the model\nx = 1\n', [TORCH, DIM]),
    "no import before a definition": ("def f():\n    return 1\n", [TORCH]),
    "try/except ImportError after the block": (
        ("import os\n\nimport torch\n\ntry:\n    import onnx\nexcept ImportError:\n"
         "    onnx = None\n"), [DIM, SHIM, "import onnxruntime"]),
    "conditional imports after the block": (
        ("from __future__ import annotations\n\nfrom typing import TYPE_CHECKING\n\n"
         "if TYPE_CHECKING:\n    import numpy\n"), [TORCH]),
    "a comment above an import": (
        "import os\n\n# the model's framework\nimport torch\n\nx = 1\n", [SHIM, "import onnx"]),
    "a comment above an import of the next section": (
        "import os\n\n# the model's framework\nimport torch\n\nx = 1\n", ["import abc"]),
    "a comment above the first import": (
        "# the model's framework\nimport torch\n\nx = 1\n", ["import abc", "import onnx"]),
    "from-imports after plain ones": (
        "import torch\nfrom torch import nn\nfrom torch.onnx import TrainingMode\n\nx = 1\n",
        [SHIM, DIM]),
    "no final newline": ("import os", [TORCH]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inserted_imports_are_where_ruff_sorts_them(tmp_path: Path, name: str) -> None:
    src, imports = CASES[name]
    path = _project(tmp_path)
    assert _ruff_sorted(path, src) == src  # the user's block is sorted
    out = _insert(path, src, imports)
    assert _ruff_sorted(path, out) == out, out
    for imp in imports:
        assert out.splitlines().count(imp) == 1
    assert _insert(path, out, imports) == out  # already there: nothing inserted again


def test_an_import_already_present_is_not_inserted_again(tmp_path: Path) -> None:
    src = "import os\n\nimport torch\nfrom torch.export import Dim\n\nx = 1\n"
    assert _insert(_project(tmp_path), src, [TORCH, DIM]) == src


def test_a_local_import_of_the_generated_module(tmp_path: Path) -> None:
    """Inside a package the generated module is imported relatively: the last section."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\n")
    src = "import os\n\nimport torch\n\nfrom pkg import util\n\nx = 1\n"
    path = pkg / "model.py"
    out = _insert(path, src, ["from . import model_onnx", SHIM])
    assert out == ("import os\n\nimport torch\nimport torch_onnx_compat as compat\n\n"
                   "from pkg import util\n\nfrom . import model_onnx\n\nx = 1\n")
    assert _ruff_sorted(path, out) == out


def test_the_generated_module_beside_a_script_is_first_party(tmp_path: Path) -> None:
    """``import script_onnx`` names a module the fix writes beside the script: first party for
    ruff once it exists, though the import is placed before it is written."""
    path = _project(tmp_path)
    src = "import os\n\nimport torch\n\nx = 1\n"
    out = _insert(path, src, ["import script_onnx"])
    assert out == "import os\n\nimport torch\n\nimport script_onnx\n\nx = 1\n"
    (tmp_path / "script_onnx.py").write_text("")
    assert _ruff_sorted(path, out) == out


def test_the_users_unsorted_lines_never_move(tmp_path: Path) -> None:
    src = "import torch\nimport sys\nimport numpy\n\nimport os\nx = 1\n"
    out = _insert(_project(tmp_path), src, [SHIM, "import abc", DIM])
    kept = [line for line in out.splitlines() if line not in (SHIM, "import abc", DIM)]
    assert [line for line in kept if line] == [line for line in src.splitlines() if line]
    assert out.index(SHIM) > out.index("import numpy")  # next to its section's imports
    assert out.index("import abc") < out.index("import sys")
    assert out.index(DIM) < out.index("import os")  # in the first block


LEGACY = '''"""Exports the model."""

import argparse
import os

import numpy as np
import torch

from mylib import helper

model = torch.nn.Linear(3, 4)
x = torch.randn(2, 3)
torch.onnx.export(model, (x,), "m.onnx", opset_version=13, input_names=["x"],
                  dynamic_axes={"x": {0: "batch"}})
torch.onnx.export(model, (x,), "t.onnx", training=torch.onnx.TrainingMode.TRAINING)
'''


def test_migrate_fix_output_passes_ruffs_isort_and_is_idempotent(tmp_path: Path, capsys) -> None:
    path = _project(tmp_path)
    path.write_text(LEGACY)
    assert _ruff_sorted(path, LEGACY) == LEGACY
    main(["--fix", "--unsafe-fixes", str(path)])
    out = path.read_text()
    assert out != LEGACY and "import torch_onnx_compat as compat\n" in out
    assert _ruff_sorted(path, out) == out, out
    main(["--fix", "--unsafe-fixes", str(path)])
    capsys.readouterr()
    assert path.read_text() == out


@pytest.mark.parametrize("first", ["CONST = 1\n", "def first(x):\n    return x\n"])
def test_the_generated_modules_imports_are_sorted_as_ruff_sorts_them(tmp_path: Path,
                                                                     first: str) -> None:
    _project(tmp_path)
    module = tmp_path / "script_onnx.py"
    imports = ("import torch", "import inspect", "from collections.abc import Callable",
               "from onnxscript import opset18 as op", "import onnx_ir as ir",
               "from mylib import helper", "import onnxscript")
    entries = [generated.Entry("first", str(tmp_path / "script.py"), 1, first, imports),
               generated.Entry("second", str(tmp_path / "script.py"), 2,
                               "def second(x):\n    return x\n", ())]
    text = generated.render(str(module), entries)
    assert _ruff_sorted(module, text) == text, text
    bare = generated.render(str(module), entries[1:])
    assert _ruff_sorted(module, bare) == bare, bare
