"""What the adapter cannot run is detected and named (RouteFailed on the torch.export route)."""

from __future__ import annotations

import pytest
import symbolics_helpers as H
import torch

from compat.errors import RouteFailed
from dynamo import legacy_graph

pytestmark = pytest.mark.slow


@torch.library.custom_op("limtest::op", mutates_args=())
def lim_op(x: torch.Tensor) -> torch.Tensor:
    return x.relu()


@lim_op.register_fake
def _(x):
    return torch.empty_like(x)


class UsesOp(torch.nn.Module):
    def forward(self, x):
        return lim_op(x) + 1


def sym_aten_fallback(g, x):
    return g.at("relu", x)


def sym_blocks(g, x):
    from torch.onnx._internal.torchscript_exporter import jit_utils

    cond = g.op("Constant", value_t=torch.tensor(True))
    out, (then_ctx, else_ctx), _ = jit_utils.add_op_with_blocks(g, "If", cond, n_blocks=2)
    then_ctx.op("Relu", x)
    else_ctx.op("Neg", x)
    return out


def sym_raw_graph(g, x):
    g.insertConstant(1)
    return g.op("Relu", x)


@pytest.mark.parametrize(
    ("symbolic", "reason", "construct"),
    [
        (sym_aten_fallback, legacy_graph.REASON_ATEN, "g.at('relu')"),
        (sym_blocks, legacy_graph.REASON_BLOCKS, "blocks"),
        (sym_raw_graph, legacy_graph.REASON_RAW_GRAPH, "g.insertConstant"),
    ],
)
def test_symbolic_limits_are_named(registered, symbolic, reason, construct):
    registered("limtest::op", symbolic, 9)
    with pytest.raises(RouteFailed) as info:
        H.export_new(UsesOp().eval(), (torch.randn(2, 3),))
    err = info.value
    assert (err.route, err.reason) == ("dynamo", reason)
    assert isinstance(err.cause, legacy_graph.LegacyOnly)
    assert f"{__name__}.{symbolic.__qualname__}" in str(err)
    assert construct in str(err)


class NonZero(torch.autograd.Function):
    """A data-dependent output size whose forward also needs the example's own values: it
    refuses inputs without a positive value, so no synthetic input run can tell its shapes."""

    @staticmethod
    def forward(ctx, x):
        kept = x[x > 0]
        if kept.numel() == 0:
            raise ValueError("no positive value")
        return kept

    @staticmethod
    def symbolic(g, x):
        return g.op("custom::PositiveValues", x)


class UsesNonZero(torch.nn.Module):
    def forward(self, x):
        return NonZero.apply(x) * 2


def test_data_dependent_function_output_is_named():
    with pytest.raises(RouteFailed) as info:
        H.export_new(UsesNonZero().eval(), (torch.randn(4, 3),))
    err = info.value
    assert err.reason == legacy_graph.REASON_DATA_DEPENDENT
    assert "NonZero.symbolic" in str(err) and "NonZero.forward" in str(err)
    from dynamo import autograd_functions

    assert torch.autograd.Function.__dict__["apply"] is autograd_functions._ORIGINAL_APPLY
