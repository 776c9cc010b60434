"""The JSONL ledger: one record per call with DESIGN's fields, safe with concurrent processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import compat
from compat.records import ledger

ROOT = Path(__file__).resolve().parents[2]


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_records_for_ok_fallback_and_failure(models, small_net, tmp_path, monkeypatch):
    book = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    compat.export(small_net, (torch.randn(2, 4),), tmp_path / "a.onnx", route="legacy",
                  do_constant_folding=True)
    compat.export(models.TorchScriptOnly().eval(), (torch.rand(2, 4),), tmp_path / "b.onnx")
    with pytest.raises(compat.ExportFailed):
        compat.export(models.Unexportable(), (torch.rand(2, 2),), tmp_path / "c.onnx")
    recs = _records(book)
    assert len(recs) == 3
    for rec in recs:
        assert set(rec) == set(ledger.FIELDS) | set(ledger.SITE_FIELDS) | set(ledger.STAMP_FIELDS)
        assert rec["call_site"].startswith(__file__ + ":")
        # relative to the checkout's root (pyproject.toml): a moved checkout still matches
        assert rec["call_site_rel"] == "tests/core/test_ledger.py:" + rec["call_site"].rpartition(":")[2]
        assert rec["project_root"] == str(ROOT)
        assert rec["torch_version"] == torch.__version__
    a, b, c = recs
    assert (a["status"], a["route_requested"], a["route_taken"]) == ("ok", "legacy", "legacy")
    assert a["warnings"] == ["ONX104"] and a["output"] == str(tmp_path / "a.onnx")
    assert a["model"] == "SmallNet"
    assert (b["route_requested"], b["route_taken"]) == ("auto", "legacy")
    assert "NotImplementedError" in b["fallback_reason"]
    assert c["status"] == "failed" and c["route_taken"] is None and "ExportFailed" in c["error"]


def test_concurrent_processes_append_whole_lines(tmp_path):
    book = tmp_path / "ledger.jsonl"
    code = textwrap.dedent(f"""
        import sys
        from compat.records import ledger
        for i in range(200):
            ledger.append({str(book)!r}, {{"call_site": "p" + sys.argv[1], "i": i, "pad": "x" * 3000}})
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n)]) for n in range(4)]
    assert all(p.wait(timeout=600) == 0 for p in procs)
    recs = _records(book)
    assert len(recs) == 800
    for n in range(4):
        assert [r["i"] for r in recs if r["call_site"] == f"p{n}"] == list(range(200))
