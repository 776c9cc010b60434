"""python -m compat report over ledgers written by real exports (two CI shards)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from scale_models import TorchScriptOnly, mlp

import compat
from compat.records import ledger
from compat.tools import report
from compat.tools.parity import compare

ROOT = Path(__file__).resolve().parents[2]


def _export(model, args, path, **options) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, args, str(path), **options)


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("shards")
    a, b = tmp / "shard-a.jsonl", tmp / "shard-b.jsonl"
    x = torch.randn(2, 4)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_ONNX_COMPAT_CACHE_DIR", str(tmp / "cache"))  # shared by both shards
        mp.delenv("TORCH_ONNX_COMPAT_ROUTE", raising=False)
        mp.setenv("TORCH_ONNX_COMPAT_LEDGER", str(a))
        _export(TorchScriptOnly(), (torch.randn(2, 3),), tmp / "dd.onnx")  # fallback: torch.export fails
        _export(mlp(), (x,), tmp / "mlp.onnx", route="legacy", input_names=["x"], dynamic_axes={"x": [0]})
        _export(mlp(), (x,), tmp / "mlp2.onnx")  # torch.export route
        mp.setenv("TORCH_ONNX_COMPAT_LEDGER", str(b))
        _export(TorchScriptOnly(), (torch.randn(2, 3),), tmp / "dd.onnx")  # remembered fallback
        _export(mlp(), (x,), tmp / "functions.onnx", export_modules_as_functions=True)
        with pytest.raises(compat.ExportFailed):
            _export(TorchScriptOnly(), (torch.randn(2, 3),), tmp / "never.onnx", route="dynamo")
    # a record as `compat run --compare` writes it: the call's record plus the parity summary
    (last_ok,) = [r for r in ledger.read([a]) if r["route_taken"] == "dynamo"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parity = compare(TorchScriptOnly(), (torch.randn(2, 3),), latency_runs=0).summary()
    ledger.append(b, {**last_ok, "call_site": "train.py:9", "parity": parity})
    return a, b


def test_report_merges_shards(shards: tuple[Path, Path]) -> None:
    data = report.build(ledger.read(shards), [str(p) for p in shards])
    assert data["calls"] == 7
    assert data["status"] == {"ok": 6, "failed": 1}
    assert data["by_route"] == {"legacy": 4, "dynamo": 2, "failed": 1}
    fb = data["fallbacks"]
    assert fb["calls"] == 3
    groups = {g["reason"]: g for g in fb["by_reason"]}
    assert set(groups) == {"torch.export failed (NotImplementedError)", "option only the TorchScript exporter honours (ONX106)"}
    dd = groups["torch.export failed (NotImplementedError)"]
    # records name the blocking model line; the report still groups by the reason class
    raw = [str(r.get("fallback_reason")) for r in ledger.read(shards)]
    assert any(r.startswith("dynamo: torch.export failed (NotImplementedError) at scale_models.py:") for r in raw)
    assert (dd["calls"], dd["remembered"], len(dd["call_sites"])) == (2, 1, 1)
    assert groups["option only the TorchScript exporter honours (ONX106)"]["calls"] == 1
    sites = {s["call_site"].rsplit(":", 1)[0]: s for s in data["legacy_call_sites"]}
    assert set(sites) == {__file__}
    (site,) = data["legacy_call_sites"]  # every call goes through _export's one line
    assert site["calls"] == 4 and len(site["models"]) == 2
    reasons = {r for s in data["legacy_call_sites"] for r in s["reasons"]}
    assert "torch.export failed (NotImplementedError)" in reasons
    assert any("'legacy' requested" in r for r in reasons)
    usages = {u["code"]: u for u in data["legacy_usages"]}
    assert usages["ONX101"]["calls"] == 1 and usages["ONX106"]["calls"] == 1
    assert usages["ONX101"]["title"]
    assert data["parity"]["by_verdict"] == {"one-route-only": 1}
    assert data["parity"]["findings"][0]["call_site"] == "train.py:9"
    assert len(data["failures"]) == 1


def test_cli_markdown_and_json(shards: tuple[Path, Path], tmp_path: Path) -> None:
    probe = (
        "import sys; from compat.__main__ import main; rc = main(sys.argv[1:]); "
        "assert 'torch' not in sys.modules, 'report imported torch'; raise SystemExit(rc)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    md = subprocess.run([sys.executable, "-c", probe, "report", *map(str, shards)],
                        capture_output=True, text=True, env=env, timeout=600, check=False)
    assert md.returncode == 0, md.stderr
    out = md.stdout
    assert "## torch.onnx export migration report" in out
    assert "7 export call(s) from 2 ledger(s)" in out
    assert "| torch.export failed (NotImplementedError) | 2 | 1 |" in out
    assert "| ONX106 |" in out and "one-route-only: 1" in out
    js = subprocess.run([sys.executable, "-c", probe, "report", "--format", "json", *map(str, shards)],
                        capture_output=True, text=True, env=env, timeout=600, check=False)
    assert js.returncode == 0, js.stderr
    assert json.loads(js.stdout)["by_route"]["legacy"] == 4


def test_unreadable_input_exits_2(shards: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    assert report.main([str(shards[0]), str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read ledger" in capsys.readouterr().err
    assert report.main([str(tmp_path)]) == 2  # a folder
    assert report.main(["--format", "xml", str(shards[0])]) == 2


def test_garbage_lines_are_skipped(tmp_path: Path) -> None:
    p = tmp_path / "l.jsonl"
    p.write_text('{"call_site": "a.py:1", "route_taken": "dynamo", "status": "ok"}\nnot json\n[1]\n')
    assert report.build(ledger.read([p]))["calls"] == 1


def test_invalid_records_warned_and_junk_only_ledger_exits_2(tmp_path: Path, capsys) -> None:
    good = '{"call_site": "a.py:1", "route_taken": "dynamo", "status": "ok", "warnings": ["ONX101"]}\n'
    p = tmp_path / "l.jsonl"
    p.write_text(good + '{"call_site": "b.py:1", "fallback_reason": 5}\n'
                 '{"call_site": "c.py:1", "warnings": "ONX101"}\n{"call_site": "d.py:1", "rou\n')
    out = tmp_path / "r.json"
    assert report.main([str(p), "--format", "json", "-o", str(out)]) == 0
    assert "skipped 3 invalid line(s)" in capsys.readouterr().err
    data = json.loads(out.read_text())
    assert data["calls"] == 1
    assert data["legacy_usages"][0]["code"] == "ONX101" and data["legacy_usages"][0]["calls"] == 1
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"call_site": "a.py:1", "rou\nnot json\n')
    assert report.main([str(junk)]) == 2
    assert "no valid record" in capsys.readouterr().err


def test_empty_ledger_says_no_calls(tmp_path: Path, capsys) -> None:
    p = tmp_path / "empty.jsonl"
    p.write_text("")
    assert report.main([str(p)]) == 0
    text = capsys.readouterr().out
    assert "no export calls recorded" in text and "every call takes" not in text


def test_report_does_not_import_torch() -> None:
    code = "import sys, compat.tools.report; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
