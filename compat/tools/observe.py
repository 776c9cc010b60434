"""``compat run --observe``: plain torch, recorded.

``torch.onnx.export`` is replaced by a pass-through that calls torch's own function with the
arguments exactly as given (no routing, no translation, no warning of ours) and, after torch
returns, appends a ledger record: call site, the options as called, the route torch took, the
output's fingerprint and the example inputs' shapes (``compat.records.output_facts``); when torch
raises, a failed record, then the error goes on unchanged. What ``verify-migration`` compares
with the shim's ledger of the original code. ``compat.export`` calls keep their own behaviour and
records.

A post-step the migration writes right after the call (``compat.convert_opset(f, N, out=f)``)
is part of the call site: when it rewrites the file an observed call wrote, a record of the same
call site follows with the file as it is after the step (``post_step``), which
``verify-migration`` compares in place of the call's own record.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from compat.installed import torch_api, torch_caps
from compat.policy import config, notices
from compat.records import ledger as ledger_file
from compat.records import output_facts

MODE = "observe"
_lock = threading.Lock()
_local = threading.local()
_installed: Callable[..., Any] | None = None
#: this process's observed calls, for ``compat run``'s summary (bounded)
calls: list[tuple[str, str, str | None]] = []  # (call site, status, output or error)
MAX_CALLS = 1000
#: the last ok record of each output file this process observed (for a post-step's record)
_by_output: dict[str, dict[str, Any]] = {}


def install() -> None:
    """Put the recording pass-through in place of ``torch.onnx.export``."""
    global _installed
    with _lock:
        if _installed is not None:
            return
        torch_api.capture()  # the routes of any compat.export call keep torch's own function
        import torch.onnx

        original = torch_api.torch_export()

        @functools.wraps(original)
        def export(*args: Any, **kwargs: Any) -> Any:
            return _call(original, args, kwargs)

        torch.onnx.export = export
        _installed = export


def uninstall() -> None:
    global _installed
    with _lock:
        if _installed is None:
            return
        import torch.onnx

        if torch.onnx.export is _installed:
            torch.onnx.export = torch_api.torch_export()
        _installed = None


def _call(original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    ledger = config.env_ledger()
    if getattr(_local, "inside", False) or not ledger:
        return _torch_call(original, args, kwargs)
    site = str(notices.find_call_site())
    start = time.perf_counter()
    _local.inside = True
    try:
        result = _torch_call(original, args, kwargs)
    except Exception as exc:
        _record(ledger, site, original, args, kwargs, None, exc, start)
        raise
    finally:
        _local.inside = False
    _record(ledger, site, original, args, kwargs, result, None, start)
    return result


def _torch_call(original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """torch's call as given; a ``dynamo=False`` call raises ``RouteUnavailable`` where the probe
    hides the TorchScript exporter (``TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT``), as a torch without it
    would fail, so an observed run never uses the hidden exporter."""
    if torch_caps.torchscript_hidden() and _bound(original, args, kwargs).get("all", {}).get("dynamo") is False:
        from compat.errors import RouteUnavailable

        raise RouteUnavailable(f"torch.onnx.export(..., dynamo=False): {torch_caps.torchscript_missing_reason()}")
    return original(*args, **kwargs)


def _bound(original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by name, torch's defaults filled in (empty if they do not bind)."""
    try:
        bound = inspect.signature(original).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return {}
    given = dict(bound.arguments)
    bound.apply_defaults()
    return {"given": given, "all": dict(bound.arguments)}


def _record(ledger: str, site: str, original: Callable[..., Any], args: tuple[Any, ...],
            kwargs: dict[str, Any], result: Any, error: BaseException | None, start: float) -> None:
    bound = _bound(original, args, kwargs)
    every = bound.get("all", {})
    model = every.get("model", args[0] if args else None)
    f = every.get("f")
    output = os.path.abspath(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else None
    route = ("dynamo" if every.get("dynamo") else "legacy") if "dynamo" in every else None
    record: dict[str, Any] = {
        "call_site": site, "mode": MODE, "route_requested": None,
        "route_taken": route if error is None else None, "fallback_reason": None,
        "translations": [], "warnings": [], "output": output,
        "duration_s": round(time.perf_counter() - start, 6),
        "torch_version": torch_caps.torch_version_str(),
        "model": type(model).__qualname__ if model is not None else None,
        "status": "ok" if error is None else "failed",
        "error": None if error is None else f"{type(error).__name__}: {error}",
        "notes": [], "options": _options(bound.get("given", {})),
    }
    if error is None:
        program = result if output is None else None
        try:
            record.update(output_facts.facts(output, every.get("args", ()), every.get("kwargs"),
                                             program, ledger))
        except Exception as exc:  # noqa: BLE001 - never fail the user's call for a record
            record["notes"].append(f"output facts not recorded: {type(exc).__name__}: {exc}")
    ledger_file.append(ledger, record)
    if output is not None and error is None:
        with _lock:
            _by_output[output] = dict(record, ledger=ledger)
    calls.append((site, record["status"], record["error"] or output))
    del calls[:-MAX_CALLS]


def _options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The options as called (not model/args/f): JSON values, others as a short repr."""
    return {k: _jsonable(v) for k, v in given.items() if k not in ("model", "args", "f")}


def _jsonable(value: Any, depth: int = 0) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth < 3 and isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    if depth < 3 and isinstance(value, Mapping):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    text = repr(value)
    return text if len(text) <= 200 else text[:199] + "…"


def post_step(out: str | os.PathLike[str], step: str) -> None:
    """``out`` was rewritten by ``step`` (a post-step such as ``compat.convert_opset``) after an
    observed call wrote it: record the call site again with the file as it is now."""
    if _installed is None:
        return
    path = os.path.abspath(os.fspath(out))
    with _lock:
        last = _by_output.get(path)
    if last is None:
        return
    ledger = last.pop("ledger")
    record = dict(last, post_step=step, notes=[*last.get("notes", []), f"after {step}"])
    try:
        record["output_files"] = output_facts.fingerprint(path)
    except OSError as exc:
        record["notes"].append(f"output facts not recorded: {type(exc).__name__}: {exc}")
    ledger_file.append(ledger, record)
    with _lock:
        _by_output[path] = dict(record, ledger=ledger)
