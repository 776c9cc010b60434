"""``run``: ``subprocess.run`` for ``[sys.executable, ...]`` commands that import torch, served by a
fork of a warm interpreter (``fork_server.py``: numpy, torch, onnx, onnxscript imported once a test
process) instead of a fresh one that pays the imports each time.

Use it where the point of the test is what the command does, not that its interpreter is new. Keep
``subprocess.run`` where the test is about imports (what a command imports, import-time cost),
packaging (wheels, venvs, ``-S`` site layouts, another checkout on PYTHONPATH), or process-level
state (concurrent processes, signals, a process killed mid-write), and for commands that never
import torch (the rewriter), where a fresh interpreter costs little and the warm one would hold
torch in ``sys.modules``.

A command this cannot serve exactly runs in a fresh interpreter through ``subprocess.run``: another
executable, an interpreter option other than ``-W``/``-m``/``-c``, an environment that differs from
the server's in a variable read when torch & co. are imported (``TORCH*`` other than this
project's and TORCHINDUCTOR_CACHE_DIR, ``OMP_*``, ``MKL_*``, ``LD_*``, ``PYTHON*`` other than PYTHONPATH/PYTHONWARNINGS/
PYTHONDONTWRITEBYTECODE/PYTHONIOENCODING/PYTHONUNBUFFERED), stdout/stderr given as file objects.
``TORCH_ONNX_COMPAT_FRESH_TESTS=1`` sends every command to a fresh interpreter (the comparison the
fork server is measured against, and a way out if it is ever suspected).
"""

from __future__ import annotations

import atexit
import io
import json
import locale
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("fork_server.py")
FRESH_ENV = "TORCH_ONNX_COMPAT_FRESH_TESTS"
_CHILD_READ = ("PYTHONPATH", "PYTHONWARNINGS", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PYTHONUNBUFFERED")
_IMPORT_TIME = ("TORCH", "OMP_", "MKL_", "KMP_", "GOMP_", "LD_", "PYTHON", "ORT_", "ONNX")
# read when used, from the child's environ: this project's settings, and the cache folder torch's
# inductor writes into os.environ itself on first use (so a test process has it, the server not)
_NOT_IMPORT_TIME = ("TORCH_ONNX_COMPAT_", "TORCHINDUCTOR_CACHE_DIR", *_CHILD_READ)


def _import_time_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_IMPORT_TIME) and not k.startswith(_NOT_IMPORT_TIME)}


