"""Keyword inputs for the TorchScript exporter, passed to forward() by name.

The TorchScript exporter turns a trailing kwargs dict into positional arguments: every forward()
parameter in signature order, with the defaults of those not given (``_decide_input_format``).
Decorated forwards that add keywords themselves (transformers 5 fills ``use_cache`` from the
config) then get the same argument twice. Here the call is bound as Python binds it, and for the
export the model's ``forward`` is an instance attribute with exactly the given inputs as
parameters, which calls the real forward with the keyword inputs by name. Graph-input order stays
the legacy one (positional inputs, then keyword inputs in signature order).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Mapping
from typing import Any


@contextlib.contextmanager
def by_name(model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None) -> Iterator[tuple[Any, ...]]:
    """Yield the ``args`` to give the TorchScript exporter (no kwargs) while ``model.forward``
    takes them positionally and passes ``kwargs`` on by name; the model is restored after.

    Without keyword inputs, for a model that is not a plain ``nn.Module`` or a call its forward()
    cannot bind, it yields the legacy form (``args`` plus the kwargs dict) unchanged."""
    legacy_form = (*args, dict(kwargs)) if kwargs else tuple(args)
    call = _bound_call(model, args, kwargs)
    if call is None:
        yield legacy_form
        return
    names, values, n_positional = call
    original = model.forward
    had_own = "forward" in vars(model)
    own = vars(model).get("forward")

    def forward(*inputs: Any) -> Any:
        return original(*inputs[:n_positional], **dict(zip(names[n_positional:], inputs[n_positional:])))

    forward.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])
    object.__setattr__(model, "forward", forward)
    try:
        # a dict as the last input would be read as keyword inputs: the legacy empty-dict marker
        yield (*values, {}) if values and isinstance(values[-1], dict) else tuple(values)
    finally:
        if had_own:
            object.__setattr__(model, "forward", own)
        else:
            object.__delattr__(model, "forward")


def _bound_call(
    model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None,
) -> tuple[list[str], list[Any], int] | None:
    """(parameter names, values, how many are positional) for the call, keyword inputs in
    forward()'s signature order; None when there is nothing to do or it cannot bind."""
    import torch

    if not kwargs or not isinstance(model, torch.nn.Module) or isinstance(model, torch.jit.ScriptModule):
        return None
    try:
        sig = inspect.signature(model.forward)
        sig.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return None  # the exporter's own handling (and error) applies
    params = list(sig.parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [positional[i] if i < len(positional) else f"input_{i}" for i in range(len(args))]
    values = list(args)
    order = [p.name for p in params if p.kind is not p.VAR_KEYWORD]
    taken = set(names)
    for name in [n for n in order if n in kwargs] + [k for k in kwargs if k not in order]:
        if name not in taken:
            names.append(name)
            values.append(kwargs[name])
    if len(names) != len(set(names)):
        return None
    return names, values, len(args)
