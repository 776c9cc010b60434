"""The request's inputs in the form the TorchScript exporter takes, keyword inputs passed by name.

``torch.onnx.export(dynamo=False)`` has no ``kwargs=``: keyword inputs go in a trailing dict of
``args`` (and an empty trailing dict marks a dict before it as positional). This adapter is the
only place that produces that legacy form. The exporter then turns the trailing dict into
positional arguments: every forward() parameter in signature order, with the defaults of those
not given (``_decide_input_format``). Decorated forwards that add keywords themselves
(transformers 5 fills ``use_cache`` from the config) then get the same argument twice. So with
keyword inputs, for the export the model's ``forward`` is an instance attribute with exactly the
given inputs as parameters, which calls the real forward with the keyword inputs by name. Graph-
input order stays the legacy one (positional inputs, then keyword inputs in signature order).
The call is read as ``normalize`` bound it (``ExportRequest.params``), never bound again here.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Mapping
from typing import Any

from compat.request import ExportRequest
from compat.request.binding import keyword_inputs


def legacy_args(args: tuple[Any, ...], kwargs: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """``args`` in the TorchScript exporter's form: keyword inputs as a trailing dict; a dict as
    the last positional input followed by the empty dict that marks it positional."""
    if kwargs:
        return (*args, dict(kwargs))
    if args and isinstance(args[-1], dict):
        return (*args, {})
    return tuple(args)


@contextlib.contextmanager
def by_name(req: ExportRequest) -> Iterator[tuple[Any, ...]]:
    """Yield the ``args`` to give the TorchScript exporter (no kwargs) while ``model.forward``
    takes them positionally and passes the keyword inputs on by name; the model is restored after.

    Without keyword inputs, for a model that is not a plain ``nn.Module`` or a call its forward()
    cannot bind, it yields the legacy form (``legacy_args``) of the call as given."""
    model = req.model
    call = _bound_call(req)
    if call is None:
        yield legacy_args(tuple(req.args), req.kwargs)
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
        yield legacy_args(tuple(values), None)
    finally:
        if had_own:
            object.__setattr__(model, "forward", own)
        else:
            object.__delattr__(model, "forward")


def _bound_call(req: ExportRequest) -> tuple[list[str], list[Any], int] | None:
    """(parameter names, values, how many are positional) for the call, keyword inputs in
    forward()'s signature order; None when there is nothing to do or it does not bind."""
    import torch

    model, args, params = req.model, tuple(req.args), req.params
    if not req.kwargs or params is None or not isinstance(model, torch.nn.Module) \
            or isinstance(model, torch.jit.ScriptModule):
        return None  # the exporter's own handling (and error) applies
    # the positional inputs fill forward()'s leading positional parameters, then *args
    names = [params[i].name if i < len(params) and params[i].kind == "pos" else f"input_{i}"
             for i in range(len(args))]
    values = list(args)
    taken = set(names)
    for name, value in keyword_inputs(params, req.kwargs):
        if name not in taken:
            names.append(name)
            values.append(value)
    if len(names) != len(set(names)):
        return None
    return names, values, len(args)
