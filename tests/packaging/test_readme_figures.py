"""README's figures come from commands shown in it: no test counts or suite timings written in
by hand (they go stale); the table and the CI paragraph name the command that prints them."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_no_hand_written_test_counts_or_suite_timings() -> None:
    stale = re.findall(r"\b\d+ (?:passed|failed|skipped)\b|\b\d+ min \d+ s\b|\(\d+ tests,", README)
    assert not stale, stale


def test_the_figures_name_their_command() -> None:
    for command in ("`make test` prints the counts", "`make matrix TORCH=2.14.1` prints",
                    "`make bench` prints the ratio", "`make test-no-torchscript` and `make test`"):
        assert command in README, command
