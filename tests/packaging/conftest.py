"""A user project that reuses the shim's folder names, and a check of what it exported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]

# The user's export helper lives in the user's own `migration` package: its call site must be
# reported as the user's line, not skipped as the rewriter's.
USER_TOOLS = '''\
import torch


def do_export(model, x, path):
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],  # the call
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, example_outputs=model(x))
'''

USER_SCRIPT = '''\
import sys

import torch

import dynamo  # not the shim's: NVIDIA's (a stand-in) or the user's own
import legacy  # the user's own package
from migration.tools import do_export


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.lin(x)) * legacy.SCALE


torch.manual_seed(0)
model = Scaled().eval()
do_export(model, torch.randn(2, 4), sys.argv[1])
assert dynamo.NOT_THE_SHIM and not hasattr(dynamo, "export")
torch.save(model.state_dict(), sys.argv[1] + ".pt")
'''


def make_user_project(root: Path, with_dynamo: bool = False) -> Path:
    """``root`` with the user's own ``legacy/`` and ``migration/`` packages (and ``dynamo/``)."""
    (root / "legacy").mkdir(parents=True)
    (root / "legacy" / "__init__.py").write_text("SCALE = 2.0\n")
    (root / "migration").mkdir()
    (root / "migration" / "__init__.py").write_text("")
    (root / "migration" / "tools.py").write_text(USER_TOOLS)
    if with_dynamo:
        make_dynamo_standin(root)
    (root / "export.py").write_text(USER_SCRIPT)
    return root / "export.py"


def make_dynamo_standin(folder: Path) -> None:
    """A top-level ``dynamo`` package, as ai-dynamo installs one."""
    (folder / "dynamo").mkdir()
    (folder / "dynamo" / "__init__.py").write_text("NOT_THE_SHIM = True\n")


def check_exported(onnx_path: Path, ledger: Path, route: str) -> None:
    """The model at ``onnx_path`` runs in onnxruntime like eager torch at several batch sizes,
    and the ledger names the route and the user's call line in ``migration/tools.py``."""
    import onnxruntime as ort
    import torch

    record = json.loads(ledger.read_text().splitlines()[-1])
    assert record["status"] == "ok" and record["route_taken"] == route, record
    tools = onnx_path.parent / "migration" / "tools.py"
    assert record["call_site"] == f"{tools}:5", record
    state = torch.load(str(onnx_path) + ".pt")
    lin = torch.nn.Linear(4, 3)
    lin.load_state_dict({k.removeprefix("lin."): v for k, v in state.items()})
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["x"]
    assert [o.name for o in sess.get_outputs()] == ["y"]
    for batch in (2, 1, 7):
        x = torch.randn(batch, 4)
        with torch.no_grad():
            expected = (torch.relu(lin(x)) * 2.0).numpy()
        (got,) = sess.run(None, {"x": x.numpy()})
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.fixture
def no_legacy_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment for subprocesses: no PYTHONPATH, so only what the interpreter installs counts."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env["PYTHONWARNINGS"] = "ignore"
    return env


def python() -> str:
    return sys.executable
