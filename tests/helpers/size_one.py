"""Where a migration for the installed torch keeps ``compat.export`` because the shim tiled a
size-1 example on a dynamic axis (torch 2.9's exporter fixes such an axis to 1: the
``compat.torch_apis.SIZE_ONE_AXIS_DYNAMIC`` fact; the rewriter's ``migration/rules/onx0.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from compat import torch_apis
from migration import evidence

#: what the migrated call's comment says (its line breaks aside)
REASON = "to keep the axis dynamic; " + torch_apis.SIZE_ONE_AXIS_DYNAMIC.name


def kept_on_the_shim(shim_ledger: Path) -> bool:
    """Whether the default target (the installed torch) lacks the fact and the shim's ledger
    shows a tiled size-1 example."""
    if torch_apis.SIZE_ONE_AXIS_DYNAMIC.available(torch_apis.default_target()):
        return False
    records = [json.loads(line) for line in shim_ledger.read_text().splitlines() if line.strip()]
    return bool(evidence.Site(tuple(records)).size_one_axes())


def says_why(text: str) -> bool:
    """The migrated text's ``# compat.migrate:`` comment gives the reason."""
    comments = " ".join(line.strip().lstrip("#").strip().removeprefix("compat.migrate:").strip()
                        for line in text.splitlines() if line.strip().startswith("#"))
    return REASON in comments
