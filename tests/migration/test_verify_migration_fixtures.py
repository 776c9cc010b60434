"""A migration never changes the model, proven by ``verify-migration`` on every legacy script of
tests/migration/fixtures and examples/ (issue 18.8).

Each script runs unchanged under the shim with its own ledger (``compat run --ledger``); a copy
of the tree is migrated with ``--write --unsafe-fixes --ledger``; the migrated copy runs on plain
torch with ``compat run --observe --ledger``; ``verify-migration`` compares the two ledgers'
models call site by call site and must exit 0. The scripts of one run share an interpreter
(tests/helpers/run_scripts.py: torch imported once, each script its own ledger), so the module
costs two script runs plus the migration, not two per script.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm

from compat.tools.verify_migration import PASSING, to_text, verify
from migration.cli import main as migrate

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = ROOT / "examples"
HF_FIXTURES = ROOT / "tests" / "hf" / "fixtures"

#: script -> (its source, arguments: "file" for an output path, "dir" for an output folder, or
#: a list with "OUT" for the output path). Order of the runs: custom_symbolic.py and
#: custom_symbolic_export.py register symbolics for the rest of the process, so they run last.
SCRIPTS: dict[str, tuple[Path, object]] = {
    **{p.name: (p, "file") for p in sorted((FIXTURES / "legacy_scripts").glob("*.py"))
       if p.name != "custom_symbolic.py"},
    **{name: (EXAMPLES / name, "dir") for name in
       ("control_flow_export.py", "deploy_single_file.py", "legacy_1x_export.py")},
    "hf_export_427_branch.py": (FIXTURES / "hf_export_427_branch.py", ["bert", "OUT"]),
    "custom_symbolic.py": (FIXTURES / "legacy_scripts" / "custom_symbolic.py", "file"),
    # registers a gelu symbolic for the rest of the process: last
    "custom_symbolic_export.py": (EXAMPLES / "custom_symbolic_export.py", "dir"),
}
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None

def test_every_legacy_script_is_covered():
    """New fixture or example scripts join this test (demo.py drives the others)."""
    on_disk = {p.name for p in (FIXTURES / "legacy_scripts").glob("*.py")}
    on_disk |= {p.name for p in EXAMPLES.glob("*.py")} - {"demo.py"}
    on_disk.add("hf_export_427_branch.py")
    assert on_disk == set(SCRIPTS)


def _argv(kind: object, out: Path) -> list[str]:
    if kind == "file":
        return [str(out / "model.onnx")]
    if kind == "dir":
        return [str(out)]
    return [str(out / "model.onnx") if a == "OUT" else str(a) for a in kind]  # type: ignore[union-attr]


def _run_all(tree: Path, names: list[str], ledgers: Path, outs: Path, observe: bool) -> subprocess.CompletedProcess:
    spec = []
    for name in names:
        out = outs / name.removesuffix(".py")
        out.mkdir(parents=True)
        spec.append({"script": str(tree / name), "argv": _argv(SCRIPTS[name][1], out),
                     "ledger": str(ledgers / f"{name}.jsonl")})
    spec_file = ledgers / "spec.json"
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HF_FIXTURES)])}
    mode = ["--observe"] if observe else []
    return warm_python.run(
        [sys.executable, "-W", "ignore", "-m", "compat", "run", "-q", *mode, "--ledger",
         str(ledgers / "other.jsonl"), str(ROOT / "tests" / "helpers" / "run_scripts.py"), str(spec_file)],
        cwd=tree, env=env, capture_output=True, text=True, timeout=1800, check=False)


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory):
    """{script: (the shim's ledger of the original, the observed ledger of the migrated copy)}.
    Under xdist the workers share one computation (the first builds it under a lock)."""
    names = [n for n in SCRIPTS if HAS_TRANSFORMERS or n != "hf_export_427_branch.py"]
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run_id is None:
        return _build(tmp_path_factory.mktemp("verify-fixtures"), names)
    import fcntl

    shared = tmp_path_factory.getbasetemp().parent / f"verify-fixtures-{run_id}"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "done.json"
        if not done.is_file():
            result = _build(shared, names)
            done.write_text(json.dumps({n: [str(a), str(b)] for n, (a, b) in result.items()}))
    return {n: (Path(a), Path(b)) for n, (a, b) in json.loads(done.read_text()).items()}


def _build(base: Path, names: list[str]) -> dict[str, tuple[Path, Path]]:
    old = base / "old"
    old.mkdir()
    (old / "pyproject.toml").write_text("[project]\nname = 'legacy-exports'\nversion = '0'\n")
    for name in names:
        shutil.copy(SCRIPTS[name][0], old / name)
    started = time.perf_counter()
    (base / "L-old").mkdir()
    shim = _run_all(old, names, base / "L-old", base / "out-old", observe=False)
    assert shim.returncode == 0, shim.stderr[-5000:]
    mig = base / "mig"
    shutil.copytree(old, mig)
    old_ledgers = [str(base / "L-old" / f"{n}.jsonl") for n in names
                   if (base / "L-old" / f"{n}.jsonl").is_file()]
    assert len(old_ledgers) == len(names)
    args = ["--write", "--unsafe-fixes", "-q"] + [a for p in old_ledgers for a in ("--ledger", p)]
    assert migrate([*args, str(mig)]) in (0, 1)  # 1: findings left for the user (ONX501, ...)
    (base / "L-new").mkdir()
    observed = _run_all(mig, names, base / "L-new", base / "out-new", observe=True)
    print(f"\nverify-migration fixtures: shim run, migration and observed run of {len(names)} "
          f"scripts took {time.perf_counter() - started:.0f} s; observed run's failures: "
          f"{observed.returncode}", file=sys.stderr)
    return {n: (base / "L-old" / f"{n}.jsonl", base / "L-new" / f"{n}.jsonl") for n in names}


def _case(name: str):
    marks = [pytest.mark.slow]
    if name == "hf_export_427_branch.py":
        marks.append(pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers not installed"))
    return pytest.param(name, marks=marks, id=name.removesuffix(".py"))


@pytest.mark.parametrize("script", [_case(n) for n in SCRIPTS])
def test_migrated_script_exports_what_the_shim_exported(ledgers, script):
    old, new = ledgers[script]
    assert new.is_file(), f"the migrated {script} recorded no export"
    rows = verify(str(old), str(new))
    text = to_text(rows, old.name, new.name)
    assert rows and all(r.verdict in PASSING for r in rows), text
