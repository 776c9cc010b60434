"""The tests' fork server (tests/helpers/fork_server.py, warm_python.run) gives what a fresh
interpreter gives: the same ledger, model and output from a real ``compat run``, the same argv,
paths, environment, warnings, threads, exit status and traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import warm_python

ROOT = Path(__file__).resolve().parents[1]
TIMING = ("duration_s", "seconds", "recorded_at")


def _both(cmd: list[str], **kwargs) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    warm = warm_python.run(cmd, **kwargs)
    fresh = subprocess.run(cmd, **kwargs)
    return warm, fresh


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def test_compat_run_of_an_example_matches_a_fresh_interpreter(tmp_path: Path) -> None:
    results = {}
    for how, runner in (("warm", warm_python.run), ("fresh", subprocess.run)):
        out = tmp_path / how
        out.mkdir()
        proc = runner([sys.executable, "-m", "compat", "run", "--ledger", str(out / "l.jsonl"),
                       str(ROOT / "examples" / "legacy_1x_export.py"), str(out)],
                      cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        records = [json.loads(line) for line in (out / "l.jsonl").read_text().splitlines()]
        text = (proc.stdout + proc.stderr).replace(str(out), "OUT")
        results[how] = (_untimed(json.loads(json.dumps(records).replace(str(out), "OUT"))), text,
                        (out / "classifier.onnx").read_bytes())
    warm, fresh = results["warm"], results["fresh"]
    assert warm[0] == fresh[0]  # the ledger, model sha256 included
    assert warm[0][0]["status"] == "ok" and warm[0][0]["acceptance"]["status"] == "passed"
    assert warm[1] == fresh[1]  # every line printed, warnings included
    assert warm[2] == fresh[2]


PROBE = textwrap.dedent("""
    import json, os, sys, warnings
    first = sorted(m for m in ("compat", "legacy", "dynamo", "migration") if m in sys.modules)
    import torch
    import helper_mod
    warnings.warn("shown once per location")
    for _ in range(2):
        warnings.warn("in a loop")
    print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__, "file": __file__,
                      "cwd": os.getcwd(), "env": os.environ.get("PROBE_VALUE"), "stdin": sys.stdin.read(),
                      "project_modules_at_start": first, "threads": torch.get_num_threads(),
                      "helper": helper_mod.VALUE, "sum": float(torch.ones(300, 300).sum())}))
    sys.stderr.write("to stderr\\n")
    if sys.argv[-1] == "raise":
        raise ValueError("boom")
    sys.exit(int(sys.argv[-1]))
""")


@pytest.mark.parametrize("last", ["0", "3", "raise"])
def test_a_script_sees_what_a_fresh_interpreter_gives_it(tmp_path: Path, last: str) -> None:
    (tmp_path / "helper_mod.py").write_text("VALUE = 7\n")
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**os.environ, "PROBE_VALUE": "from the env"}
    env.pop("PYTHONWARNINGS", None)
    warm, fresh = _both([sys.executable, "probe.py", "--flag", last], cwd=tmp_path, env=env, input="typed",
                        capture_output=True, text=True, timeout=300)
    assert (warm.returncode, warm.stdout, warm.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert warm.returncode == {"0": 0, "3": 3, "raise": 1}[last]
    seen = json.loads(warm.stdout)
    assert seen["argv"] == ["probe.py", "--flag", last] and seen["path0"] == str(tmp_path)
    assert seen["stdin"] == "typed" and seen["env"] == "from the env" and seen["project_modules_at_start"] == []
    assert warm.stderr.count("UserWarning") == 2 and "to stderr" in warm.stderr
    assert ("ValueError: boom" in warm.stderr) == (last == "raise")
    assert "fork_server" not in warm.stderr


def test_warning_options_and_module_runs(tmp_path: Path) -> None:
    code = "import sys, warnings; print(sys.argv, sys.path[0] == ''); warnings.warn('w'); print('after')"
    for options in ([], ["-W", "error::UserWarning"], ["-Wignore"]):
        warm, fresh = _both([sys.executable, *options, "-c", code, "x"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300)
        assert (warm.returncode, warm.stdout, warm.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    warm, fresh = _both([sys.executable, "-m", "compat", "run", "--version"], cwd=tmp_path, capture_output=True,
                        text=True, timeout=300)
    assert (warm.returncode, warm.stdout, warm.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    merged, fresh = _both([sys.executable, "-c", "import sys; print('o', flush=True); print('e', file=sys.stderr)"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    assert merged.stdout == fresh.stdout == b"o\ne\n" and merged.stderr is None


def test_a_timeout_kills_the_child_and_the_server_serves_on() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        warm_python.run([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(120)"],
                        capture_output=True, timeout=3)
    again = warm_python.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, timeout=300)
    assert again.stdout == "42\n"


@pytest.mark.parametrize("cmd, env", [
    (["-S", "-c", "pass"], {}),
    (["-X", "importtime", "-c", "pass"], {}),
    (["-c", "pass"], {"OMP_NUM_THREADS": "1"}),
    (["-c", "pass"], {"TORCH_LOGS": "+dynamo"}),
])
def test_what_the_server_cannot_give_exactly_runs_fresh(cmd: list[str], env: dict[str, str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(warm_python.FRESH_ENV, raising=False)
    assert warm_python._plan([sys.executable, *cmd], {**os.environ, **env}) is None
    assert warm_python._plan(["/usr/bin/python3", "-c", "pass"], dict(os.environ)) is None
    # read when used, from the child's environ: served warm
    for name, value in (("TORCH_ONNX_COMPAT_ROUTE", "legacy"), ("TORCHINDUCTOR_CACHE_DIR", "/tmp/elsewhere"),
                        ("PYTHONPATH", "/tmp/elsewhere"), ("PYTHONWARNINGS", "error")):
        assert warm_python._plan([sys.executable, "-c", "pass"], {**os.environ, name: value}), name
