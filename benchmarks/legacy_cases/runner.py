"""Run cases in worker processes (``legacy_cases.worker``), so that a case that crashes the
interpreter (a segfault in an exporter or in onnxruntime) or hangs never stops the run.

Each worker imports torch once and takes cases one at a time from a shared queue. When a worker
dies or a step runs past ``step_timeout_s``, the step's contender is recorded as failed ("crashed:
signal 11 during export compat_auto", "timed out after 300 s during ...") and the case is run
again in a fresh worker without it, so the other contenders still get their verdict.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
READY_TIMEOUT_S = 900.0  # importing torch on a loaded 2-core machine


class _Worker:
    """One worker process and its protocol stream."""

    def __init__(self, log: str, contenders: Sequence[str] | None, extra: str | None) -> None:
        env = dict(os.environ)
        paths = [str(HERE.parent), str(HERE.parents[1])]
        env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        cmd = [sys.executable, "-m", "legacy_cases.worker", log, "--workdir", os.path.dirname(log)]
        if contenders:
            cmd += ["--contenders", ",".join(contenders)]
        if extra:
            cmd += ["--extra", extra]
        self.log = log
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._buffer = b""

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()

    def read(self, timeout_s: float) -> dict[str, Any] | None:
        """The next protocol message; None at end of stream; TimeoutError past ``timeout_s``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], min(left, 5.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def stop(self, kill: bool = False) -> str:
        """End the worker; returns how it ended ("exit 0", "signal 11")."""
        if kill and self.proc.poll() is None:
            self.proc.kill()
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        return f"signal {-code}" if code < 0 else f"exit {code}"

    def last_log_line(self) -> str:
        try:
            lines = [ln.strip() for ln in Path(self.log).read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return lines[-1][:160] if lines else ""


def _contender_of(step: str | None) -> str | None:
    return step.split(" ", 1)[1] if step and " " in step else None


def run_cases(names: Sequence[str], workers: int = 2, step_timeout_s: float = 300.0,
              contenders: Sequence[str] | None = None, extra: str | None = None,
              on_result: Callable[[dict[str, Any]], None] | None = None,
              log_dir: str | None = None) -> list[dict[str, Any]]:
    """Every case of ``names`` through worker processes (``workers`` at a time); results in the
    order of ``names``. ``extra`` is a Python file with more ``CASES`` (tests)."""
    queue = list(names)
    results: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()
    logs = log_dir or tempfile.mkdtemp(prefix="legacy-cases-")
    os.makedirs(logs, exist_ok=True)

    def slot(index: int) -> None:
        worker: _Worker | None = None
        starts = 0
        while True:
            with lock:
                if not queue:
                    break
                name = queue.pop(0)
            failed: dict[str, str] = {}
            row: dict[str, Any] | None = None
            while row is None:
                if worker is None:
                    starts += 1
                    worker = _Worker(os.path.join(logs, f"worker{index}-{starts}.log"), contenders, extra)
                    try:
                        message = worker.read(READY_TIMEOUT_S)
                    except TimeoutError:
                        message = None
                    if not message or not message.get("ready"):
                        how = worker.stop(kill=True)
                        row = {"case": name, "case_error": f"worker did not start ({how}): {worker.last_log_line()}"}
                        worker = None
                        break
                step: str | None = None
                try:
                    worker.send({"case": name, "failed": failed})
                    while True:
                        message = worker.read(step_timeout_s)
                        if message is None:
                            how = worker.stop()
                            why = f"crashed ({how}; log: {worker.last_log_line()})"
                            break
                        if "step" in message:
                            step = message["step"]
                            continue
                        row = message
                        break
                except BrokenPipeError:
                    why = f"crashed ({worker.stop(kill=True)})"
                except TimeoutError:
                    worker.stop(kill=True)
                    why = f"timed out after {step_timeout_s:g} s"
                if row is not None:
                    break
                worker = None
                contender = _contender_of(step)
                if contender is None or contender in failed:
                    row = {"case": name, "case_error": f"worker {why} outside a contender's step"}
                    break
                failed[contender] = f"{why} during {step}"
            row.setdefault("case", name)
            deliver(row)
        if worker is not None:
            worker.stop()

    def deliver(row: dict[str, Any]) -> None:
        with lock:
            results[row["case"]] = row
            if on_result:
                on_result(row)

    threads = [threading.Thread(target=slot, args=(i,), daemon=True) for i in range(max(1, min(workers, len(queue))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if log_dir is None:
        shutil.rmtree(logs, ignore_errors=True)
    return [results[n] for n in names if n in results]
