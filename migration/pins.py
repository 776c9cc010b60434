"""Pins with an expiry date: the comment line the rewriter writes under a pin's reason (a
``dynamo=False`` it pins, a call it keeps on ``compat.export``) when ``--pin-expires`` (config
``pin-expires``) is given, and the scan by which ``--check`` fails once the date has passed.

The one format (tools other than the rewriter may write it too)::

    # compat.migrate: pin expires 2027-06-30

A date is ``YYYY-MM-DD``; the pin is expired from the day after it on (the local date).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass

PREFIX = "# compat.migrate: pin expires "
_LINE = re.compile(r"#\s*compat\.migrate:\s*pin expires (\d{4}-\d{2}-\d{2})\b")


def expiry_line(date: datetime.date) -> str:
    """The comment line that gives a pin its expiry date."""
    return f"{PREFIX}{date.isoformat()}"


def parse_date(value: str, today: datetime.date | None = None) -> datetime.date:
    """``YYYY-MM-DD``, or ``+N`` / ``+Nd`` days from today; ValueError otherwise."""
    text = str(value).strip()
    m = re.fullmatch(r"\+(\d+)d?", text)
    if m:
        return (today or datetime.date.today()) + datetime.timedelta(days=int(m.group(1)))
    return datetime.date.fromisoformat(text)


@dataclass(frozen=True)
class ExpiredPin:
    path: str
    line: int  # 1-based line of the expiry comment
    expires: datetime.date

    def message(self) -> str:
        return (f"{self.path}:{self.line}: pin expired on {self.expires.isoformat()}: migrate the "
                "call below it (or move its date on, saying why)")


def expired(path: str, lines: Iterable[str], today: datetime.date | None = None) -> list[ExpiredPin]:
    """The pins of a file whose expiry date is before ``today``."""
    today = today or datetime.date.today()
    out = []
    for number, line in enumerate(lines, 1):
        m = _LINE.search(line)
        if not m:
            continue
        try:
            date = datetime.date.fromisoformat(m.group(1))
        except ValueError:
            continue
        if date < today:
            out.append(ExpiredPin(path, number, date))
    return out
