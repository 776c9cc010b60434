"""An export has no process-wide side effects beyond the export itself: another thread's prints
go to its own stdout meanwhile, the environment is never changed, and exports from 8 threads
into one ledger leave 8 complete records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import compat
from compat.routing.capture import Capture

ROOT = Path(__file__).resolve().parents[2]


class HandsOver(torch.nn.Module):
    """Its first forward (the trace) lets another thread print, and waits until it has."""

    def __init__(self, during: threading.Event, done: threading.Event,
                 environ_seen: list[dict[str, str]] | None = None) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.during, self.done = during, done
        self.environ_seen = environ_seen if environ_seen is not None else []  # the model is restored after

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.during.is_set():
            self.environ_seen.append(dict(os.environ))
            print("printed by the model's forward")
            self.during.set()
            self.done.wait(30)
        return self.fc(x)


def _printer(during: threading.Event, done: threading.Event, lines: int) -> threading.Thread:
    def run() -> None:
        during.wait(30)
        for i in range(lines):
            print(f"tick {i} from another thread")
        sys.stdout.flush()
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("route", ["legacy", "dynamo"])
def test_another_threads_prints_stay_on_its_stdout(route: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(tmp_path / "ledger.jsonl"))
    if route == "dynamo":  # torch's own first export sets TORCHINDUCTOR_CACHE_DIR: not ours to judge
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(torch.nn.Linear(4, 3), (torch.randn(2, 4),), tmp_path / "plain.onnx", dynamo=True)
        capsys.readouterr()
    environ_before = dict(os.environ)
    stdout_before = sys.stdout
    during, done = threading.Event(), threading.Event()
    environ_seen: list[dict[str, str]] = []
    model = HandsOver(during, done, environ_seen)
    printer = _printer(during, done, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (torch.randn(2, 4),), tmp_path / "m.onnx", route=route)
    printer.join(30)
    out, err = capsys.readouterr()
    assert done.is_set(), "the other thread printed while the export ran"
    assert [line for line in out.splitlines() if line.startswith("tick")] == [
        f"tick {i} from another thread" for i in range(3)]
    # what the export itself printed is kept off stdout (shown on stderr after the route)
    assert "printed by the model's forward" not in out and "printed by the model's forward" in err
    assert sys.stdout is stdout_before
    # no environment variable changed, neither during the export nor after it
    assert environ_seen == [environ_before] and dict(os.environ) == environ_before


SCRIPT = """
import sys, threading, warnings
sys.path.insert(0, {tests!r})
import torch
import compat
from test_threads_side_effects import HandsOver, _printer

warnings.simplefilter("ignore")
during, done = threading.Event(), threading.Event()
printer = _printer(during, done, 5)
compat.export(HandsOver(during, done), (torch.randn(2, 4),), {out!r}, route="legacy")
printer.join(30)
print("script done")
"""


def test_another_threads_prints_reach_the_real_stdout_descriptor(tmp_path: Path) -> None:
    """The terminal case: sys.stdout writes to fd 1, which the capture redirects while the
    route runs; the other thread's prints go through a copy of the real descriptor."""
    script = SCRIPT.format(tests=str(Path(__file__).parent), out=str(tmp_path / "m.onnx"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_ONNX_COMPAT_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines == [f"tick {i} from another thread" for i in range(5)] + ["script done"], proc.stdout
    assert "printed by the model's forward" in proc.stderr


def test_capture_routes_by_thread(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[str] = []
    with Capture() as capture:
        print("captured: the exporting thread")
        thread = threading.Thread(target=lambda: (print("not captured: another thread"), seen.append("ran")))
        thread.start()
        thread.join()
    out, _ = capsys.readouterr()
    assert seen == ["ran"]
    assert capture.stdout == "captured: the exporting thread\n"
    assert out == "not captured: another thread\n"


def test_eight_threads_exporting_into_one_ledger_leave_eight_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    book = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def export(i: int) -> None:
        try:
            model = torch.nn.Sequential(torch.nn.Linear(3, 2 + i)).eval()
            start.wait(30)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compat.export(model, (torch.randn(2, 3),), tmp_path / f"m{i}.onnx",
                              route="dynamo" if i % 2 else "legacy")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=export, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    records: list[dict[str, Any]] = [json.loads(line) for line in book.read_text().splitlines()]
    assert len(records) == 8
    assert sorted(r["output"] for r in records) == sorted(str(tmp_path / f"m{i}.onnx") for i in range(8))
    assert all(r["status"] == "ok" and r["route_taken"] == ("dynamo" if r["output"][-6] in "1357" else "legacy")
               for r in records)
