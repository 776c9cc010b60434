"""A ``compat.convert_opset`` post-step after a plain-torch export is part of the call site for
``compat run --observe`` and ``verify-migration`` (issue 30.1): the file as the step leaves it
is what is compared with the shim's model. Real exports, real onnxruntime runs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import onnx
import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm

from compat.tools.verify_migration import PASSING, read_sites, to_text, verify

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "helpers" / "run_scripts.py"

MODEL = '''\
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(4)  # no LayerNormalization below opset 17: rewritten
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.softmax(self.fc(self.norm(x)), dim=-1)


torch.manual_seed(0)
model = Net().eval()
x = torch.randn(2, 4)
'''
OLD = MODEL + '''
torch.onnx.export(model, (x,), sys.argv[1], input_names=["x"], output_names=["y"],
                  opset_version=13, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
'''
#: as the rewriter writes it (issue 30.1): opset 18 on plain torch, then the visible step
NEW = MODEL + '''
import torch_onnx_compat as compat

# compat.migrate: torch exports opset 18 here; compat.convert_opset brings the file down to
#   opset_version=13
torch.onnx.export(model, (x,), sys.argv[1], input_names=["x"], output_names=["y"],
                  opset_version=18, dynamic_shapes=({0: "batch"},), dynamo=True,
                  external_data=False)
compat.convert_opset(sys.argv[1], 13, out=sys.argv[1])
'''


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("post-step")
    for name, text, observe in (("old", OLD, False), ("new", NEW, True)):
        tree = base / name
        tree.mkdir()
        (tree / "pyproject.toml").write_text(f"[project]\nname = '{name}'\nversion = '0'\n")
        (tree / "export.py").write_text(text)
        spec = [{"script": str(tree / "export.py"), "argv": [str(base / f"{name}.onnx")],
                 "ledger": str(base / f"{name}.jsonl")}]
        (base / f"{name}-spec.json").write_text(json.dumps(spec))
        mode = ["--observe"] if observe else []
        done = warm_python.run(
            [sys.executable, "-W", "ignore", "-m", "compat", "run", "-q", *mode, "--ledger",
             str(base / "other.jsonl"), str(DRIVER), str(base / f"{name}-spec.json")],
            cwd=base, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
            timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
    return base


def test_the_post_step_is_recorded_as_part_of_the_call_site(runs):
    (site,) = [s for by_line in read_sites(str(runs / "new.jsonl")).values()
               for s in by_line.values()]
    (record,) = site.records
    assert record["post_step"] == "convert_opset(opset=13)" and record["route_taken"] == "dynamo"
    model = onnx.load(str(runs / "new.onnx"))
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [13]


def test_a_converted_plain_torch_export_verifies_as_the_shims_model(runs):
    rows = verify(str(runs / "old.jsonl"), str(runs / "new.jsonl"))
    assert len(rows) == 1 and all(r.verdict in PASSING for r in rows), to_text(rows, "old", "new")


def test_the_rewriter_knows_the_lowest_opset_convert_opset_writes():
    from dynamo.downconvert.base import LOWEST
    from migration.rules.onx0 import CONVERT_LOWEST

    assert CONVERT_LOWEST == LOWEST
