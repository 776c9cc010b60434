"""Paths the tools cannot write: one clear line and exit 2 before any work, never a traceback
or a run that passes for recorded; ``run --observe`` honours TORCH_ONNX_COMPAT_LEDGER."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "import torch\nprint('script ran')\n"


def _compat(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "TORCH_ONNX_COMPAT_LEDGER"}
    full.update({"PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run([sys.executable, "-m", "compat", *args], capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=300, check=False)


def _one_line_error(run: subprocess.CompletedProcess[str], *words: str) -> None:
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "script ran" not in run.stdout
    for w in words:
        assert w in run.stderr, run.stderr


def test_run_ledger_under_a_file_or_at_a_folder(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    _one_line_error(_compat("run", "--ledger", str(script / "l.jsonl"), str(script)),
                    "--ledger", "which is a file, not a folder")
    _one_line_error(_compat("run", "--ledger", str(tmp_path), str(script)), "--ledger", "is a folder")
    _one_line_error(_compat("run", str(script), env={"TORCH_ONNX_COMPAT_LEDGER": str(script / "l.jsonl")}),
                    "TORCH_ONNX_COMPAT_LEDGER")


def test_run_ledger_on_a_read_only_file_system(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    # /proc is read-only for everyone, root included (a chmod'ed folder is not, for root)
    _one_line_error(_compat("run", "--ledger", "/proc/compat-ledger.jsonl", str(script)),
                    "cannot be written")


def test_report_output_unwritable(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(json.dumps({"call_site": "a.py:1", "route_taken": "dynamo", "status": "ok"}) + "\n")
    for out in (ledger / "r.md", tmp_path, Path("/proc/compat-report.md")):
        _one_line_error(_compat("report", "-o", str(out), str(ledger)), "--output")


def test_observe_honours_the_ledger_environment_variable(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import torch\n\ntorch.onnx.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),), "
                      f"{str(tmp_path / 'm.onnx')!r}, dynamo=True)\n")
    ledger = tmp_path / "observed.jsonl"
    run = _compat("run", "--observe", "-q", str(script), env={"TORCH_ONNX_COMPAT_LEDGER": str(ledger)})
    assert run.returncode == 0, run.stderr[-3000:]
    (rec,) = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert rec["mode"] == "observe" and rec["status"] == "ok"
