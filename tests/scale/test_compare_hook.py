"""``compat run --compare``: the observer the runner registers for every export, and the CLI."""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm
import torch
from scale_models import mlp

from compat import request
from compat.request import normalize
from compat.tools import compare_hook

ROOT = Path(__file__).resolve().parents[2]


def _request():
    return normalize.normalize(mlp(), (torch.randn(2, 4),), None, input_names=["x"],
                               output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                               _call_site="export_mlp.py:12")


def test_off_by_default() -> None:
    assert compare_hook.maybe_compare(_request(), request.Outcome("dynamo")) is None


def test_hook_summary_and_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compare_hook.ENV_COMPARE, "1")
    monkeypatch.setattr(compare_hook, "results", [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = compare_hook.maybe_compare(_request(), request.Outcome("dynamo"))
    assert summary is not None and summary["verdict"] == "equivalent"
    assert summary["route_taken"] == "dynamo"
    assert set(summary["routes"]) == {"legacy", "dynamo"}
    json.dumps(summary)
    out = io.StringIO()
    compare_hook.print_parity_table(out)
    text = out.getvalue()
    assert "parity of 1 export(s)" in text
    assert "export_mlp.py:12" in text and "equivalent" in text


SCRIPT = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
torch.onnx.export(model, torch.randn(2, 4), "model.onnx", input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
"""


def test_observer_gives_the_parity_field_only_in_compare_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare_hook, "results", [])
    assert compare_hook.observe(_request(), request.Outcome("legacy")) is None
    monkeypatch.setenv(compare_hook.ENV_COMPARE, "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fields = compare_hook.observe(_request(), request.Outcome("legacy"))
    assert fields is not None and set(fields) == {"parity"}
    assert fields["parity"]["verdict"] == "equivalent" and fields["parity"]["route_taken"] == "legacy"


def test_routing_never_imports_the_tools() -> None:
    """dispatch takes its observers as arguments: no edge from the routing package to compat.tools."""
    for path in sorted((ROOT / "compat" / "routing").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names] if node.module else []
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n.startswith("compat.tools") for n in names), f"{path.name}:{node.lineno}"


def test_run_compare_records_verdict(tmp_path: Path) -> None:
    script = tmp_path / "export_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    log = tmp_path / "ledger.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = warm_python.run(
        [sys.executable, "-m", "compat", "run", "--compare", "--ledger", str(log), str(script)],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 1, records  # compare's own exports are not recorded
    assert records[0]["parity"]["verdict"] == "equivalent"
    assert "parity of 1 export(s)" in proc.stderr
