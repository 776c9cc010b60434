"""How a translation the shim registers fits torch's ONNX dispatcher (used by the route and by
the operator_export_type fallback, which the route's options load: one small home for both)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def matches_every_node(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a translation torch's dispatcher chooses for every node of its op.

    Custom translations are tried before torchlib's on every torch, but torch 2.9-2.10 also
    match each candidate's ONNX signature (inferred from the Python one: parameter names and
    types) against the node's arguments and skip one that does not fit (pytorch/pytorch#165083
    removed that in 2.11): a ``(*args, **kwargs)`` translation, or one whose parameter is ``x``
    where the op's argument is ``self``, never fits, so torchlib's built-in would silently
    replace it. An empty signature declares no parameters to
    check, so it fits every node; the exporter calls the translation with the node's arguments
    whatever its signature says (it reads the signature only to dispatch)."""

    def translation(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    translation.__name__ = getattr(fn, "__name__", "translation")
    translation.__qualname__ = getattr(fn, "__qualname__", translation.__name__)
    translation.__signature__ = inspect.Signature()  # type: ignore[attr-defined]
    translation.__wrapped_translation__ = fn  # type: ignore[attr-defined]
    return translation
