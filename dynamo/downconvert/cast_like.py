"""CastLike (opset 15): a Cast to the target input's element type, when that type is known.
Its ``saturate`` (19) and ``round_mode`` (24) go with it (the Cast adapter drops them below)."""

from __future__ import annotations

from .attributes import ANY, added
from .base import Outputs, Rewrite

_later = added(("saturate", 19, ANY), ("round_mode", 24, "up"))


def cast_like(rw: Rewrite) -> Outputs | None:
    if rw.target >= 15:
        return _later(rw)
    dtype = rw.dtype(rw.input(1))
    if dtype is None:
        raise rw.no_form(15, "the element type of its target input is unknown")
    return (rw.op("Cast", rw.input(0), to=dtype, saturate=rw.attr("saturate"), round_mode=rw.attr("round_mode")),)


ADAPTERS = {"CastLike": cast_like}
