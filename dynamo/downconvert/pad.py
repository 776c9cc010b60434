"""Pad: ``axes`` input appeared at opset 18 (opset 11-17 take pads for every axis), the ``wrap``
mode at 19."""

from __future__ import annotations

from .base import Outputs, Rewrite


def pad(rw: Rewrite) -> Outputs | None:
    if rw.attr("mode", "constant") == "wrap" and rw.target < 19:
        raise rw.no_form(19, "mode='wrap'")
    if rw.target >= 18:
        return None
    if rw.input(3) is None:
        return rw.same(list(rw.node.inputs[:3]))
    axes = rw.const_ints(3, 18, "axes")
    pads = rw.const_ints(1, 18, "pads")
    rank = rw.rank(rw.input(0))
    if rank is None or axes is None or pads is None:
        raise rw.no_form(18, "its axes input needs a known rank to spell pads for every axis")
    full = [0] * (2 * rank)
    for i, axis in enumerate(axes):
        axis %= rank
        full[axis], full[rank + axis] = pads[i], pads[len(axes) + i]
    return rw.same([rw.input(0), rw.ints(full), rw.input(2)])


ADAPTERS = {"Pad": pad}
