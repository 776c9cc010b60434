"""Einsum (opset 12) as ReduceSum, Transpose, Reshape and MatMul, operand pair by operand pair.

Each pair is brought to ``[batch..., left, contracted]`` @ ``[batch..., contracted, right]``
(the MatMul broadcasts the batch axes); sizes are read at run time, so dynamic axes stay dynamic.
Equations with an ellipsis or a letter repeated within one operand (diagonals) have no older form.
"""

from __future__ import annotations

from collections import Counter

from .base import Outputs, Rewrite


def _parse(rw: Rewrite, n_inputs: int) -> tuple[list[str], str]:
    equation = str(rw.attr("equation", "")).replace(" ", "")
    if "." in equation:
        raise rw.no_form(12, "an ellipsis in its equation")
    lhs, _, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != n_inputs or any(len(set(t)) != len(t) for t in terms):
        raise rw.no_form(12, f"equation {equation!r} (repeated letters in one operand)")
    if "->" not in equation:
        counts = Counter("".join(terms))
        rhs = "".join(sorted(c for c, k in counts.items() if k == 1))
    return terms, rhs


def _transpose(rw: Rewrite, x, have: str, want: str):
    if have == want:
        return x
    return rw.op("Transpose", x, perm=[have.index(c) for c in want])


def _sum_out(rw: Rewrite, x, have: str, keep: set[str]):
    """Sum the axes whose letters are not in ``keep``."""
    gone = [i for i, c in enumerate(have) if c not in keep]
    if not gone:
        return x, have
    return rw.op("ReduceSum", x, rw.ints(gone), keepdims=0), "".join(c for c in have if c in keep)


def _size(rw: Rewrite, x, start: int, end: int):
    """The product of ``x``'s dims ``start:end`` as a 1-element int64 tensor (1 for none)."""
    if start == end:
        return rw.ints([1])
    return rw.op("ReduceProd", rw.op("Shape", x, start=start, end=end), rw.ints([0]), keepdims=1)


def _pair(rw: Rewrite, a, sa: str, b, sb: str, keep: set[str]):
    """``a`` (letters ``sa``) times ``b`` (``sb``), summing every shared letter not in ``keep``."""
    a, sa = _sum_out(rw, a, sa, keep | set(sb))
    b, sb = _sum_out(rw, b, sb, keep | set(sa))
    batch = "".join(c for c in sa if c in sb and c in keep)
    contract = "".join(c for c in sa if c in sb and c not in keep)
    left = "".join(c for c in sa if c not in sb)
    right = "".join(c for c in sb if c not in sa)
    nb, nl, nc = len(batch), len(left), len(contract)
    a = _transpose(rw, a, sa, batch + left + contract)
    b = _transpose(rw, b, sb, batch + contract + right)
    a_batch = rw.op("Shape", a, start=0, end=nb) if nb else None
    b_batch = rw.op("Shape", b, start=0, end=nb) if nb else None
    a3 = rw.op("Reshape", a, rw.op("Concat", *filter(None, [a_batch, _size(rw, a, nb, nb + nl),
                                                           _size(rw, a, nb + nl, nb + nl + nc)]), axis=0))
    b3 = rw.op("Reshape", b, rw.op("Concat", *filter(None, [b_batch, _size(rw, b, nb, nb + nc),
                                                           _size(rw, b, nb + nc, nb + nc + len(right))]), axis=0))
    product = rw.op("MatMul", a3, b3)
    parts = [rw.op("Shape", product, start=0, end=nb)] if nb else []
    if nl:
        parts.append(rw.op("Shape", a, start=nb, end=nb + nl))
    if right:
        parts.append(rw.op("Shape", b, start=nb + nc, end=nb + nc + len(right)))
    shape = rw.op("Concat", *parts, axis=0) if parts else rw.ints([])
    return rw.op("Reshape", product, shape), batch + left + right


def einsum(rw: Rewrite) -> Outputs | None:
    if rw.target >= 12:
        return None  # a type-only change (opset 28)
    inputs = list(rw.node.inputs)
    terms, out = _parse(rw, len(inputs))
    x, have = _sum_out(rw, inputs[0], terms[0], set(out) | set("".join(terms[1:])))
    for i in range(1, len(inputs)):
        later = set(out) | set("".join(terms[i + 1:]))
        x, have = _pair(rw, x, have, inputs[i], terms[i], later)
    return (_transpose(rw, x, have, out) if have != out else rw.op("Identity", x),)


ADAPTERS = {"Einsum": einsum}
