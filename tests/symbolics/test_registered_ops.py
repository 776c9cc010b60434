"""Registered symbolics (torch.library op, aten override) exported on the torch.export route."""

from __future__ import annotations

import numpy as np
import pytest
import symbolics_helpers as H
import torch
from torch.onnx import symbolic_helper

pytestmark = pytest.mark.slow


@torch.library.custom_op("symtest::scale_add", mutates_args=())
def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha + y


@scale_add.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)


@symbolic_helper.parse_args("v", "v", "f")
def scale_add_symbolic(g, x, y, alpha):
    return g.op("Add", g.op("Mul", x, alpha), y)


@symbolic_helper.parse_args("v", "s")
def gelu_contrib(g, x, approximate):
    # as onnxruntime's pytorch_export_contrib_ops does it
    return g.op("com.microsoft::Gelu", x).setType(x.type())


class ScaleGelu(torch.nn.Module):
    def forward(self, x, y):
        return torch.nn.functional.gelu(scale_add(x, y, 2.0)) - 1


@pytest.fixture(scope="module")
def scale_gelu():
    model = ScaleGelu().eval()
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    batch = torch.export.Dim("batch")
    with H.registrations(("symtest::scale_add", scale_add_symbolic, 9), ("::gelu", gelu_contrib, 11)):
        outcome = H.export_new(model, (x, y), dynamic_shapes=({0: batch}, {0: batch}))
    return model, outcome


def test_torch_library_op_and_aten_override_are_translated(scale_gelu):
    _, outcome = scale_gelu
    proto = outcome.program.model_proto
    ops = [(n.domain, n.op_type) for n in proto.graph.node]
    assert ("com.microsoft", "Gelu") in ops
    assert ("", "Mul") in ops and ("", "Add") in ops
    assert not any(op == "Erf" for _, op in ops)
    assert H.opset_imports(proto)["com.microsoft"] == 1
    assert {("ONX301", "symtest::scale_add"), ("ONX301", "aten::gelu")} <= {
        (t.code, t.option) for t in outcome.translations}


