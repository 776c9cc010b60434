"""``compat.export``: every historical call form of ``torch.onnx.export``, routed and recorded."""

from __future__ import annotations

from typing import Any

from . import dispatch, notices, signature
from .request import Outcome

_last_outcome: Outcome | None = None
#: (call site, Outcome or None, error or None) of every export call in this process;
#: ``compat run`` summarises it
history: list[tuple[str, Outcome | None, BaseException | None]] = []


def export(model: Any, args: Any = (), f: Any = None, *positional: Any, **options: Any) -> Any:
    """Export ``model`` like ``torch.onnx.export`` of any torch from 1.3 to 2.14 would.

    Extra keywords: ``route`` (``auto``, ``dynamo``, ``legacy``) and ``strict``. Returns what
    ``torch.onnx.export`` returns on the route taken (an ``ONNXProgram`` or ``None``).
    """
    return _export(model, args, f, *positional, _entry="compat.export", **options)


def _export(model: Any, args: Any, f: Any, *positional: Any, _entry: str, **options: Any) -> Any:
    global _last_outcome
    site = notices.find_call_site()
    req = signature.normalize(model, args, f, *positional, _call_site=str(site), _entry=_entry, **options)
    try:
        outcome, result = dispatch.run(req, site)
    except Exception as exc:
        history.append((req.call_site, None, exc))
        raise
    _last_outcome = outcome
    history.append((req.call_site, outcome, None))
    return result


def last_outcome() -> Outcome | None:
    """The Outcome of the latest successful export in this process (route, translations, ...)."""
    return _last_outcome
