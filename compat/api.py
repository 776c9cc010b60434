"""``compat.export``: every historical call form of ``torch.onnx.export``, routed and recorded."""

from __future__ import annotations

import threading
from typing import Any, Literal

from compat.errors import ExportFailed, OpsetNotReached
from compat.installed.runtime_extra import require_runtime
from compat.policy import config, notices
from compat.records.call_history import CallHistory
from compat.request import Outcome, normalize
from compat.routing import dispatch

RouteName = Literal["auto", "dynamo", "legacy"]

#: a detached copy of the latest successful call's Outcome (no program, no model bytes)
_last_outcome: Outcome | None = None
#: a text summary of this process's export calls, the latest ``call_history.LIMIT`` of them;
#: ``compat run`` prints it. Nothing in it refers to a model, a program or a tensor.
history = CallHistory()
#: what every export call of this process also runs (``compat run --compare``: the parity check)
_observers: list[dispatch.Observer] = []
_observers_lock = threading.Lock()


def export(
    model: Any,
    args: Any = (),
    f: Any = None,
    *positional: Any,
    route: RouteName | None = None,
    strict: bool | None = None,
    _entry: str = "compat.export",
    **options: Any,
) -> Any:
    """Export ``model`` like ``torch.onnx.export`` of any torch from 1.3 to 2.14 would.

    ``route`` forces a route (default: ``TORCH_ONNX_COMPAT_ROUTE``, pyproject, then ``auto``);
    ``strict=True`` turns legacy usages into errors. ``options`` are ``torch.onnx.export``
    keywords of any torch version. Returns what ``torch.onnx.export`` returns on the route
    taken (an ``ONNXProgram`` or ``None``). ``_entry``: the API called, for a ``torch.onnx``
    function under ``compat.patch`` (its warnings and ledger name it).
    """
    # one body for every entry, which makes the exporter's call itself: torch's tracer records
    # the whole Python stack at every traced operation, so each frame between the user's call and
    # the exporter costs (compat.routing.steps; the loop below is its ``drive``, inlined)
    global _last_outcome
    if route is not None:
        options["route"] = route
    if strict is not None:
        options["strict"] = strict
    require_runtime(_entry)
    site = notices.find_call_site()
    req = normalize.normalize(model, args, f, *positional, _call_site=str(site), _entry=_entry, **options)
    # what torch prints meanwhile is held per route attempt (compat.routing.capture), for this
    # thread only: sys.stdout stays the script's, other threads' prints are theirs
    steps = dispatch.run_steps(req, site, ledger=config.env_ledger(), observers=tuple(_observers))
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
        outcome, result = done.value
    except Exception as exc:
        _drop_programs(exc)
        history.add_failure(req.call_site, exc)
        raise
    _last_outcome = history.add_success(req.call_site, outcome).outcome
    return result


def _drop_programs(exc: BaseException) -> None:
    """A failed call's error holds no program: an ``OpsetNotReached`` the dispatcher did not
    deliver carries the route's whole model, which a caller keeping the error would keep too."""
    failures = exc.failures.values() if isinstance(exc, ExportFailed) else (exc,)
    for failure in failures:
        if isinstance(failure, OpsetNotReached):
            failure.program = failure.outcome = None


def add_observer(observer: dispatch.Observer) -> None:
    """Call ``observer`` after every successful export of this process (see ``dispatch.Observer``)."""
    with _observers_lock:
        if observer not in _observers:
            _observers.append(observer)


def remove_observer(observer: dispatch.Observer) -> None:
    """Stop calling ``observer`` (no error when it is not registered)."""
    with _observers_lock:
        if observer in _observers:
            _observers.remove(observer)


def last_outcome() -> Outcome | None:
    """The Outcome of the latest successful export in this process (route, translations, ...),
    without the model: its ``program`` and ``model_bytes`` are None (the ONNXProgram is what
    ``export`` returned on the torch.export route)."""
    return _last_outcome
