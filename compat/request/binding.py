"""The export call bound to the model's forward(): the one place that binds it.

``normalize()`` binds each call once and stores the result on the request
(``ExportRequest.params``, or ``ExportRequest.unbound`` saying why it does not bind); routes and
tools read that. Binding follows the TorchScript exporter: positional parameters in signature
order up to the last one the call fills (skipped ones take their defaults), then ``*args``,
keyword-only and ``**kwargs`` parameters. Imports nothing heavy (``import compat`` loads it).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compat.errors import CompatTypeError, CompatValueError

#: ``Param.kind`` for each kind of forward() parameter (positional ones are "pos")
_KINDS = {
    inspect.Parameter.VAR_POSITIONAL: "varpos",
    inspect.Parameter.KEYWORD_ONLY: "kw",
    inspect.Parameter.VAR_KEYWORD: "varkw",
}


@dataclass(frozen=True)
class Param:
    """One bound forward() parameter: ``kind`` is pos, varpos, kw or varkw."""

    name: str
    kind: str
    value: Any


def split_legacy_args(
    args: tuple[Any, ...], kwargs: Mapping[str, Any] | None,
) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    """``(args, kwargs)`` from the legacy convention: a dict as the last of ``args`` holds keyword
    inputs, and an empty one there means the dict before it is a positional input."""
    if args and isinstance(args[-1], dict):
        trailing = dict(args[-1])
        args = args[:-1]
        overlap = set(trailing) & set(kwargs or {})
        if overlap:
            raise CompatValueError(f"args' trailing dict and kwargs both give {sorted(overlap)}")
        kwargs = {**trailing, **(kwargs or {})}
    return tuple(args), (dict(kwargs) if kwargs else None)


#: a method's function -> (its defaults, keyword defaults, code, the bound method's signature and
#: its positional plan): working a signature out costs a third of a small model's normalize
_SIGNATURES: dict[Any, tuple[Any, Any, Any, inspect.Signature, tuple[tuple[str, ...], int] | None]] = {}
_SIGNATURES_LIMIT = 512
_POSITIONAL_KINDS = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _signature(fn: Any) -> tuple[inspect.Signature, tuple[tuple[str, ...], int] | None]:
    """``inspect.signature(fn)`` and its positional plan (:func:`_positional_plan`), remembered
    for a bound method (not a wrapper, nor one with its own ``__signature__``) while its
    function's defaults and code stay the objects they were."""
    func = fn.__func__ if isinstance(fn, types.MethodType) else None
    if not isinstance(func, types.FunctionType) or hasattr(func, "__signature__") or hasattr(func, "__wrapped__"):
        sig = inspect.signature(fn)
        return sig, _positional_plan(sig)
    known = _SIGNATURES.get(func)
    if known is not None and known[0] is func.__defaults__ and known[1] is func.__kwdefaults__ \
            and known[2] is func.__code__:
        return known[3], known[4]
    sig = inspect.signature(fn)
    plan = _positional_plan(sig)
    if len(_SIGNATURES) >= _SIGNATURES_LIMIT:
        _SIGNATURES.clear()
    _SIGNATURES[func] = (func.__defaults__, func.__kwdefaults__, func.__code__, sig, plan)
    return sig, plan


def _positional_plan(sig: inspect.Signature) -> tuple[tuple[str, ...], int] | None:
    """For a signature of positional parameters only: their names, and how many lead without a
    default (a call of that many to all of them, without keywords, binds in order). None
    otherwise."""
    params = list(sig.parameters.values())
    if any(p.kind not in _POSITIONAL_KINDS for p in params):
        return None
    return tuple(p.name for p in params), sum(p.default is inspect.Parameter.empty for p in params)


def bind(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> tuple[Param, ...]:
    """forward()'s parameters bound to the call; ``CompatTypeError`` when it does not bind."""
    fn = getattr(model, "forward", model)
    try:
        sig, plan = _signature(fn)
        if plan is not None and not kwargs and plan[1] <= len(args) <= len(plan[0]):
            # what the general path below gives such a call, without Signature.bind
            return tuple(Param(name, "pos", value) for name, value in zip(plan[0], args))
        bound = sig.bind(*args, **(kwargs or {}))
    except (TypeError, ValueError) as exc:
        raise CompatTypeError(f"args/kwargs do not match {type(model).__name__}.forward(): {exc}") from exc
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in _POSITIONAL_KINDS]
    last = max((i for i, p in enumerate(positional) if p.name in bound.arguments), default=-1)
    out: list[Param] = []
    for p in positional[: last + 1]:
        value = bound.arguments.get(p.name, p.default)
        if value is inspect.Parameter.empty:
            raise CompatTypeError(f"forward() parameter {p.name!r} has no value and no default")
        out.append(Param(p.name, "pos", value))
    for p in params:
        if p.kind in _KINDS and p.name in bound.arguments:
            out.append(Param(p.name, _KINDS[p.kind], bound.arguments[p.name]))
    return tuple(out)


def try_bind(
    model: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
) -> tuple[tuple[Param, ...] | None, str | None]:
    """``(params, None)``, or ``(None, why)`` for a call forward() cannot take (the routes then
    pass it on as given, and torch reports it in its own words)."""
    try:
        return bind(model, args, kwargs), None
    except CompatTypeError as exc:
        return None, str(exc)


def call_of(params: Sequence[Param]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` that call forward() with ``params``; a dict as the last positional
    input is passed by name, since ``torch.onnx.export`` reads a trailing dict as keyword inputs."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.kind == "pos":
            args.append(p.value)
        elif p.kind == "varpos":
            args.extend(p.value)
        elif p.kind == "kw":
            kwargs[p.name] = p.value
        else:
            kwargs.update(p.value)
    if not kwargs and args and isinstance(args[-1], dict) and params[-1].kind == "pos":
        kwargs[params[-1].name] = args.pop()
    return tuple(args), kwargs


def keyword_inputs(params: Sequence[Param], kwargs: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """The call's keyword inputs ``(name, value)`` in forward()'s signature order (those
    ``**kwargs`` takes last, in the order given)."""
    if not kwargs:
        return []
    out: list[tuple[str, Any]] = []
    for p in params:
        if p.kind == "varkw":
            out.extend(p.value.items())
        elif p.kind in ("pos", "kw") and p.name in kwargs:
            out.append((p.name, p.value))
    return out
