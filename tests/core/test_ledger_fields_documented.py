"""Every field a ledger record can carry is described in the README's "Ledger records" table."""

from __future__ import annotations

import re
from pathlib import Path

from compat.records import ledger

README = Path(__file__).resolve().parents[2] / "README.md"


def _documented() -> set[str]:
    text = README.read_text(encoding="utf-8")
    table = text.split("### Ledger records", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {name for cell in rows for name in re.findall(r"`([a-z_]+)`", cell)}


def test_every_record_field_is_in_the_readme_table():
    fields = set(ledger.FIELDS) | set(ledger.SITE_FIELDS) | set(ledger.STAMP_FIELDS) | {"third_party"}
    missing = fields - _documented()
    assert not missing, f"ledger fields without a README row: {sorted(missing)}"
