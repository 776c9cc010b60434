"""A call the shim exported on the TorchScript route because auto deferred the draft capture
(below opset 18, fixed input shapes: compat/routing/dispatch.py) is pinned to ``dynamo=False``
from that record, as the shim exported it, and the pin says how to move it: the torch.export
route was not finished there. With a ``compat run --route dynamo`` record the call moves to
plain torch."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm

from compat.catalog import DRAFT_DEFERRED
from compat.tools.verify_migration import PASSING, to_text, verify
from migration.cli import main as migrate

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = '''\
import sys

import torch


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            return y * 2
        return y - 1


torch.manual_seed(0)
model = Branchy().eval()
x = torch.randn(3, 4)
torch.onnx.export(model, (x,), sys.argv[1], opset_version=11, input_names=["x"],
                  output_names=["y"])
'''


def _run(tree: Path, ledger: Path, *flags: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = ledger.with_suffix(".onnx")  # each run its own file: verify-migration reads them
    done = warm_python.run([sys.executable, "-W", "ignore", "-m", "compat", "run", "-q", *flags,
                            "--ledger", str(ledger), "s.py", str(out)],
                           cwd=tree, env=env, capture_output=True, text=True, timeout=600,
                           check=False)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.mark.slow
def test_deferred_draft_capture_asks_for_a_torch_export_record(tmp_path, capsys) -> None:
    tree = tmp_path / "p"
    tree.mkdir()
    (tree / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n")
    (tree / "s.py").write_text(SCRIPT, encoding="utf-8")
    ledger = tmp_path / "shim.jsonl"
    _run(tree, ledger)
    record = json.loads(ledger.read_text().splitlines()[-1])
    assert record["route_taken"] == "legacy" and DRAFT_DEFERRED in record["fallback_reason"]

    # that record alone: pinned as the shim exported it, saying which record would move it
    assert migrate(["--ledger", str(ledger), "--diff", str(tree / "s.py")]) == 1
    diff = capsys.readouterr().out
    assert "dynamo=False" in diff, diff
    assert "record it with `compat run --route dynamo --ledger`" in " ".join(
        line.lstrip("+# ").strip() for line in diff.splitlines()), diff

    # with the torch.export route's record the call moves to plain torch, the shim's model kept
    dynamo = tmp_path / "shim-dynamo.jsonl"
    _run(tree, dynamo, "--route", "dynamo")
    assert migrate(["--ledger", str(ledger), "--ledger", str(dynamo), "--write", "--unsafe-fixes",
                    "-q", str(tree / "s.py")]) in (0, 1)
    text = (tree / "s.py").read_text()
    assert "dynamo=True" in text and "dynamo=False" not in text and "draft_export" in text, text
    observed = tmp_path / "observed.jsonl"
    _run(tree, observed, "--observe")
    rows = verify(str(dynamo), str(observed))
    assert rows and all(r.verdict in PASSING for r in rows), to_text(rows, "shim", "migrated")
