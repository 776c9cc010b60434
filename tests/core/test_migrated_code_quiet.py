"""Code compat.migrate said "All checks passed!" on is quiet when it runs: a call under the
rewriter's pin comment warns no ONX code, and strict mode does not refuse it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from migration.cli import main as migrate

ROOT = Path(__file__).resolve().parents[2]
LEGACY = ("import torch\n\n"
          "m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))\n"
          "torch.onnx.export(m, (torch.randn(4, 3),), {out!r}, "
          "training=torch.onnx.TrainingMode.TRAINING)\n")


def _run_strict(script: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_ONNX_COMPAT_")}
    env.update(PYTHONPATH=str(ROOT), TORCH_ONNX_COMPAT_STRICT="1")
    return subprocess.run([sys.executable, "-m", "compat", "run", str(script)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)


def test_pinned_call_is_quiet_in_strict_mode(tmp_path: Path, capsys) -> None:
    script = tmp_path / "s.py"
    script.write_text(LEGACY.format(out=str(tmp_path / "m.onnx")))
    before = _run_strict(script)
    assert before.returncode != 0 and "ONX102" in before.stderr  # legacy code: strict refuses
    assert migrate(["--fix", "--unsafe-fixes", "--no-progress", str(script)]) == 0
    assert "All checks passed!" in capsys.readouterr().out
    assert "# compat.migrate: dynamo=False because training=" in script.read_text()
    after = _run_strict(script)
    assert after.returncode == 0, after.stderr[-3000:]
    assert "LegacyExportWarning" not in after.stderr and "ONX1" not in after.stderr
    assert (tmp_path / "m.onnx").is_file()
