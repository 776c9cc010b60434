"""Every symbolic registration the captured program reaches is applied or refused by name
(issue 31): one test per registration kind, on the torch.export route, in both modes (CI runs
tests/symbolics with the TorchScript exporter present and hidden)."""

from __future__ import annotations

import onnx
import pytest
import symbolics_helpers as H
import torch

from compat.errors import RouteFailed, SymbolicNotApplied

# ---------------------------------------------------------------- torch.library op + symbolic


lib = torch.library.Library("nsskip", "DEF")
lib.define("scaled(Tensor x) -> Tensor")
# a composite op: kept for its registered symbolic, not decomposed away
lib.impl("scaled", lambda x: x * 3.0, "CompositeImplicitAutograd")


def scaled_symbolic(g, x):
    return g.op("nsskip::Scaled", x)


class UsesScaled(torch.nn.Module):
    def forward(self, x):
        return torch.ops.nsskip.scaled(x) + 1


def test_composite_torch_library_op_gets_its_symbolic(registered):
    registered("nsskip::scaled", scaled_symbolic, 11)
    outcome = H.export_new(UsesScaled().eval(), (torch.randn(2, 3),))
    assert ("nsskip", "Scaled") in [(n.domain, n.op_type) for n in outcome.program.model.graph]


# ---------------------------------------------------------------- register_custom_op_symbolic (aten)


def to_symbolic(g, self, *args):
    return g.op("custom::To", self)


class UsesTo(torch.nn.Module):
    def forward(self, x):
        return x.to(torch.float64) * 2


def test_aten_registration_replaced_by_torch_export_is_refused_by_name(registered):
    registered("::to", to_symbolic, 11)
    with pytest.raises(SymbolicNotApplied) as info:
        H.export_new(UsesTo().eval(), (torch.randn(2, 3),))
    assert f"{__name__}.to_symbolic" in str(info.value) and "aten::to" in str(info.value)


# ---------------------------------------------------------------- registered directly with torch


@torch.library.custom_op("nsskip::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)


def twice_symbolic(g, x):
    return g.op("nsskip::Twice", x)


class UsesTwice(torch.nn.Module):
    def forward(self, x):
        return twice(x) - 1


def _torch_register() -> tuple:
    from torch.onnx._internal.torchscript_exporter import utils

    return utils.register_custom_op_symbolic, utils.unregister_custom_op_symbolic


def test_registration_made_directly_with_torch_is_applied_in_both_modes():
    """torchvision/onnxruntime register with torch.onnx.register_custom_op_symbolic at import:
    the route applies those with the TorchScript exporter present or hidden, never skips them."""
    register, unregister = _torch_register()
    register("nsskip::twice", twice_symbolic, 11)
    try:
        outcome = H.export_new(UsesTwice().eval(), (torch.randn(2, 3),))
    finally:
        unregister("nsskip::twice", 11)
    ops = [(n.domain, n.op_type) for n in onnx.load_from_string(
        outcome.program.model_proto.SerializeToString()).graph.node]
    assert ("nsskip", "Twice") in ops


# ---------------------------------------------------------------- autograd.Function.symbolic


class AtenFallback(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.relu()

    @staticmethod
    def symbolic(g, x):
        return g.at("relu", x)


class UsesAtenFallback(torch.nn.Module):
    def forward(self, x):
        return AtenFallback.apply(x) * 2


def test_function_symbolic_that_cannot_run_is_refused_by_name():
    with pytest.raises(RouteFailed) as info:
        H.export_new(UsesAtenFallback().eval(), (torch.randn(2, 3),))
    assert "AtenFallback.symbolic" in str(info.value) and "g.at('relu')" in str(info.value)


class CallsMissingHelper(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.flip(0)

    @staticmethod
    def symbolic(g, x):
        from torch.onnx import symbolic_opset9

        return symbolic_opset9.hardtanh(g, x, 0.0, 1.0)


class UsesMissingHelper(torch.nn.Module):
    def forward(self, x):
        return CallsMissingHelper.apply(x) + 1


def test_function_symbolic_calling_a_torch_helper_we_lack_is_refused_by_name():
    with pytest.raises(RouteFailed) as info:
        H.export_new(UsesMissingHelper().eval(), (torch.randn(2, 3),))
    text = str(info.value)
    assert "CallsMissingHelper.symbolic" in text and "symbolic_opset9.hardtanh" in text
