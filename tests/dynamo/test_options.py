"""ONX103-107 and the other legacy options on the torch.export route, against the TorchScript one."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import dynamo
from compat.errors import RouteFailed
from compat.request import ExportRequest
import route_parity as parity  # tests/helpers
from dynamo import capabilities


class ConvBNEval(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.l = nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.l(x))


X4 = torch.randn(2, 3, 8, 8)
X2 = torch.randn(2, 4)


def _req(model, args, **kw) -> ExportRequest:
    given = frozenset(k for k in kw if k not in ("input_names", "output_names"))
    return ExportRequest(model=model, args=args, input_names=("x",), output_names=("y",), given=given, **kw)


# --- do_constant_folding (ONX104) --------------------------------------------------------------

@pytest.mark.parametrize("fold", [True, False])
def test_constant_folding_like_legacy(fold):
    m = ConvBNEval().eval()
    new, outcome = parity.dynamo_proto(_req(m, (X4,), do_constant_folding=fold))
    old = parity.legacy_proto(m, (X4,), do_constant_folding=fold, input_names=["x"], output_names=["y"], opset_version=18)
    params = {k for k, _ in m.named_parameters()}
    new_inits = set(parity.describe(new)["initializers"])
    if fold:
        assert not params <= new_inits  # BatchNorm folded into the Conv, as legacy folds it
    else:
        assert params <= new_inits and params <= set(parity.describe(old)["initializers"])
    ref = parity.eager(m, (X4,))[0]
    for proto in (new, old):
        np.testing.assert_allclose(parity.run(proto, {"x": X4})[0], ref, rtol=1e-4, atol=1e-5)
    assert any(t.code == "ONX104" for t in outcome.translations)


# --- custom_opsets (ONX105) --------------------------------------------------------------------

class _ReluFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp_min(0)

    @staticmethod
    def symbolic(g, x):
        return g.op("custom_domain::MyRelu", x)


class CustomOp(nn.Module):
    def forward(self, x):
        if torch.compiler.is_exporting():  # the torch.export way of emitting a custom node
            y = torch.onnx.ops.symbolic("custom_domain::MyRelu", (x,), dtype=x.dtype, shape=x.shape, version=1)
        else:
            y = _ReluFn.apply(x)
        return y * 2


def test_custom_opsets_become_opset_imports():
    new, outcome = parity.dynamo_proto(_req(CustomOp(), (X2,), custom_opsets={"custom_domain": 2}, opset_version=18))
    old = parity.legacy_proto(CustomOp(), (X2,), custom_opsets={"custom_domain": 2}, opset_version=18,
                              input_names=["x"], output_names=["y"])
    assert parity.describe(new)["opsets"] == parity.describe(old)["opsets"] == {"": 18, "custom_domain": 2}
    assert [n.op_type for n in new.graph.node if n.domain == "custom_domain"] == ["MyRelu"]
    assert any(t.code == "ONX105" for t in outcome.translations)


# --- initializers, export_params, verbose, opset_version ----------------------------------------

@pytest.mark.parametrize("options", [
    {"keep_initializers_as_inputs": True},
    {"export_params": False},
    {"export_params": False, "keep_initializers_as_inputs": True},
])
def test_initializer_options_like_legacy(options):
    m = Mlp().eval()
    new, outcome = parity.dynamo_proto(_req(m, (X2,), opset_version=18, **options))
    old = parity.legacy_proto(m, (X2,), input_names=["x"], output_names=["y"], opset_version=18, **options)
    a, b = parity.describe(new), parity.describe(old)
    assert a["all_inputs"] == b["all_inputs"] == ["x", "l.weight", "l.bias"]
    assert a["initializers"] == b["initializers"]
    if options.get("export_params", True):
        np.testing.assert_allclose(parity.run(new, {"x": X2})[0], parity.eager(m, (X2,))[0], rtol=1e-5, atol=1e-6)
    else:
        feeds = {"x": X2, "l.weight": m.l.weight, "l.bias": m.l.bias}
        np.testing.assert_allclose(parity.run(new, feeds)[0], parity.run(old, feeds)[0], rtol=1e-5, atol=1e-6)
    assert {t.option for t in outcome.translations} & set(options)


def test_verbose_prints_the_graph(capfd):
    parity.dynamo_proto(_req(Mlp(), (X2,), verbose=True))
    assert "main_graph" in capfd.readouterr().out


def test_default_verbose_is_quiet(capfd):
    parity.dynamo_proto(_req(Mlp(), (X2,)))
    assert "torch.export" not in capfd.readouterr().out


def test_lower_opset_converted_when_possible():
    new, outcome = parity.dynamo_proto(_req(Mlp(), (X2,), opset_version=17))
    assert parity.describe(new)["opsets"][""] == 17
    np.testing.assert_allclose(parity.run(new, {"x": X2})[0], parity.eager(Mlp(), (X2,))[0], rtol=1e-5, atol=1e-6)
    assert any(t.option == "opset_version" for t in outcome.translations)


def test_opset_below_18_reached_by_compat_down_conversion():
    # onnx's version converter has no Relu 14->13 adapter; compat's down-conversion does it
    m = ConvBNEval().eval()
    new, outcome = parity.dynamo_proto(_req(m, (X4,), opset_version=13))
    assert parity.describe(new)["opsets"][""] == 13
    np.testing.assert_allclose(parity.run(new, {"x": X4})[0], parity.eager(m, (X4,))[0], rtol=1e-4, atol=1e-5)
    assert any("converted to 13 by compat's down-conversion" in t.action for t in outcome.translations)


# --- legacy-only options (ONX106, ONX107) and ScriptModules ---------------------------------------
# (the ATen export types of ONX103 are translated: tests/dynamo/test_aten_fallback.py)

@pytest.mark.parametrize("option, value, code", [
    ("export_modules_as_functions", True, "ONX106"),
    ("export_modules_as_functions", {nn.Linear}, "ONX106"),
    ("autograd_inlining", False, "ONX107"),
])
def test_legacy_only_options_route_to_torchscript(option, value, code):
    req = _req(Mlp(), (X2,), **{option: value})
    assert [c for c, _ in capabilities.legacy_only_reasons(req)] == [code]
    with pytest.raises(RouteFailed) as info:  # route="dynamo": a clear error, before any export
        dynamo.export(req)
    assert code in info.value.reason and "route='legacy'" in str(info.value) and option in str(info.value)


def test_script_modules_route_to_torchscript():
    scripted = torch.jit.script(Mlp().eval())
    req = _req(scripted, (X2,))
    reasons = capabilities.legacy_only_reasons(req)
    assert reasons and "ScriptModule" in reasons[0][1]
    with pytest.raises(RouteFailed):
        dynamo.export(req)
    old = parity.legacy_proto(scripted, (X2,), input_names=["x"])
    np.testing.assert_allclose(parity.run(old, {"x": X2})[0], parity.eager(Mlp().eval(), (X2,))[0], rtol=1e-5, atol=1e-6)


# --- torch.onnx.is_in_onnx_export() -------------------------------------------------------------

class Branchy(nn.Module):
    def forward(self, x):
        return x + 1 if torch.onnx.is_in_onnx_export() else x - 1


def test_is_in_onnx_export_true_while_either_route_captures():
    new, _ = parity.dynamo_proto(_req(Branchy(), (X2,)))
    old = parity.legacy_proto(Branchy(), (X2,), input_names=["x"])
    for proto in (new, old):
        np.testing.assert_allclose(parity.run(proto, {"x": X2})[0], (X2 + 1).numpy())
    assert not torch.onnx.is_in_onnx_export()


# --- export_params=False / keep_initializers_as_inputs: only weights become inputs --------------

class ClampReshape(nn.Module):
    """Constants besides the weights (clamp bounds, a reshape shape) and weights torch would fold."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 10)
        self.w = nn.Parameter(torch.randn(10, 10))
        self.register_buffer("scale", torch.full((10,), 2.0))

    def forward(self, x):
        y = self.fc(x).clamp(-0.3, 0.3) @ (self.w * 2 + 1)
        return (y * self.scale.exp()).reshape(-1, 5, 1)


