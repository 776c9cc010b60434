"""A fork server for the tests: one interpreter imports numpy, torch, onnx and onnxscript once,
then forks a child per request that runs ``python [-W OPT]... (-m MOD | -c CODE | SCRIPT) ARGS...``
as a fresh interpreter would, with the request's argv, cwd, env, stdin, stdout and stderr.

Started by ``warm_python.py`` (the client) as ``python fork_server.py``. Protocol: one JSON request a
line on stdin, ``{"argv", "cwd", "env", "stdin", "stdout", "stderr", "timeout"}`` (the three streams
are file paths), one JSON answer a line on stdout, ``{"returncode", "timed_out"}``.

What makes a child look fresh:
- the project's own code (``compat``, ``legacy``, ``dynamo``, ``migration``) is never imported here,
  so it is imported in the child, under the child's argv and env (``compat.commands`` reads argv[0]);
- no torch op runs here before the fork (no intra-op thread pool exists; the only thread besides the
  main one is OpenBLAS's, checked at start), so the child's torch sizes its pool from the child's
  env as a fresh one does;
- the child gets a new ``__main__`` module, ``sys.argv``, ``sys.path`` (path[0] as Python sets it,
  then PYTHONPATH, then the site's), warnings filters rebuilt from PYTHONWARNINGS and ``-W``, fresh
  ``sys.std*`` objects over its own fds 0/1/2, its own session (a timeout kills its process group);
- it exits through the interpreter's own shutdown (threads joined, atexit handlers, streams flushed),
  an uncaught exception printed by ``sys.excepthook`` without this file's frames, exit status 1.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import select
import signal
import sys
import time
import types
import warnings

# onnxruntime is left out: importing it starts a thread of its own (a fork copies none of it) and
# costs little; numpy first, because its OpenBLAS pool (which has fork handlers) starts at import.
PRELOAD = ("numpy", "torch", "onnx", "onnxscript")
_BASE_PATH = list(sys.path[1:])  # the site's path, without this file's folder
_BASE_FILTERS = list(warnings.filters)  # the defaults: the server starts without -W or PYTHONWARNINGS
_SERVER_STREAMS: list = []
_OWN_GLOBALS = globals()


def _threads() -> int:
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1


def _preload() -> None:
    importlib.import_module(PRELOAD[0])
    expected = _threads()
    for name in PRELOAD[1:]:
        importlib.import_module(name)
    if _threads() != expected:  # a fork copies no thread: a lock one held would stay held
        raise SystemExit(f"fork_server: {_threads()} threads after importing {PRELOAD}, {expected} "
                         "after numpy; cannot fork safely")
    import gc

    gc.freeze()  # the imported heap stays shared with the children (no copy on their first gc)


def _wait(pid: int, timeout: float | None) -> tuple[int, bool]:
    """The child's exit status as subprocess gives it, and whether it was killed for the timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    fd = os.pidfd_open(pid)
    try:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                break
            if deadline is not None and time.monotonic() >= deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status = os.waitpid(pid, 0)
                return os.waitstatus_to_exitcode(status), True
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), False


def serve() -> dict:
    """Answer requests until stdin closes; returns (in the forked child only) the child's request."""
    _preload()
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            raise SystemExit(0)
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            answers.close()
            return request
        returncode, timed_out = _wait(pid, request.get("timeout"))
        answers.write(json.dumps({"returncode": returncode, "timed_out": timed_out}) + "\n")
        answers.flush()


def _redirect(request: dict) -> None:
    os.setsid()
    for fd, key, flags in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY)):
        if key == "stderr" and request["stderr"] == request["stdout"] != os.devnull:
            os.dup2(1, 2)  # stderr=STDOUT: one file, one offset
            continue
        opened = os.open(request[key], flags)
        os.dup2(opened, fd)
        os.close(opened)
    encoding = os.environ.get("PYTHONIOENCODING", "").split(":")[0] or sys.stdout.encoding
    _SERVER_STREAMS.extend((sys.stdin, sys.stdout, sys.stderr))  # never collected: they close fds 0-2
    sys.stdin = sys.__stdin__ = open(0, encoding=encoding, closefd=False)
    if os.environ.get("PYTHONUNBUFFERED"):  # what -u / PYTHONUNBUFFERED give a fresh interpreter
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding,
                                                       write_through=True)
        sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding,
                                                       "backslashreplace", write_through=True)
    else:
        sys.stdout = sys.__stdout__ = open(1, "w", encoding=encoding, closefd=False)
        sys.stderr = sys.__stderr__ = open(2, "w", encoding=encoding, errors="backslashreplace",
                                           closefd=False, buffering=1)


def _warning_filters(options: list[str]) -> None:
    """Library filters added by the preload stay in front of the -W / PYTHONWARNINGS ones, as they
    would when the imports follow a fresh interpreter's start."""
    current = list(warnings.filters)
    n_base = len(_BASE_FILTERS)
    if current[len(current) - n_base:] == _BASE_FILTERS:
        library, base = current[:len(current) - n_base], current[len(current) - n_base:]
    else:
        library, base = [], current
    warnings.filters[:] = base
    sys.warnoptions[:] = options
    warnings._processoptions(options)  # type: ignore[attr-defined]  # what startup runs
    warnings.filters[:0] = library
    warnings._filters_mutated()  # type: ignore[attr-defined]  # registries from the server expire


def _strip_own_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    while tb is not None and tb.tb_frame.f_globals is _OWN_GLOBALS:
        tb = tb.tb_next
    return tb


def run_child(request: dict) -> None:
    """Run the request as ``python ARGV`` would; raises SystemExit with its status."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    _redirect(request)
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    kind, target, options, args = request["kind"], request["target"], request["options"], request["args"]
    env_warnings = [w for w in os.environ.get("PYTHONWARNINGS", "").split(",") if w]
    _warning_filters(env_warnings + options)
    python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    importlib.invalidate_caches()  # folders the server listed may have changed since
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    try:
        if kind == "module":
            import runpy

            sys.path[:] = [os.getcwd(), *python_path, *_BASE_PATH]
            sys.argv = ["-m", *args]
            runpy._run_module_as_main(target, alter_argv=True)  # type: ignore[attr-defined]
        elif kind == "code":
            sys.path[:] = ["", *python_path, *_BASE_PATH]
            sys.argv = ["-c", *args]
            exec(compile(target, "<string>", "exec"), main.__dict__)
        else:
            sys.path[:] = [os.path.dirname(os.path.realpath(target)), *python_path, *_BASE_PATH]
            sys.argv = [target, *args]
            main.__file__ = os.path.abspath(target)
            main.__cached__ = None
            with open(target, "rb") as fh:
                source = fh.read()
            exec(compile(source, main.__file__, "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - printed as the interpreter prints an uncaught one
        tb = _strip_own_frames(exc.__traceback__)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        raise SystemExit(1) from None


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    run_child(serve())
