"""``compat report``'s data model over ledgers of real exports: progress and burn-down by the
ledgers' dates, one cause per fallback reason, one count per call and code."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from scale_models import mlp

import compat
from compat.records import ledger
from compat.tools import report, report_model


def _export(model, args, path, **options) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, args, str(path), **options)


def _redate(path: Path, day: str) -> None:
    """The ledger as if recorded on ``day`` (CI keeps one ledger per nightly run)."""
    recs = ledger.read([path])
    path.write_text("".join(json.dumps({**r, "recorded_at": f"{day}T03:00:00+00:00"}) + "\n" for r in recs))


@pytest.fixture(scope="module")
def nightly(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two nightly ledgers of one project: the older one still on legacy options."""
    tmp = tmp_path_factory.mktemp("nightly")
    old, new = tmp / "old.jsonl", tmp / "new.jsonl"
    x = torch.randn(2, 4)
    aten = torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mp.setenv("TORCH_ONNX_COMPAT_CACHE_DIR", str(tmp / "cache"))
        mp.delenv("TORCH_ONNX_COMPAT_ROUTE", raising=False)
        mp.setenv("TORCH_ONNX_COMPAT_LEDGER", str(old))
        for _ in range(2):  # one call site, called twice
            compat.export(mlp(), (x,), str(tmp / "a.onnx"), operator_export_type=aten)
        compat.export(mlp(), (x,), str(tmp / "b.onnx"), route="legacy")  # pinned
        mp.setenv("TORCH_ONNX_COMPAT_LEDGER", str(new))
        for _ in range(2):
            compat.export(mlp(), (x,), str(tmp / "a.onnx"))
        compat.export(mlp(), (x,), str(tmp / "b.onnx"), route="legacy")
    _redate(old, "2026-11-01")
    _redate(new, "2026-11-20")
    return [old, new]


def test_records_carry_their_date(nightly: list[Path], tmp_path: Path) -> None:
    fresh = tmp_path / "l.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_ONNX_COMPAT_LEDGER", str(fresh))
        _export(mlp(), (torch.randn(2, 4),), tmp_path / "m.onnx")
    (rec,) = ledger.read([fresh])
    assert rec["recorded_at"].endswith("+00:00") and rec["recorded_at"][:4].isdigit()


def test_one_call_counts_a_translation_once(nightly: list[Path]) -> None:
    data = report.build(ledger.read(nightly[:1]))
    (onx103,) = [t for t in data["translations"] if t["code"] == "ONX103"]
    assert onx103["calls"] == 2  # two calls, not one per translation step (plan and result)
    (usage,) = [u for u in data["legacy_usages"] if u["code"] == "ONX103"]
    assert usage["calls"] == 2


def test_progress_is_ordered_by_date_not_command_line(nightly: list[Path]) -> None:
    old, new = nightly
    data = report_model.build_report([str(new), str(old)])  # newest given first
    runs = data["progress"]
    assert [r["label"] for r in runs] == ["old.jsonl", "new.jsonl"]
    assert [r["date"] for r in runs] == ["2026-11-01 03:00", "2026-11-20 03:00"]
    assert runs[0]["legacy_usages"] == 1  # ONX103 at one call site (called twice): one usage
    assert runs[1]["legacy_usages"] == 0
    assert runs[0]["call_sites"] == {"finished": 0, "finished_post_step": 0, "pinned": 1, "on_shim": 1}
    assert runs[1]["call_sites"] == {"finished": 1, "finished_post_step": 0, "pinned": 1, "on_shim": 0}


def test_json_and_markdown_show_the_burn_down(nightly: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    old, new = nightly
    assert report.main(["--format", "json", str(new), str(old)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(r["label"], r["legacy_usages"]) for r in data["progress"]] == [("old.jsonl", 1), ("new.jsonl", 0)]
    assert report.main([str(new), str(old)]) == 0
    md = capsys.readouterr().out
    section = md.split("### Progress over the ledgers' dates (oldest first)", 1)[1].split("###", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| 2026")]
    assert rows == ["| 2026-11-01 03:00 | `old.jsonl` | 3 | 67% | 1 | 0 | 0 | 1 | 1 |",
                    "| 2026-11-20 03:00 | `new.jsonl` | 3 | 67% | 0 | 1 | 0 | 1 | 0 |"]


def test_a_semicolon_inside_one_reason_is_one_cause() -> None:
    # attempt_logs.reasons joins `route: reason` parts with "; "; torch's message may hold one too
    rec = {"call_site": "a.py:3", "route_requested": "auto", "route_taken": "legacy", "status": "ok",
           "fallback_reason": "dynamo: torch.export failed (Unsupported: data-dependent; see the log)"
                              " at m.py:7 `if x.sum() > 0:`; legacy: not needed"}
    assert report.reason_classes(rec) == ["torch.export failed (Unsupported: data-dependent; see the log)"]
    assert report.blocking_lines(rec) == ["m.py:7 `if x.sum() > 0:`"]
    (group,) = report.build([rec])["fallbacks"]["by_reason"]
    assert group["calls"] == 1
