"""JSON findings carry ruff's fields (location, end_location, fix with its edits and
applicability, url); SARIF rules have a helpUri; both point at docs/rules/<CODE>.md, generated
from the catalog (a test keeps the pages in sync)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from compat import catalog
from migration.cli import main

ROOT = Path(__file__).resolve().parents[2]
SRC = ('import torch\n\n'
       'torch.onnx.export(model, (x,), "m.onnx", dynamic_axes={"x": [0]}, input_names=["x"])\n'
       'torch.onnx.export(model, (x,), "t.onnx", training=torch.onnx.TrainingMode.TRAINING)\n')


def _apply(text: str, edits: list[dict]) -> str:
    lines = text.splitlines(keepends=True)
    for e in sorted(edits, key=lambda e: -e["location"]["row"]):
        assert e["location"]["column"] == 1 and e["end_location"]["column"] == 1
        lines[e["location"]["row"] - 1:e["end_location"]["row"] - 1] = [e["content"]]
    return "".join(lines)


def test_json_has_ruffs_fields_and_edits_that_fix(tmp_path: Path, capsys) -> None:
    src = tmp_path / "a.py"
    src.write_text(SRC)
    assert main(["--output-format", "json", "--unsafe-fixes", str(src)]) == 1
    findings = json.loads(capsys.readouterr().out)
    for f in findings:
        assert {"code", "filename", "location", "end_location", "message", "fix", "url", "noqa_row"} <= set(f)
        assert f["url"] == f"docs/rules/{f['code']}.md" and (ROOT / f["url"]).is_file()
        assert f["end_location"]["row"] == f["location"]["row"]
        assert f["end_location"]["column"] > f["location"]["column"]
    (axes,) = [f for f in findings if f["code"] == "ONX101"]
    assert SRC.splitlines()[2][axes["location"]["column"] - 1:axes["end_location"]["column"] - 1] == '{"x": [0]}'
    assert axes["fix"]["applicability"] == "safe" and axes["fix"]["edits"]
    edits = {json.dumps(e, sort_keys=True): e for f in findings if f["fix"] for e in f["fix"]["edits"]}
    fixed = _apply(SRC, list(edits.values()))
    assert main(["--fix", "--unsafe-fixes", str(src)]) == 0
    capsys.readouterr()
    assert fixed == src.read_text()


def test_sarif_rules_have_help_uri(tmp_path: Path, capsys) -> None:
    src = tmp_path / "a.py"
    src.write_text(SRC)
    main(["--output-format", "sarif", str(src)])
    doc = json.loads(capsys.readouterr().out)
    rules = {r["id"]: r for r in doc["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["ONX101"]["helpUri"] == "docs/rules/ONX101.md"
    region = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region["endColumn"] > region["startColumn"]


def test_rule_pages_are_in_sync_with_the_catalog(tmp_path: Path) -> None:
    fresh = {Path(p).name: Path(p).read_text() for p in catalog.write_rule_pages(str(tmp_path))}
    kept = {p.name: p.read_text() for p in (ROOT / catalog.RULE_PAGES).glob("*.md")}
    assert kept == fresh, "docs/rules is stale: run `python -m compat.catalog`"


def test_the_rule_page_generator_takes_help_as_a_flag_not_a_directory(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "compat.catalog", "--help"], check=False,
                         cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: python -m compat.catalog")
    assert list(tmp_path.iterdir()) == []  # nothing written: no '--help/docs/rules'
