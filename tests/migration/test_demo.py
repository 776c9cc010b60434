"""`make demo`, the README's first command, ends as it says: every example exported under the
shim, migrated all the way onto torch's own exporter, and verified the same models."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_demo_migrates_every_example_all_the_way() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_ONNX_COMPAT_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], capture_output=True,
                          text=True, env=env, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert done.stdout.count("migrated all the way (no call pinned, none left on the shim): yes") == 2
    assert " 0 pinned, 0 left on the shim." in done.stdout
    assert "3 export(s): 3 same" in done.stdout
