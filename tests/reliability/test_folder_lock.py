"""Saves into one folder are serialised across processes (``flock`` on the folder): the lock is
taken on the folder as it is now, and no copy of it can outlive the save."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from rel_helpers import Tiny, check_parity, open_descriptors

import compat
from compat.records import folder_lock, saving

X = (torch.randn(2, 4),)
_HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""
_TRY = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(3)
"""

pytestmark = pytest.mark.skipif(folder_lock.fcntl is None, reason="flock is POSIX")


def test_a_save_waits_for_another_process_holding_the_folder_made_again(tmp_path):
    """The lock is on the folder the path names now: after the folder is removed and made again,
    a save there waits while another process holds that folder's lock."""
    folder = tmp_path / "out"
    folder.mkdir()
    compat.export(Tiny(1).eval(), X, folder / "m.onnx", route="legacy", input_names=["x"])
    shutil.rmtree(folder)
    folder.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder), "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        model = Tiny(2).eval()
        compat.export(model, X, folder / "m.onnx", route="legacy", input_names=["x"])
        assert time.monotonic() - start >= 1.0  # it waited for the other process
    finally:
        holder.kill()
        holder.wait()
    check_parity(folder / "m.onnx", model, X, ["x"])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_a_fork_made_during_a_save_does_not_keep_the_folder_locked(tmp_path, monkeypatch):
    """A child forked while a save holds the folder's lock has a copy of its descriptor; once the
    save returns, another process can lock the folder, whatever the child does meanwhile."""
    children = []

    def fork_at(step: str) -> None:
        if step == "tmp-written":  # inside the save, under the folder's lock
            pid = os.fork()
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            children.append(pid)

    monkeypatch.setattr(saving, "_step", fork_at)
    model = Tiny(3).eval()
    try:
        compat.export(model, X, tmp_path / "m.onnx", route="legacy", input_names=["x"])
        assert len(children) == 1
        other = subprocess.run([sys.executable, "-c", _TRY, str(tmp_path)], check=False, timeout=60)
        assert other.returncode == 0, "the folder stayed locked after the save"
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    check_parity(tmp_path / "m.onnx", model, X, ["x"])


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
def test_descriptors_of_at_most_the_kept_limit_of_folders_stay_open(tmp_path, monkeypatch):
    """Saving into more folders than ``KEPT_LIMIT`` keeps no more descriptors of them open, and
    every save keeps its model."""
    monkeypatch.setattr(folder_lock, "KEPT_LIMIT", 3)
    models = {}
    for i in range(6):
        folder = tmp_path / f"out{i}"
        folder.mkdir()
        models[folder] = Tiny(i).eval()
        compat.export(models[folder], X, folder / "m.onnx", route="legacy", input_names=["x"])
    kept = [where for where in open_descriptors() if where.startswith(str(tmp_path))]
    assert 1 <= len(kept) <= 3, kept
    for folder, model in models.items():
        check_parity(folder / "m.onnx", model, X, ["x"])
