"""What this process remembers of its export calls: a small text summary per call, bounded.

``compat run`` prints the summary at exit and ``compat.last_outcome()`` returns the latest
success; neither may keep a model alive. A summary holds strings and small dataclasses only:
the Outcome is copied without its program, model bytes or staging path, and an error is kept
as text (its traceback references the frames, which reference the model).
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from compat.errors import ExportFailed
from compat.request import Outcome

#: the calls kept for the summary; older ones are only counted
LIMIT = 1000
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class CallSummary:
    """One export call: where it was made and what came of it, as text."""

    call_site: str
    outcome: Outcome | None = None  # a detached copy (``detached``); None for a failed call
    error: str | None = None  # ``Type: first line`` of a failed call
    route_causes: tuple[tuple[str, str], ...] = ()  # (route, its cause on one line) of a failed call

    @property
    def failed(self) -> bool:
        return self.outcome is None


class CallHistory:
    """The latest ``limit`` call summaries, with counts of every call; safe across threads."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._calls: deque[CallSummary] = deque(maxlen=limit)
        self._lock = threading.Lock()
        self.total = 0
        self.failed = 0

    def add_success(self, call_site: str, outcome: Outcome) -> CallSummary:
        return self._add(CallSummary(call_site, outcome=detached(outcome)))

    def add_failure(self, call_site: str, error: BaseException) -> CallSummary:
        causes: tuple[tuple[str, str], ...] = ()
        if isinstance(error, ExportFailed):
            causes = tuple((route, route_cause(failure)) for route, failure in error.failures.items())
        text = f"{type(error).__name__}: {one_line(str(error))}"
        return self._add(CallSummary(call_site, error=text, route_causes=causes))

    def _add(self, call: CallSummary) -> CallSummary:
        with self._lock:
            self._calls.append(call)
            self.total += 1
            self.failed += call.failed
        return call

    @property
    def dropped(self) -> int:
        """Calls counted but no longer kept (older than the latest ``limit``)."""
        return self.total - len(self._calls)

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()
            self.total = self.failed = 0

    def __iter__(self) -> Iterator[CallSummary]:
        with self._lock:
            return iter(list(self._calls))

    def __len__(self) -> int:
        return len(self._calls)

    def __bool__(self) -> bool:
        return self.total > 0


def detached(outcome: Outcome) -> Outcome:
    """A copy of ``outcome`` that refers to no model: program, model bytes and staging path
    dropped, lists copied (the route may still append to its own)."""
    # a field-for-field copy, as ``dataclasses.replace`` makes, without re-running ``__init__``
    # (1.3 us against 2.3 us, on every successful call)
    copy = object.__new__(type(outcome))
    copy.__dict__.update(vars(outcome))
    copy.program = copy.model_bytes = copy.staged = None
    copy.translations, copy.warnings, copy.notes = (
        list(outcome.translations), list(outcome.warnings), list(outcome.notes))
    copy.tracer_warnings = [dict(w) for w in outcome.tracer_warnings]
    copy.baked = [dict(b) for b in outcome.baked]
    return copy


def one_line(text: str, limit: int = 200) -> str:
    """The first non-empty line of ``text``, without terminal colour codes, at most ``limit``."""
    lines = [line.strip() for line in _ANSI.sub("", text).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def route_cause(failure: BaseException) -> str:
    """``reason: Cause: message`` of one route's failure, on one line. torch.export errors put
    the root cause in an "Exception summary" (``<class 'x.DispatchError'>: ...``): that is used."""
    reason = getattr(failure, "reason", "")
    cause = getattr(failure, "cause", None)
    if cause is None:
        return one_line(str(failure))
    text = _ANSI.sub("", str(cause))
    summary = re.search(r"<class '(?:[\w.]*\.)?(\w+)'>: *(.+)", text)
    detail = f"{summary.group(1)}: {summary.group(2)}" if summary else f"{type(cause).__name__}: {text}"
    return one_line(f"{reason}: {detail}" if reason else detail)
