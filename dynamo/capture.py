"""How the torch.export route captures the model: torch's own capture first, then a draft capture
that bakes data-dependent branches at the example's values, as the TorchScript tracer did.

``torch.onnx.export(dynamo=True)`` captures with ``torch.export.export`` (``strict=False``, then
``strict=True``). When both stop at a data-dependent guard (``if x.mean() > 0:``, ``if
boxes.numel() == 0:``, ``assert (t >= 0).all()``), ``export_program`` captures with
``torch.export.draft_export``, which specialises each such guard on the example's real values,
and hands that ``ExportedProgram`` to ``torch.onnx.export`` with the same options (translations,
custom translation table, dynamic shapes). torch's own ``TORCH_ONNX_ENABLE_DRAFT_EXPORT`` is not
used: it is read once at import and says nothing about what was specialised.

Every specialised place is returned as a ``baked`` entry (``{file, line, source, guard}``, the
innermost frame of the model's or a library's code): the ledger, the ONX003 warning and
``compat report`` show them. The draft capture is refused (the first failure is raised, with a
note) when torch reports anything else than specialised guards (a fake kernel generated from a
real run, dynamic shapes it had to change), and for an ``ExportedProgram`` (captured already).

auto's dispatcher may ask for the draft capture later (``draft_later``): below the opset the
route builds at, the TorchScript route (whose tracer bakes the same branch) is tried first, and
a second attempt of this route starts its draft capture from torch.export's failure
(``draft_from``) rather than capturing again.
"""

from __future__ import annotations

import contextlib
import linecache
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from compat.errors import DraftCaptureDeferred
from compat.policy.route_noise import is_model_source

from . import draft_ops, torch_internals
from .quiet import blocking_line, describe_block

#: the only draft_export finding that is a bake (a guard specialised on the example's values)
BAKED_KIND = "DATA_DEPENDENT_ERROR"
#: torch's own functions that choose a fake tensor's memory format or a kernel: a guard they
#: specialise picks strides or a backend, which an ONNX model has neither of (torch 2.9's conv
#: meta function asks ``is_contiguous`` of an unbacked length, ``Eq(1, u0) | Eq(4*u0, 0) ->
#: False``; 2.10's fake conv asks ``_select_conv_backend``, ``u0 + 2 < 3 -> False``), so no branch
#: of the model is baked there
LAYOUT_DECIDERS = frozenset({"pick_memory_format", "suggest_memory_format", "is_contiguous",
                             "is_contiguous_or_false", "compute_contiguous"})
#: calls in torch's source whose guards choose a layout or kernel (see LAYOUT_DECIDERS)
KERNEL_CHOICES = ("is_contiguous(", "_select_conv_backend(")
#: the ``classify`` reason (``dynamo/route.py``) that a draft capture answers
DATA_DEPENDENT = "data-dependent control flow"

#: set while auto defers the draft capture: why, for the reason of the DraftCaptureDeferred raised
_DRAFT_LATER: ContextVar[str | None] = ContextVar("draft_later", default=None)
#: set on a later attempt: torch.export's failure from the attempt that deferred the draft capture
_DRAFT_FROM: ContextVar[BaseException | None] = ContextVar("draft_from", default=None)


@dataclass
class Captured:
    """The ONNXProgram and the places the capture baked at the example's values (empty when
    torch's own capture succeeded)."""

    program: Any
    baked: list[dict[str, Any]] = field(default_factory=list)


def export_program(
    export: Callable[..., Any], model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None,
    options: dict[str, Any], classify: Callable[[BaseException], str],
    quiet: Callable[[], Any] = contextlib.nullcontext,
) -> Captured:
    """``export(model, args, kwargs=..., dynamo=True, **options)``; when it fails on a
    data-dependent guard (``classify``), the draft capture's program exported the same way.
    ``quiet()`` holds what the first attempt prints (a ``Capture``): replayed unless the draft
    capture succeeds (torch's dump of the guard it stopped at is no news then). Within
    ``draft_later`` the draft capture is not run (``DraftCaptureDeferred``); within
    ``draft_from`` torch's own capture is not run again."""
    held = quiet()
    first = _DRAFT_FROM.get()
    if first is None:
        try:
            with held:
                try:
                    return Captured(export(model, args, None, kwargs=kwargs, dynamo=True, **options))
                except Exception as exc:
                    if not _draft_applies(model, exc, classify):
                        raise
                    first = exc
        finally:
            if first is None:
                _replay(held)
        later = _DRAFT_LATER.get()
        if later is not None:
            _replay(held)
            stopped = blocking_line(first)
            place = dict(zip(("file", "line", "source"), stopped)) if stopped else None
            deferred = DraftCaptureDeferred("dynamo", f"{DATA_DEPENDENT} ({later})", first, place)
            deferred.where = describe_block(DATA_DEPENDENT, first)
            raise deferred from first
    try:
        program, baked = draft(model, args, kwargs, options.get("dynamic_shapes"), first)
    except BaseException:
        _replay(held)
        raise
    return Captured(export(program, args, None, kwargs=kwargs, dynamo=True, **options), baked)


