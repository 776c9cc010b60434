"""Warnings only for the user's code (issue 18.5): an installed library that calls
``torch.onnx.register_custom_op_symbolic`` at import (as torchvision does in
``ops/_register_onnx_ops.py``) gets no ``Migrate with:`` hint, is not attributed to the user's
export call (its record's ``warnings``, the report's usages), and is reported apart once per
distribution. The library is a real wheel installed with pip (``--target``, as a site folder)."""

from __future__ import annotations

import base64
import importlib.metadata
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm

ROOT = Path(__file__).resolve().parents[2]

#: the library's import-time registrations, torchvision-style (four symbolics)
LIB_INIT = '''\
import torch


def _roi_align(g, *args):
    return g.op("tinyops::RoiAlign", *args)


def _register():
    for name in ("roi_align", "roi_pool", "ps_roi_align", "nms"):
        torch.onnx.register_custom_op_symbolic(f"tinyops::{name}", _roi_align, 11)


_register()
'''

USER_SCRIPT = '''\
import sys

import torch

import tinyops  # registers its symbolics at import


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))


torch.onnx.export(Net().eval(), (torch.randn(2, 4),), sys.argv[1], dynamo=True)
'''


def _wheel(folder: Path) -> Path:
    """``tinyops-0.3.1-py3-none-any.whl``, built by hand (RECORD with hashes, as pip checks)."""
    files = {
        "tinyops/__init__.py": LIB_INIT.encode(),
        "tinyops-0.3.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinyops\nVersion: 0.3.1\n",
        "tinyops-0.3.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                                         b"Tag: py3-none-any\n",
        "tinyops-0.3.1.dist-info/top_level.txt": b"tinyops\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tinyops-0.3.1.dist-info/RECORD,,")
    files["tinyops-0.3.1.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / "tinyops-0.3.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel installed by pip into a site folder of its own; a user project beside it."""
    base = tmp_path_factory.mktemp("third-party")
    site = base / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                          "--target", str(site), str(_wheel(base))],
                         capture_output=True, text=True, timeout=600, check=False)
    assert pip.returncode == 0, pip.stderr
    assert (site / "tinyops" / "__init__.py").is_file() and (site / "tinyops-0.3.1.dist-info").is_dir()
    project = base / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'user'\nversion = '0'\n")
    (project / "export_it.py").write_text(USER_SCRIPT)
    return base, site, project


def _run(base, site, project, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    return warm_python.run([sys.executable, "-m", "compat", "run", *args], cwd=project, env=env,
                           capture_output=True, text=True, timeout=600, check=False)


LINE = ("third-party legacy usage: tinyops 0.3.1 registers 4 symbolics "
        "(ONX301; not your code, nothing to migrate)")


@pytest.mark.parametrize("explain", [False, True], ids=["one-line", "explain"])
def test_library_usage_is_reported_apart_not_attributed(installed, explain):
    base, site, project = installed
    ledger = base / f"L-{explain}.jsonl"
    out = base / f"m-{explain}.onnx"
    proc = _run(base, site, project, *(["--explain"] if explain else []), "--ledger", str(ledger),
                "export_it.py", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    err = proc.stderr
    # the terminal: one line for the distribution, at exit; no hint to migrate the library's file
    assert err.count(LINE) == 1, err
    assert "Migrate with" not in err and str(site) not in err
    assert "ONX301" not in err.replace(LINE, "")
    (rec,) = [json.loads(x) for x in ledger.read_text().splitlines()]
    assert rec["status"] == "ok" and "ONX301" not in rec["warnings"]
    assert rec["third_party"] == [{"distribution": "tinyops", "version": "0.3.1", "code": "ONX301",
                                   "api": "torch.onnx.register_custom_op_symbolic", "count": 4}]
    assert rec["call_site_rel"].startswith("export_it.py:")

    from compat.tools import report, report_html

    data = report.build(report.read_ledgers([str(ledger)])[0], [str(ledger)])
    assert "ONX301" not in {u["code"] for u in data["legacy_usages"]}
    assert [t["line"] for t in data["third_party_usages"]] == [LINE]
    md = report.to_markdown(data)
    assert "### Third-party legacy usage" in md and f"- {LINE}" in md
    page = report_html.to_html(data)
    assert 'id="third-party"' in page and "registers 4 symbolics" in page


def test_report_merges_runs_once_per_distribution(tmp_path):
    """Two runs of the same script (each record carries its process's tally): one line, not 8."""
    from compat.tools import report

    usage = {"distribution": "tinyops", "version": "0.3.1", "code": "ONX301",
             "api": "torch.onnx.register_custom_op_symbolic", "count": 4}
    recs = [{"call_site": f"/p/a.py:{n}", "route_taken": "dynamo", "status": "ok", "warnings": [],
             "third_party": [usage]} for n in (3, 9, 3)]
    recs.append({"call_site": "/p/b.py:1", "route_taken": "dynamo", "status": "ok",
                 "third_party": "junk"})  # a malformed field is ignored, the record still counts
    data = report.build(recs)
    assert data["calls"] == 4 and [t["line"] for t in data["third_party_usages"]] == [LINE]


def test_user_code_registering_a_symbolic_is_still_warned_and_recorded(tmp_path, monkeypatch):
    """The user's own registration keeps its warning and goes to the next export's record."""
    import warnings

    import torch

    import compat
    from compat.policy import notices

    book = tmp_path / "L.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    with compat.patch(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.onnx.register_custom_op_symbolic("mine::op", lambda g, x: x, 11)
        compat.export(torch.nn.Linear(2, 2).eval(), (torch.randn(1, 2),), tmp_path / "m.onnx",
                      route="legacy")
        torch.onnx.unregister_custom_op_symbolic("mine::op", 11)
    assert any(getattr(w.message, "code", None) == "ONX301" and w.filename == __file__ for w in caught)
    rec = json.loads(book.read_text())
    assert "ONX301" in rec["warnings"] and "third_party" not in rec
    assert notices.third_party_usages() == []


def test_distribution_of_files():
    import torch

    from compat.policy import notices, third_party

    dist = third_party.distribution_of(torch.onnx.__file__, "torch.onnx")
    # The installed distribution's version, as pip lists it: a wheel's metadata may lack the
    # local build tag torch.__version__ carries (2.15.0 against 2.15.0+cu132).
    assert dist is not None and dist.name == "torch"
    assert dist.version == importlib.metadata.version("torch")
    assert torch.__version__.startswith(dist.version)
    assert third_party.distribution_of(__file__, __name__) is None  # this project's own tests
    assert third_party.distribution_of(notices.__file__, notices.__name__) is None
    assert third_party.distribution_of("<stdin>", "__main__") is None


def test_installed_beside_counts_a_dist_info_not_an_egg_info(tmp_path, monkeypatch):
    """``pip install --target`` leaves a .dist-info beside the package: third-party. ``setup.py
    develop`` leaves an .egg-info beside the user's own package: still the user's code."""
    from compat.policy import third_party

    project = tmp_path / "proj"
    (project / "src" / "mypkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    (project / "src" / "mypkg" / "__init__.py").write_text("")
    (project / "src" / "mypkg.egg-info").mkdir()
    (project / "src" / "mypkg.egg-info" / "top_level.txt").write_text("mypkg\n")
    (project / "run.py").write_text("")
    vendored = project / "vendor"
    (vendored / "lib").mkdir(parents=True)
    (vendored / "lib" / "ops.py").write_text("")
    (vendored / "lib-1.0.dist-info").mkdir()
    (vendored / "lib-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: lib\nVersion: 1.0\n")
    (vendored / "lib-1.0.dist-info" / "top_level.txt").write_text("lib\n")
    monkeypatch.setattr(sys.modules["__main__"], "__file__", str(project / "run.py"), raising=False)
    third_party.distribution_of.cache_clear()
    try:
        assert third_party.distribution_of(str(project / "src" / "mypkg" / "__init__.py"), "mypkg") is None
        found = third_party.distribution_of(str(vendored / "lib" / "ops.py"), "lib.ops")
        assert found == third_party.Distribution("lib", "1.0")
        outside = tmp_path / "elsewhere" / "helper.py"  # outside the running script's project
        outside.parent.mkdir()
        outside.write_text("")
        assert third_party.distribution_of(str(outside), "helper") == third_party.Distribution("helper", "")
    finally:
        third_party.distribution_of.cache_clear()
