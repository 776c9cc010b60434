"""Exporter calls made from ``compat.export``'s own frame.

torch's TorchScript tracer records the whole Python stack at every traced operation, so each frame
between the user's call and the exporter costs (three frames: 2-3% of a small CNN's export). So the
dispatcher and the TorchScript route are generators: where they would call the exporter they yield
a ``Call``, which ``compat.export`` makes from its own frame and answers with ``send`` (the result)
or ``throw`` (the exception). While torch traces, their frames are suspended, not on the stack, and
every ``with`` block around the yield (locks, the model's guards, held output) is still open.
``drive`` runs such a generator for every other caller.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One call for the driver to make: ``fn(*args, **kwargs)``."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


#: a generator yielding the exporter calls it needs made, and returning its result
Steps = Generator[Call, Any, T]


def drive(steps: Steps[T]) -> T:
    """Run ``steps``, making each call it yields here. ``compat.export`` runs this loop in its own
    frame instead (one frame fewer under torch's tracer)."""
    try:
        call = next(steps)
        while True:
            try:
                value = call.fn(*call.args, **call.kwargs)
            except BaseException as exc:  # noqa: BLE001 - thrown into the steps, which decide
                failure = exc
            else:
                call = steps.send(value)
                continue
            # thrown outside the except block: what the steps raise gets no implicit context
            call, failure = steps.throw(failure), None
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
