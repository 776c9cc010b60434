"""Helpers of the adversarial reliability suite (issue 13): models, onnxruntime parity, subprocesses."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]


def run_onnx(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    src = model if isinstance(model, bytes) else str(model)
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check_parity(model_file: Any, module: torch.nn.Module, inputs: Sequence[torch.Tensor],
                 names: Sequence[str], atol: float = 1e-5) -> None:
    """The exported model gives eager torch's outputs for ``inputs``."""
    with torch.no_grad():
        want = module(*inputs)
    want = (want,) if isinstance(want, torch.Tensor) else tuple(want)
    got = run_onnx(model_file, {n: t.numpy() for n, t in zip(names, inputs)})
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), atol=atol, rtol=1e-4)


class Counting(torch.nn.Module):
    """Counts forward calls, so a test can tell that no export work ran."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return torch.relu(self.fc(x))


class Tiny(torch.nn.Module):
    """A small MLP whose weights depend on ``seed`` (tells two exports apart)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.fc1 = torch.nn.Linear(4, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x)))


def open_descriptors() -> list[str]:
    """What this process's open descriptors point at (``/proc/self/fd``, Linux)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return found


def run_python(code: str, *, env: dict[str, str] | None = None, timeout: float = 180,
               cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter, in ``cwd``, with the repository importable."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], check=False, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=timeout, capture_output=True, text=True, cwd=str(cwd),
    )


#: the checkout's top-level packages (pyproject's ``packages``)
PACKAGES = ("compat", "legacy", "dynamo", "migration")


def world_readable_code(dest: Path) -> Path:
    """A copy of the checkout's packages in ``dest`` that every user may read (the checkout
    itself may sit in a private folder, and a clone made under umask 077 is private too)."""
    for name in PACKAGES:
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    os.chmod(dest, 0o755)
    for folder, _dirs, files in os.walk(dest):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return dest


def blocked_folder(path: Path, uid: int, gid: int) -> Path | None:
    """The first folder on the way to ``path`` (itself included) that user ``uid`` with the
    single group ``gid`` may not enter; None when it can reach ``path``."""
    for folder in (*reversed(path.parents), path):
        st = os.stat(folder)
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        else:
            bit = stat.S_IXGRP if st.st_gid == gid else stat.S_IXOTH
        if not st.st_mode & bit:
            return folder
    return None
