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
    "ONX206 ONX207 ONX208 ONX301 ONX302 ONX303 ONX304 ONX401 ONX402 ONX403 ONX404 ONX501 "
    "ONX002 ONX003"
).split()


def test_every_design_code_has_an_entry():
    assert [e.code for e in catalog.ENTRIES] == DESIGN_CODES
    for e in catalog.ENTRIES:
        assert e.fix in ("safe", "unsafe", "none")
        assert e.code in e.message() and e.fix_select().split(",")[-1] == e.code
        if e.fix == "none":  # no command that fixes nothing: what to do instead
            assert "--fix" not in e.message() and catalog.NO_FIX in e.message()
        else:
            assert f"--select {e.fix_select()} PATH" in e.message()
            assert ("--unsafe-fixes" in e.message()) == (e.fix == "unsafe")


def test_messages_read_as_sentences():
    for e in catalog.ENTRIES:
        assert f". Replace with: {e.replacement}. " in e.message()
    assert "verbose" not in catalog.get("ONX204").replacement
    assert "Dim(" not in catalog.get("ONX101").replacement
    assert "external_data=True" not in catalog.get("ONX202").replacement


def test_a_hint_selects_onx206_only_for_positional_options():
    e = catalog.get("ONX104")
    assert e.fix_select({"ONX001", "ONX104"}) == "ONX001,ONX104"
    assert e.fix_select({"ONX001", "ONX206", "ONX104"}) == "ONX001,ONX206,ONX104"


def test_readme_table_is_generated_from_catalog():
    text = (ROOT / "README.md").read_text()
    table = re.search(r"<!-- catalog:start -->\n(.*)<!-- catalog:end -->", text, re.S).group(1)
    assert table == catalog.to_markdown()


def test_migrate_docs_value_table_is_generated_from_catalog():
    text = (ROOT / "docs" / "migrate.md").read_text()
    table = re.search(r"<!-- values:start -->\n(.*)<!-- values:end -->", text, re.S).group(1)
    assert table == catalog.values_markdown()


def test_option_entries_say_what_each_value_does():
    """The runtime and rewrite texts of an option entry are the facts' cases, value by value:
    a value the torch.export route takes is never said to need the TorchScript route."""
    from compat import catalog_facts as facts

    for option in facts.OPTIONS:
        e = catalog.get(option.code)
        for case in option.cases:
            assert case.runtime in e.runtime and facts.rewrite_of(case) in e.rewrite
    assert "TorchScript" not in catalog.get("ONX104").runtime


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
