"""A ledger survives a move of the checkout (issue 18.4): call sites are recorded with their path
relative to the project root (the nearest pyproject.toml or .git) and matched by it, then by path
suffix; a ledger that matches nothing in the tree is a usage error (exit 2) naming both roots."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm

from migration.cli import main
from migration.ledger import LedgerIndex, read

# slow (records a ledger from real exports in fresh processes): CI runs it in its own step, `make test-slow`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: a forward torch.export cannot capture (it refuses while exporting; a data-dependent branch would
#: be baked on the torch.export route now): the shim falls back to the TorchScript route; without
#: a ledger the rewriter would move the call to the torch.export route
GATE = """\
import os
import sys

import torch


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, x):
        if torch.compiler.is_exporting():
            raise NotImplementedError("this model has no torch.export capture")
        h = self.proj(x)
        if h.sum() > 0:
            return torch.tanh(h)
        return torch.sigmoid(h)


torch.manual_seed(1)
model = Gate().eval()
torch.onnx.export(model, (torch.rand(2, 6),), os.path.join(sys.argv[1], "gate.onnx"),
                  input_names=["x"], output_names=["y"])
"""


def _shim_run(script: Path, ledger: Path, out: Path, cwd: Path) -> subprocess.CompletedProcess:
    # its own route memory: a decision remembered by another run never routes this one
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCH_ONNX_COMPAT_CACHE_DIR": str(out.parent / "cache")}
    return warm_python.run([sys.executable, "-m", "compat", "run", "--ledger", str(ledger),
                            str(script), str(out)], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """``old/`` (a project: pyproject.toml, tools/gate.py) run under the shim with a ledger: the
    model falls back to the TorchScript route, which the ledger records."""
    base = tmp_path_factory.mktemp("moves")
    old = base / "old"
    (old / "tools").mkdir(parents=True)
    (old / "pyproject.toml").write_text("[project]\nname = 'gate'\nversion = '0'\n")
    (old / "tools" / "gate.py").write_text(GATE)
    ledger = base / "L.jsonl"
    out = base / "out"
    out.mkdir()
    proc = _shim_run(old / "tools" / "gate.py", ledger, out, old)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return base, old, ledger


def test_records_name_the_call_site_relative_to_the_project_root(recorded):
    _, old, ledger = recorded
    (rec,) = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert rec["route_taken"] == "legacy"
    assert rec["project_root"] == str(old)
    line = rec["call_site"].rpartition(":")[2]
    assert rec["call_site"] == f"{old / 'tools' / 'gate.py'}:{line}"
    assert rec["call_site_rel"] == f"tools/gate.py:{line}"


@pytest.mark.parametrize("keep_marker", [True, False], ids=["pyproject", "no-marker"])
def test_copied_tree_gets_the_ledgers_decisions(recorded, capsys, monkeypatch, keep_marker):
    """old/ copied to mig1/ (with or without its pyproject.toml): migrate with the ledger pins
    the route the ledger shows, exactly as on old/ itself."""
    base, old, ledger = recorded
    mig = base / f"mig-{keep_marker}"
    shutil.copytree(old, mig)
    if not keep_marker:
        (mig / "pyproject.toml").unlink()
    monkeypatch.chdir(base)
    assert main(["--write", "--unsafe-fixes", "--ledger", str(ledger), str(mig)]) == 0
    err = capsys.readouterr().err
    assert "error" not in err and "warning" not in err
    text = (mig / "tools" / "gate.py").read_text()
    assert "dynamo=False" in text and "# compat.migrate: dynamo=False (ledger: " in text
    # without the ledger the same call would be moved to the torch.export route
    bare = base / f"bare-{keep_marker}"
    shutil.copytree(old, bare)
    assert main(["--write", "--unsafe-fixes", str(bare)]) == 0
    assert "dynamo=False" not in (bare / "tools" / "gate.py").read_text()


def test_ledger_of_another_tree_is_a_usage_error_naming_both_roots(recorded, tmp_path, capsys):
    _, old, ledger = recorded
    other = tmp_path / "other"
    (other / "tools").mkdir(parents=True)
    (other / ".git").mkdir()  # a checkout root
    (other / "tools" / "export_gate.py").write_text(GATE)  # another file name: nothing matches
    before = (other / "tools" / "export_gate.py").read_text()
    assert main(["--write", "--ledger", str(ledger), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m compat.migrate: error: no call site of the ledger")
    assert f"under {old}" in err and f"rooted at {other}" in err
    assert (other / "tools" / "export_gate.py").read_text() == before  # nothing written


def test_a_file_of_the_ledgers_tree_without_recorded_calls_is_no_error(recorded, tmp_path, capsys):
    """pre-commit passes only the changed files: a ledger of this project whose calls are in
    other files of it is not an error."""
    _, old, ledger = recorded
    mig = tmp_path / "mig"
    shutil.copytree(old, mig)
    other = mig / "tools" / "other.py"
    other.write_text("import torch\ntorch.onnx.export(m, x, 'o.onnx')\n")
    assert main(["--check", "--ledger", str(ledger), str(other)]) == 1
    assert "error" not in capsys.readouterr().err


def test_empty_ledger_is_a_usage_error(tmp_path, capsys):
    src = tmp_path / "a.py"
    src.write_text("import torch\ntorch.onnx.export(m, x, 'a.onnx')\n")
    ledger = tmp_path / "L.jsonl"
    ledger.write_text("")
    assert main(["--check", "--ledger", str(ledger), str(src)]) == 2
    assert "holds no export call record" in capsys.readouterr().err


# -- matching, statically -------------------------------------------------------------------

def _index(*records: dict, tree: str = "/") -> LedgerIndex:
    index = LedgerIndex(tree_roots=(tree,))
    for r in records:
        index.add({"status": "ok", "route_taken": "legacy", **r}, "/")
    return index


def test_relative_site_matches_a_flat_copy_where_suffixes_do_not(tmp_path):
    """No marker anywhere (the script's folder was the root): ``old/run.py`` recorded as
    ``run.py`` matches ``mig1/run.py``; an old record without ``call_site_rel`` does not (only
    the file name agrees)."""
    mig = tmp_path / "mig1"
    mig.mkdir()
    (mig / "run.py").write_text("")
    new = _index({"call_site": "/elsewhere/old/run.py:7", "call_site_rel": "run.py:7"}, tree=str(mig))
    assert list(new.evidence(str(mig / "run.py"))) == [7]
    legacy = _index({"call_site": "/elsewhere/old/run.py:7"}, tree=str(mig))
    assert legacy.evidence(str(mig / "run.py")) == {}


def test_exact_relative_path_beats_a_longer_suffix(tmp_path):
    """Two recorded files end alike; the one whose path relative to the root is the file's wins."""
    proj = tmp_path / "proj"
    (proj / "a" / "src").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("")
    target = proj / "a" / "src" / "m.py"
    target.write_text("")
    index = _index(
        {"call_site": "/ci/x/a/src/m.py:3", "call_site_rel": "x/a/src/m.py:3", "fallback_reason": "long"},
        {"call_site": "/ci/y/a/src/m.py:3", "call_site_rel": "a/src/m.py:3", "fallback_reason": "exact"},
    )
    assert index.evidence(str(target))[3]["fallback_reason"] == "exact"


def test_read_keeps_observed_records_out_of_the_evidence(tmp_path):
    ledger = tmp_path / "L.jsonl"
    ledger.write_text(json.dumps({"call_site": "/p/a.py:3", "route_taken": "dynamo", "status": "ok",
                                  "mode": "observe"}) + "\n")
    assert read([str(ledger)]).sites == {}


def test_site_fields_fall_back_to_the_scripts_folder(tmp_path, monkeypatch):
    from compat.records import sites

    script = tmp_path / "old" / "run.py"
    script.parent.mkdir()
    script.write_text("")
    monkeypatch.setattr(sys.modules["__main__"], "__file__", str(script), raising=False)
    monkeypatch.chdir(tmp_path)
    assert sites.site_fields(f"{script}:4") == {"project_root": str(script.parent),
                                                "call_site_rel": "run.py:4"}
    (tmp_path / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git file marks a root
    sites._marked_root.cache_clear()
    assert sites.site_fields(f"{script}:4")["call_site_rel"] == "old/run.py:4"
    assert sites.site_fields("<stdin>:1") == {} and sites.site_fields("<unknown>:0") == {}
    sites._marked_root.cache_clear()
