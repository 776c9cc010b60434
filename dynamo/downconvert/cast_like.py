"""CastLike (opset 15): a Cast to the target input's element type, when that type is known."""

from __future__ import annotations

from .base import Outputs, Rewrite


def cast_like(rw: Rewrite) -> Outputs:
    dtype = rw.dtype(rw.input(1))
    if dtype is None:
        raise rw.no_form(15, "the element type of its target input is unknown")
    return (rw.op("Cast", rw.input(0), to=dtype),)


ADAPTERS = {"CastLike": cast_like}
