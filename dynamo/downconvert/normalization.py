"""LayerNormalization (opset 17) and GroupNormalization (18) decomposed into ops every target has.

BatchNormalization's opset-14 ``training_mode`` is in ``attributes``."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .base import Outputs, Rewrite


def layer_norm(rw: Rewrite) -> Outputs | None:
    if rw.target >= 17:
        return None
    x, scale, bias = rw.input(0), rw.input(1), rw.input(2)
    axis = rw.attr("axis", -1)
    if axis >= 0:
        rank = rw.rank(x)
        if rank is None:
            raise rw.no_form(17, "a non-negative axis with an unknown input rank")
        axis -= rank
    dtype = rw.dtype(x)
    if dtype is None:
        raise rw.no_form(17, "its input element type is unknown")
    compute = ir.DataType.FLOAT if rw.attr("stash_type", 1) == 1 else dtype
    xc = x if compute == dtype else rw.op("Cast", x, to=compute)
    axes = rw.ints(range(axis, 0))
    mean = rw.op("ReduceMean", xc, axes, keepdims=1)
    centred = rw.op("Sub", xc, mean)
    var = rw.op("ReduceMean", rw.op("Mul", centred, centred), axes, keepdims=1)
    eps = rw.const(np.asarray(rw.attr("epsilon", 1e-5), dtype=compute.numpy()))
    inv_std = rw.op("Reciprocal", rw.op("Sqrt", rw.op("Add", var, eps)))
    y = rw.op("Mul", centred, inv_std)
    if compute != dtype:
        y = rw.op("Cast", y, to=dtype)
    y = rw.op("Mul", y, scale)
    if bias is not None:
        y = rw.op("Add", y, bias)
    return (y, mean, inv_std)[: len(rw.node.outputs)]


def group_norm(rw: Rewrite) -> Outputs | None:
    """Opset-18 GroupNormalization (scale and bias per group) is InstanceNormalization over
    (N, groups, rest). Opset 21 took scale and bias per channel (and ``stash_type``): normalised
    with unit scale per group, then scaled and shifted per channel."""
    x = rw.input(0)
    groups = rw.attr("num_groups")
    per_channel = rw.source >= 21
    if per_channel and rw.attr("stash_type", 1) != 1:
        raise rw.no_form(21, "stash_type other than 1 (float32)")
    if not per_channel and rw.target >= 18:
        return None
    eps = rw.attr("epsilon", 1e-5)
    grouped = rw.op("Reshape", x, rw.ints([0, groups, -1]))
    if not per_channel:
        normed = rw.op("InstanceNormalization", grouped, rw.input(1), rw.input(2), epsilon=eps)
        return (rw.op("Reshape", normed, rw.op("Shape", x)),)
    rank, dtype = rw.rank(x), rw.dtype(x)
    if rank is None or dtype is None:
        raise rw.no_form(21, "its input rank or element type is unknown")
    ones = rw.const(np.ones(groups, dtype=dtype.numpy()))
    zeros = rw.const(np.zeros(groups, dtype=dtype.numpy()))
    normed = rw.op("InstanceNormalization", grouped, ones, zeros, epsilon=eps)
    per_axis = rw.ints([-1] + [1] * (rank - 2))  # (C, 1, ...): broadcast over the spatial axes
    y = rw.op("Mul", rw.op("Reshape", normed, rw.op("Shape", x)), rw.op("Reshape", rw.input(1), per_axis))
    return (rw.op("Add", y, rw.op("Reshape", rw.input(2), per_axis)),)


ADAPTERS = {"LayerNormalization": layer_norm, "GroupNormalization": group_norm}