@pytest.mark.parametrize("batch", [2, 5])
def test_parity_with_eager_at_two_batch_sizes(scale_gelu, batch):
    model, outcome = scale_gelu
    x, y = torch.randn(batch, 3), torch.randn(batch, 3)
    (got,) = H.run_ort(outcome.program.model_proto, {"x": x, "y": y})
    np.testing.assert_allclose(got, model(x, y).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_registrations_do_not_leak_after_fixture(scale_gelu):
    from compat.routing import registry

    names = {r.name for r in registry.registrations()}
    assert "symtest::scale_add" not in names and "aten::gelu" not in names


# -- a symbolic written for opset 11, with the helpers legacy symbolics lean on

SEEN: dict[str, object] = {}


@torch.library.custom_op("symtest::old_style", mutates_args=())
def old_style(x: torch.Tensor, k: int, dims: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    s = (x.unsqueeze(1) * k).sum(dim=2)
    return s[:, :, :1].contiguous(), s[:, :, 1:].contiguous()


@old_style.register_fake
def _(x, k, dims):
    n, c = x.shape[0], x.shape[2]
    return x.new_empty(n, 1, 1), x.new_empty(n, 1, c - 1)


def old_style_symbolic(g, x, k, dims):
    SEEN["k_kind"] = k.node().kind()
    SEEN["k"] = symbolic_helper._maybe_get_const(k, "i")
    SEEN["dims"] = symbolic_helper._maybe_get_const(dims, "is")
    SEEN["sizes"] = symbolic_helper._get_tensor_sizes(x)
    SEEN["scalar_type"] = x.type().scalarType()
    SEEN["static_sizes"] = x.type().varyingSizes()
    u = g.op("Unsqueeze", x, axes_i=[1])
    u = g.op("Mul", u, g.op("Cast", k, to_i=1))
    r = g.op("ReduceSum", u, axes_i=[2], keepdims_i=0)
    c = symbolic_helper._get_tensor_dim_size(x, 2)
    return g.op("Split", r, split_i=[1, c - 1], axis_i=2, outputs=2)


class OldStyle(torch.nn.Module):
    def forward(self, x):
        a, b = old_style(x, 3, [1, 2])
        return a, b


@pytest.fixture(scope="module")
def old_style_export():
    model = OldStyle().eval()
    x = torch.randn(2, 4, 5)
    with H.registrations(("symtest::old_style", old_style_symbolic, 11)):
        outcome = H.export_new(model, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    return model, outcome


def test_opset11_idioms_run_at_opset_18(old_style_export):
    model, outcome = old_style_export
    proto = outcome.program.model_proto
    assert H.opset_imports(proto)[""] == 18
    by_op = {n.op_type: n for n in proto.graph.node}
    for op in ("Unsqueeze", "ReduceSum", "Split"):
        assert len(by_op[op].input) == 2, op  # axes / split became inputs
        assert not [a.name for a in by_op[op].attribute if a.name in ("axes", "split")]
    for batch in (2, 3):
        x = torch.randn(batch, 4, 5)
        got = H.run_ort(proto, {"x": x})
        for g, want in zip(got, model(x)):
            np.testing.assert_allclose(g, want.numpy(), rtol=1e-5, atol=1e-5)
    assert any(t.option == "symtest::old_style" for t in outcome.translations)


def test_legacy_helpers_see_what_they_expect(old_style_export):
    assert SEEN["k_kind"] == "onnx::Constant"
    assert SEEN["k"] == 3 and SEEN["dims"] == [1, 2]
    assert SEEN["sizes"] == [None, 4, 5]  # the dynamic batch is unknown, as with dynamic_axes
    assert SEEN["scalar_type"] == "Float"


# -- the registration opset is the ONNX opset the symbolic applies from, not a domain version

class Gelu2(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x) * 2


@pytest.mark.parametrize("reg_opset", [11, 17])
def test_registration_opset_is_not_the_custom_domain_version(reg_opset, tmp_path):
    model, x = Gelu2().eval(), torch.randn(2, 3)
    with H.registrations(("::gelu", gelu_contrib, reg_opset)):
        proto = H.export_new(model, (x,), opset_version=18).program.model_proto
        legacy = H.export_legacy(model, (x,), tmp_path, opset_version=18, input_names=["x"])
    # as on the TorchScript route, a custom domain defaults to version 1 (onnxruntime loads it)
    assert H.opset_imports(proto) == H.opset_imports(legacy) == {"": 18, "com.microsoft": 1}
    (got,) = H.run_ort(proto, {"x": x})
    np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_custom_opsets_still_set_the_domain_version_of_a_registration(tmp_path):
    model, x = OldStyleDomain().eval(), torch.randn(2, 3)
    with H.registrations(("::gelu", domain_gelu, 11)):
        proto = H.export_new(model, (x,), custom_opsets={"my_domain": 3}).program.model_proto
        legacy = H.export_legacy(model, (x,), tmp_path, opset_version=18, custom_opsets={"my_domain": 3})
    assert H.opset_imports(proto)["my_domain"] == H.opset_imports(legacy)["my_domain"] == 3
    assert [n[:2] for n in H.custom_nodes(proto)] == [("my_domain", "MyGelu")]


@symbolic_helper.parse_args("v", "s")
def domain_gelu(g, x, approximate):
    return g.op("my_domain::MyGelu", x).setType(x.type())


class OldStyleDomain(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x) + 1


def test_registration_below_torchs_own_symbolic_applies_on_neither_route():
    """The TorchScript exporter prefers its own opset-9 gelu over a custom one registered at
    opset 1 when exporting at 18; the torch.export route decides the same way."""
    from compat.routing import registry

    with H.registrations(("::gelu", gelu_contrib, 1)):
        assert "aten::gelu" not in registry.active(18)
    with H.registrations(("::gelu", gelu_contrib, 11)):
        assert registry.active(18)["aten::gelu"].fn is gelu_contrib


def test_registered_op_that_torch_export_replaces_falls_back(tmp_path):
    """detectron2-style ``::to`` override: torch.export turns ``Tensor.to`` into ``_to_copy``
    before translation, so the symbolic cannot apply there; auto uses the TorchScript route."""
    import compat

    def to_sym(g, self, *args):
        return g.op("qa::MyTo", self)

    class M(torch.nn.Module):
        def forward(self, x):
            return x.to(torch.float64) + 1

    with H.registrations(("::to", to_sym, 9)):
        compat.export(M(), (torch.randn(3, 3),), tmp_path / "m.onnx", opset_version=17)
        out = compat.last_outcome()
        assert out.route == "legacy" and "registered symbolic not applied" in out.fallback_reason
        with pytest.raises(compat.ExportFailed, match="aten::to"):
            compat.export(M(), (torch.randn(3, 3),), tmp_path / "d.onnx", opset_version=17, route="dynamo")
