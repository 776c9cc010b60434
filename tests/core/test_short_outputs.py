"""What ``compat run`` prints for one call is short and not alarming: ONX403 names the API
without a keyword's ``=``, the summary line stays one short line (the translations' texts are in
the ledger and with ``-v``), and a dynamic_axes keyed by input names is no alarm."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from compat import catalog

ROOT = Path(__file__).resolve().parents[2]


def test_one_call_prints_short_lines(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    out = tmp_path / "m.onnx"
    script.write_text(
        "import torch\n"
        "m = torch.nn.Linear(3, 2)\n"
        f"torch.onnx.utils.export(m, (torch.randn(2, 3),), {str(out)!r}, input_names=['input'],\n"
        "    dynamic_axes={'input': {0: 'batch'}},\n"
        "    operator_export_type=torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_ONNX_COMPAT_")}
    run = subprocess.run([sys.executable, "-m", "compat", "run", str(script)], capture_output=True,
                         text=True, env={**env, "PYTHONPATH": str(ROOT)}, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    (onx403,) = [line for line in run.stderr.splitlines() if "ONX403" in line and "Warning" in line]
    assert "ONX403 torch.onnx.utils.export: " in onx403
    (summary,) = [line for line in run.stderr.splitlines() if line.startswith(f"  {script}:")]
    assert len(summary) < 200 + len(str(script)) + len(str(out)), summary
    assert "translated: ONX101 dynamic_axes,ONX103 operator_export_type" in summary
    assert "not forward() parameters" not in run.stderr
    assert "not forward() parameters" not in catalog.NOT_PARAMETERS