@contextlib.contextmanager
def draft_later(why: str) -> Iterator[None]:
    """While the block runs, a capture that needs the draft capture raises
    ``DraftCaptureDeferred`` (its reason says ``why``) instead of running it."""
    token = _DRAFT_LATER.set(why)
    try:
        yield
    finally:
        _DRAFT_LATER.reset(token)


@contextlib.contextmanager
def draft_from(first: BaseException) -> Iterator[None]:
    """While the block runs, capture goes straight to the draft capture: torch.export failed
    with ``first`` on an earlier attempt of the same request."""
    token = _DRAFT_FROM.set(first)
    try:
        yield
    finally:
        _DRAFT_FROM.reset(token)


def _replay(held: Any) -> None:
    replay = getattr(held, "replay", None)
    if callable(replay):
        replay()


def _draft_applies(model: Any, exc: BaseException, classify: Callable[[BaseException], str]) -> bool:
    import torch

    return (classify(exc) == DATA_DEPENDENT and isinstance(model, torch.nn.Module)
            and torch_internals.has_draft_capture())


def draft(model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None, dynamic_shapes: Any,
          first: BaseException) -> tuple[Any, list[dict[str, Any]]]:
    """The draft-captured ``ExportedProgram`` and its baked places; ``first`` (torch.export's
    own failure) is raised, with a note saying why, when the draft capture fails or specialised
    more than guards."""
    try:
        program = torch_internals.draft_export(model, args, dict(kwargs or {}),
                                               export_dims(dynamic_shapes), ops=draft_ops.draft_ops)
        failures = torch_internals.draft_failures(program)
    except Exception as exc:  # noqa: BLE001 - any draft failure: torch.export's own error is the one to raise
        first.add_note(f"torch.export.draft_export failed too: {type(exc).__name__}: "
                       f"{_first_line(exc)}")
        raise first from None
    others = sorted({kind for kind, _ in failures if kind != BAKED_KIND})
    if others:
        first.add_note("torch.export.draft_export captured the model only by more than baking "
                       f"branches ({', '.join(others)}): not used")
        raise first
    return program, baked_places(failures)


def baked_places(failures: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One ``{file, line, source, guard}`` per place a guard was specialised (first seen order)."""
    names = torch_internals.interned_strings()
    out: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for kind, data in failures:
        if kind != BAKED_KIND or _layout_decision(data.get("stack") or [], names):
            continue
        place = _place(data.get("user_stack") or [], names)
        guard = f"{data.get('expr')} -> {_truth(data.get('expr'), data.get('result'))}"
        key = (place["file"], place["line"]) if place["file"] else (guard,)
        if key in seen:
            continue
        seen.add(key)
        out.append({**place, "guard": guard})
    return out


def _layout_decision(stack: list[dict[str, Any]], names: dict[int, str]) -> bool:
    """The guard was decided by torch's memory-format or kernel choice (the innermost torch frame)."""
    frames = [f for f in stack if isinstance(f, dict)]
    if not frames:
        return False
    inner = frames[-1]
    source, file = str(inner.get("loc") or ""), names.get(inner.get("filename"), "")
    return bool(file) and not is_model_source(file) and (
        inner.get("name") in LAYOUT_DECIDERS or any(call in source for call in KERNEL_CHOICES))


def _truth(expr: Any, result: Any) -> Any:
    """A relation's result as True/False: torch 2.9 reports ``Eq(u0, 1) -> 1`` where later
    torches say ``True``."""
    text = str(expr or "")
    relation = text.startswith(("Eq(", "Ne(")) or any(op in text for op in ("<", ">"))
    if relation and str(result) in {"0", "1"}:
        return str(result) == "1"
    return result


def _place(stack: list[dict[str, Any]], names: dict[int, str]) -> dict[str, Any]:
    """The innermost frame of model (or library) code in a draft report's user stack."""
    frames = [(names.get(f.get("filename"), ""), f) for f in stack if isinstance(f, dict)]
    model_frames = [(name, f) for name, f in frames if name and is_model_source(name)]
    if not model_frames:
        return {"file": None, "line": None, "source": ""}
    name, frame = model_frames[-1]
    line = int(frame.get("line") or 0)
    source = str(frame.get("loc") or linecache.getline(name, line)).strip()
    return {"file": name, "line": line, "source": source}


def export_dims(dynamic_shapes: Any) -> Any:
    """``dynamic_shapes`` with axis names (``{0: "batch"}``, which torch.onnx.export accepts) as
    ``Dim.DYNAMIC``: what torch.export takes."""
    import torch

    if isinstance(dynamic_shapes, str):
        return torch.export.Dim.DYNAMIC
    if isinstance(dynamic_shapes, dict):
        return {k: export_dims(v) for k, v in dynamic_shapes.items()}
    if isinstance(dynamic_shapes, list):
        return [export_dims(v) for v in dynamic_shapes]
    if isinstance(dynamic_shapes, tuple):
        return tuple(export_dims(v) for v in dynamic_shapes)
    return dynamic_shapes


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:200] if lines else ""
