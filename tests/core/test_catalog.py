"""The catalog is the one home of legacy facts: README, CLI and warnings come from it."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from compat import catalog

ROOT = pathlib.Path(__file__).resolve().parents[2]
DESIGN_CODES = (
    "ONX001 ONX101 ONX102 ONX103 ONX104 ONX105 ONX106 ONX107 ONX201 ONX202 ONX203 ONX204 ONX205 "
    "ONX206 ONX207 ONX208 ONX301 ONX302 ONX303 ONX401 ONX402 ONX403 ONX404 ONX501 "
    "ONX002"
).split()


def test_every_design_code_has_an_entry():
    assert [e.code for e in catalog.ENTRIES] == DESIGN_CODES
    for e in catalog.ENTRIES:
        assert e.fix in ("safe", "unsafe", "none")
        assert e.code in e.message() and f"--select {e.fix_select()} PATH" in e.message()
        assert e.fix_select().split(",")[-1] == e.code


def test_readme_table_is_generated_from_catalog():
    text = (ROOT / "README.md").read_text()
    table = re.search(r"<!-- catalog:start -->\n(.*)<!-- catalog:end -->", text, re.S).group(1)
    assert table == catalog.to_markdown()


def test_catalog_command():
    out = subprocess.run([sys.executable, "-m", "compat", "catalog"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0
    assert all(code in out.stdout for code in DESIGN_CODES)
    md = subprocess.run([sys.executable, "-m", "compat", "catalog", "--format", "markdown"],
                        capture_output=True, text=True, timeout=600)
    assert md.stdout == catalog.to_markdown()


def test_prefix_selection():
    assert [e.code for e in catalog.select(["ONX10"], ["ONX104"])] == [
        "ONX101", "ONX102", "ONX103", "ONX105", "ONX106", "ONX107"]
    with pytest.raises(ValueError):
        catalog.select(["E501"])