@pytest.mark.parametrize("options", [
    {"export_params": False},
    {"keep_initializers_as_inputs": True},
    {"export_params": False, "keep_initializers_as_inputs": True},
    {"export_params": False, "do_constant_folding": False},
])
def test_only_parameters_and_buffers_become_inputs(options):
    m = ClampReshape().eval()
    x = torch.randn(3, 4)
    new, outcome = parity.dynamo_proto(_req(m, (x,), opset_version=18, **options))
    d = parity.describe(new)
    weights = set(m.state_dict())
    assert d["all_inputs"][0] == "x" and set(d["all_inputs"][1:]) == weights
    if options.get("export_params", True):
        assert weights <= set(d["initializers"])  # with data, overridable
    else:
        assert not weights & set(d["initializers"])  # no weight data in the model
    # other weights fed (or overriding): the model computes with them, so none was folded in
    other = {k: v + 0.5 for k, v in m.state_dict().items()}
    with torch.no_grad():
        m2 = ClampReshape().eval()
        m2.load_state_dict(other)
    sess = parity.session(new)
    for feeds_from, model in ((m.state_dict(), m), (other, m2)):
        # sess.run directly: parity.run keeps only required inputs, not overridable initializers
        got = sess.run(None, {k: v.numpy() for k, v in {"x": x, **feeds_from}.items()})[0]
        np.testing.assert_allclose(got, parity.eager(model, (x,))[0], rtol=1e-5, atol=1e-5)
    assert {t.option for t in outcome.translations} & set(options)


def test_keep_initializers_as_inputs_runs_without_weight_feeds():
    m = ClampReshape().eval()
    x = torch.randn(3, 4)
    new, _ = parity.dynamo_proto(_req(m, (x,), opset_version=18, keep_initializers_as_inputs=True))
    np.testing.assert_allclose(parity.run(new, {"x": x})[0], parity.eager(m, (x,))[0], rtol=1e-5, atol=1e-5)


def test_exported_program_export_params_false():
    m = ClampReshape().eval()
    x = torch.randn(3, 4)
    ep = torch.export.export(m, (x,))
    new, _ = parity.dynamo_proto(_req(ep, (x,), opset_version=18, export_params=False))
    assert set(parity.describe(new)["all_inputs"]) == {"x", *m.state_dict()}
    got = parity.run(new, {"x": x, **m.state_dict()})[0]
    np.testing.assert_allclose(got, parity.eager(m, (x,))[0], rtol=1e-5, atol=1e-5)