class _Server:
    """One fork server for this process, started on first use."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="fork-server-"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_IMPORT_TIME)}
        self.log = self.tmp / "server.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, env=self.env, cwd=self.tmp)
        self.count = 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(payload).encode() + b"\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            self.proc.wait()
            raise RuntimeError(f"fork server exited with {self.proc.returncode}: {self.log.read_text()}")
        return json.loads(answer)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


_server: _Server | None = None


def _get_server() -> _Server:
    global _server
    if _server is None or not _server.alive():
        _server = _Server()
        atexit.register(_server.close)
    return _server


def _plan(args: Any, env: dict[str, str]) -> dict[str, Any] | None:
    """What the fork server should run for ``args``, or None when only a fresh interpreter can."""
    if os.environ.get(FRESH_ENV) or not isinstance(args, (list, tuple)) or not args:
        return None
    args = [os.fspath(a) for a in args]
    if args[0] != sys.executable:
        return None
    options: list[str] = []
    rest = args[1:]
    while rest and rest[0].startswith("-W"):
        if rest[0] == "-W":
            if len(rest) < 2:
                return None
            options.append(rest[1])
            rest = rest[2:]
        else:
            options.append(rest[0][2:])
            rest = rest[1:]
    if not rest:
        return None
    if rest[0] in ("-m", "-c"):
        if len(rest) < 2:
            return None
        kind = "module" if rest[0] == "-m" else "code"
        target, rest = rest[1], rest[2:]
    elif rest[0].startswith("-"):
        return None
    else:
        kind, target, rest = "script", rest[0], rest[1:]
    server_env = _server.env if _server is not None and _server.alive() else {
        k: v for k, v in os.environ.items() if not k.startswith(_NOT_IMPORT_TIME)}
    if _import_time_env(env) != _import_time_env(server_env):
        return None
    return {"kind": kind, "target": target, "options": options, "args": rest}


def _decode(data: bytes, encoding: str | None, errors: str | None) -> str:
    wrapper = io.TextIOWrapper(io.BytesIO(data), encoding=encoding or locale.getpreferredencoding(False),
                               errors=errors)
    return wrapper.read()


def run(args: Any, *, cwd: Any = None, env: dict[str, str] | None = None, input: Any = None,
        capture_output: bool = False, stdout: Any = None, stderr: Any = None, text: bool = False,
        universal_newlines: bool | None = None, encoding: str | None = None, errors: str | None = None,
        timeout: float | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """``subprocess.run(args, ...)`` with the same result, from a fork of the warm interpreter."""
    env = dict(os.environ if env is None else env)
    kwargs = dict(cwd=cwd, env=env, input=input, capture_output=capture_output, stdout=stdout,
                  stderr=stderr, text=text, universal_newlines=universal_newlines, encoding=encoding,
                  errors=errors, timeout=timeout, check=check)
    plan = _plan(args, env)
    if capture_output:
        if stdout is not None or stderr is not None:
            raise ValueError("stdout and stderr arguments may not be used with capture_output.")
        stdout = stderr = subprocess.PIPE
    allowed = (None, subprocess.PIPE, subprocess.DEVNULL)
    if plan is None or stdout not in allowed or stderr not in (*allowed, subprocess.STDOUT):
        return subprocess.run(args, **kwargs)
    textual = bool(text or universal_newlines or encoding or errors)
    server = _get_server()
    server.count += 1
    base = server.tmp / f"r{server.count}"
    paths = {"stdin": os.devnull, "stdout": f"{base}.out", "stderr": f"{base}.err"}
    if input is not None:
        paths["stdin"] = f"{base}.in"
        data = input.encode(encoding or locale.getpreferredencoding(False)) if isinstance(input, str) else input
        Path(paths["stdin"]).write_bytes(data)
    if stdout == subprocess.DEVNULL:
        paths["stdout"] = os.devnull
    if stderr == subprocess.DEVNULL:
        paths["stderr"] = os.devnull
    for key in ("stdout", "stderr"):
        if paths[key] != os.devnull:
            Path(paths[key]).write_bytes(b"")
    if stderr == subprocess.STDOUT:
        paths["stderr"] = paths["stdout"]
    answer = server.request({**plan, **paths, "cwd": os.path.abspath(cwd or os.getcwd()), "env": env,
                             "timeout": timeout})
    outputs = {}
    for key, wanted in (("stdout", stdout), ("stderr", stderr)):
        path = paths[key]
        data = b"" if path == os.devnull or wanted == subprocess.STDOUT else Path(path).read_bytes()
        if wanted is None:  # inherited: where the caller's own output goes
            getattr(sys, key).flush()
            os.write(1 if key == "stdout" else 2, data)
            outputs[key] = None
        elif wanted == subprocess.PIPE:
            outputs[key] = _decode(data, encoding, errors) if textual else data
        else:
            outputs[key] = None
    for path in {paths["stdin"], paths["stdout"], paths["stderr"]} - {os.devnull}:
        Path(path).unlink(missing_ok=True)
    if answer["timed_out"]:
        raise subprocess.TimeoutExpired(args, timeout, output=outputs["stdout"], stderr=outputs["stderr"])
    done = subprocess.CompletedProcess(args, answer["returncode"], outputs["stdout"], outputs["stderr"])
    if check:
        done.check_returncode()
    return done
