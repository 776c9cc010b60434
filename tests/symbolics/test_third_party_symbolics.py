"""Real third-party symbolic shapes on the torch.export route (issue 10): torchvision's roi_pool
``(value, None)``, mmdeploy's wrapped-number layer_norm, a Function imported inside forward, an
mmcv-style compiled kernel without a fake implementation, opset-11 RoiAlign coordinates."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import onnx
import pytest
import symbolics_helpers as H
import torch
import vision_style_ops as V
from torch.onnx.symbolic_helper import parse_args

from compat.errors import RouteFailed
from dynamo import legacy_graph, validate

pytestmark = pytest.mark.slow


def _strict(proto: onnx.ModelProto) -> None:
    onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True, data_prop=True)


def _rois(n: int, batch: int = 2, size: float = 14.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(n)
    xy = torch.rand(n, 2, generator=g) * size * 0.6
    wh = torch.rand(n, 2, generator=g) * size * 0.4 + 0.3
    idx = torch.randint(0, batch, (n, 1), generator=g).float()
    return torch.cat([idx, xy, xy + wh], dim=1)


# ---------------------------------------------------------------- 1. (value, None)

class RoIPoolHead(torch.nn.Module):
    def forward(self, x, rois):
        pooled, _ = V.roi_pool(x, rois, 0.5, 3, 3)
        return pooled.flatten(1).relu()


class UsesArgmax(torch.nn.Module):
    def forward(self, x, rois):
        pooled, argmax = V.roi_pool(x, rois, 0.5, 3, 3)
        return pooled, argmax


@pytest.fixture(scope="module")
def roi_pool_export():
    x, rois = torch.randn(2, 4, 16, 16), _rois(5)
    shapes = ({2: torch.export.Dim("h", min=8, max=64), 3: torch.export.Dim("w", min=8, max=64)},
              {0: torch.export.Dim("rois")})
    with H.registrations(("tvfix::roi_pool", V.roi_pool_symbolic, 11)):
        outcome = H.export_new(RoIPoolHead(), (x, rois), dynamic_shapes=shapes)
    return outcome


def test_roi_pool_value_none_is_accepted(roi_pool_export):
    proto = roi_pool_export.program.model_proto
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("MaxRoiPool") == 1
    assert not any(legacy_graph.NONE_OUTPUT_KEY in {p.key for p in n.metadata_props}
                   for n in proto.graph.node)  # the placeholder is gone
    _strict(proto)


@pytest.mark.parametrize(("n_rois", "hw"), [(5, 16), (9, 16), (5, 24)])
def test_roi_pool_numerics(roi_pool_export, n_rois, hw):
    x, rois = torch.randn(2, 4, hw, hw), _rois(n_rois, size=hw)
    (got,) = H.run_ort(roi_pool_export.program.model_proto, {"x": x, "rois": rois})
    np.testing.assert_allclose(got, RoIPoolHead()(x, rois).numpy(), rtol=1e-5, atol=1e-5)


def test_used_none_output_is_a_named_route_failure():
    with H.registrations(("tvfix::roi_pool", V.roi_pool_symbolic, 11)), \
            pytest.raises(RouteFailed) as info:
        H.export_new(UsesArgmax(), (torch.randn(1, 2, 8, 8), _rois(3, batch=1, size=8)))
    assert info.value.reason == "legacy symbolic returned None for a used output"
    assert "roi_pool_symbolic returned None for an output the model uses" in str(info.value)


# ---------------------------------------------------------------- 2. wrapped numbers

@parse_args("v", "is", "v", "v", "f", "i")
def layer_norm__default(g, input, normalized_shape, weight, bias, eps, cudnn_enable):
    """mmdeploy/pytorch/ops/layer_norm.py, as written there."""
    import torch.onnx.symbolic_helper as sym_help
    from torch.onnx.symbolic_opset9 import add, mul, pow, sqrt, sub

    axes = [-i for i in range(len(normalized_shape), 0, -1)]

    two_cst = sym_help._generate_wrapped_number(g, 2.)
    eps_cst = sym_help._generate_wrapped_number(g, eps)

    mean = g.op("ReduceMean", input, axes_i=axes, keepdims_i=1)
    numerator = sub(g, input, mean)
    variance = g.op("ReduceMean", pow(g, numerator, two_cst), axes_i=axes, keepdims_i=1)
    denominator = sqrt(g, add(g, variance, eps_cst))

    layer_norm = g.op("Div", numerator, denominator)

    if not (weight is None or sym_help._is_none(weight)):
        layer_norm = mul(g, layer_norm, weight)
    if not (bias is None or sym_help._is_none(bias)):
        layer_norm = add(g, layer_norm, bias)

    return layer_norm


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 64)
        self.norm = torch.nn.LayerNorm(64)

    def forward(self, x):
        return self.norm(self.fc(x))


@pytest.fixture(scope="module")
def layer_norm_export():
    torch.manual_seed(0)
    model = Block().eval()
    with torch.no_grad():
        model.norm.weight.uniform_(0.5, 1.5)
        model.norm.bias.uniform_(-0.5, 0.5)
    # registered at 11 like mmdeploy's: it applies up to opset 16 (torch's own layer_norm from 17)
    with H.registrations(("aten::layer_norm", layer_norm__default, 11)):
        outcome = H.export_new(model, (torch.randn(3, 5, 8),), opset_version=11,
                               dynamic_shapes=({0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")},))
    return model, outcome


def test_wrapped_numbers_take_the_tensor_dtype(layer_norm_export):
    _, outcome = layer_norm_export
    proto = outcome.program.model_proto
    assert ("ONX301", "aten::layer_norm") in {(t.code, t.option) for t in outcome.translations}
    ops = [n.op_type for n in proto.graph.node]
    assert "LayerNormalization" not in ops and "Pow" in ops  # the symbolic's own decomposition
    inferred = onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
    types = [v.type.tensor_type.elem_type for v in (*inferred.graph.value_info, *inferred.graph.output)]
    types += [t.data_type for t in inferred.graph.initializer]
    types += [a.t.data_type for n in inferred.graph.node for a in n.attribute if a.name == "value"]
    assert onnx.TensorProto.DOUBLE not in types


@pytest.mark.parametrize(("batch", "seq"), [(3, 5), (1, 5), (4, 2)])
def test_wrapped_numbers_numerics(layer_norm_export, batch, seq):
    model, outcome = layer_norm_export
    x = torch.randn(batch, seq, 8)
    (got,) = H.run_ort(outcome.program.model_proto, {"x": x})
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-4, atol=1e-5)


@torch.library.custom_op("tvfix::shift", mutates_args=())
def shift(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@shift.register_fake
def _(x):
    return torch.empty_like(x)


def shift_double_symbolic(g, x):
    # a 1-element double tensor is no wrapped number: the TorchScript route keeps it double too
    return g.op("Add", x, g.op("Constant", value_t=torch.tensor([1.0], dtype=torch.double)))


class Shift(torch.nn.Module):
    def forward(self, x):
        return shift(x) * 2


def test_invalid_model_is_a_route_failure_and_auto_falls_back(tmp_path):
    args = (torch.randn(2, 3),)
    with H.registrations(("tvfix::shift", shift_double_symbolic, 11)):
        with pytest.raises(RouteFailed) as info:
            H.export_new(Shift(), args)
        assert info.value.reason == validate.REASON
        assert "inconsistent type" in str(info.value)

        import compat

        path = tmp_path / "shift.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compat.export(Shift(), args, str(path), opset_version=17)
    outcome = compat.last_outcome()
    assert outcome.route == "legacy"
    assert validate.REASON in outcome.fallback_reason


def test_strict_check_leaves_the_weights_in_place(layer_norm_export):
    _, outcome = layer_norm_export
    model = outcome.program.model
    before = {name: v.const_value for name, v in model.graph.initializers.items()}
    validate.check(outcome.program)
    assert {name: v.const_value for name, v in model.graph.initializers.items()} == before
    big = [v for v in model.graph.initializers.values() if v.const_value.nbytes > validate.INLINE_LIMIT]
    assert big  # the Linear weight was detached for the check and is back


# ---------------------------------------------------------------- 3. Function imported in forward

class LateImport(torch.nn.Module):
    def forward(self, x):
        from late_function_ops import LateScale

        return LateScale.apply(x, 3.0) + 1


def test_function_imported_inside_forward_becomes_a_custom_node():
    import gc

    from dynamo import autograd_functions

    sys.modules.pop("late_function_ops", None)
    gc.collect()
    assert "LateScale" not in {c.__name__ for c in autograd_functions.functions_with_symbolic()}
    outcome = H.export_new(LateImport(), (torch.randn(2, 3),))
    nodes = H.custom_nodes(outcome.program.model_proto)
    assert [(d, op, attrs) for d, op, attrs, _, _ in nodes] == [
        ("latefix", "Scale", {"alpha": ("FLOAT", 3.0)})]
    assert ("ONX302", "late_function_ops.LateScale") in {
        (t.code, t.option) for t in outcome.translations}


# ---------------------------------------------------------------- 4. compiled kernel, no fake

class MmcvRoIPool(torch.nn.Module):
    function = V.RoIPoolFunction

    def forward(self, x, rois):
        return self.function.apply(x, rois, (2, 2), 0.5)


class ShapedMmcvRoIPool(MmcvRoIPool):
    function = V.ShapedRoIPoolFunction


class PlainMmcvRoIPool(MmcvRoIPool):
    function = V.PlainRoIPoolFunction


@pytest.mark.parametrize("model", [MmcvRoIPool(), PlainMmcvRoIPool()], ids=["symbolic", "plain"])
def test_kernel_without_fake_names_function_and_op(model):
    with pytest.raises(RouteFailed) as info:
        H.export_new(model, (torch.randn(1, 3, 8, 8), _rois(3, batch=1, size=8)))
    reason = info.value.reason
    assert reason.startswith(legacy_graph.REASON_NO_FAKE)
    assert model.function.__qualname__ in reason and "mmcvfix_ext" in reason
    assert "register_fake" in str(info.value)


def test_kernel_without_fake_falls_back_with_the_reason(tmp_path):
    import compat

    x, rois = torch.randn(1, 3, 8, 8), _rois(3, batch=1, size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(MmcvRoIPool(), (x, rois), str(tmp_path / "m.onnx"), opset_version=17,
                      input_names=["x", "rois"])
    outcome = compat.last_outcome()
    assert outcome.route == "legacy"
    assert "RoIPoolFunction calls mmcvfix_ext" in outcome.fallback_reason
    (got,) = H.run_ort(onnx.load(str(tmp_path / "m.onnx")), {"x": x, "rois": rois})
    np.testing.assert_allclose(got, MmcvRoIPool()(x, rois).numpy(), rtol=1e-5)


def test_register_fake_makes_the_function_a_custom_node():
    x, rois = torch.randn(1, 3, 8, 8), _rois(3, batch=1, size=8)
    outcome = H.export_new(ShapedMmcvRoIPool(), (x, rois),
                           dynamic_shapes=(None, {0: torch.export.Dim("rois")}))
    proto = outcome.program.model_proto
    assert [n.op_type for n in proto.graph.node].count("MaxRoiPool") == 1
    for n in (3, 6):
        rois = _rois(n, batch=1, size=8)
        (got,) = H.run_ort(proto, {"x": x, "rois": rois})
        np.testing.assert_allclose(got, ShapedMmcvRoIPool()(x, rois).numpy(), rtol=1e-5)


# ---------------------------------------------------------------- 5. opset-11 RoiAlign

class RoIAlignHead(torch.nn.Module):
    def forward(self, x, rois):
        return V.roi_align(x, rois, 0.5, 2, 2, 2, False)


@pytest.fixture(scope="module", params=[18, 11], ids=["opset18", "opset11"])
def roi_align_export(request):
    x, rois = torch.randn(2, 3, 12, 12), _rois(4, size=24)
    shapes = ({2: torch.export.Dim("h", min=4, max=64), 3: torch.export.Dim("w", min=4, max=64)},
              {0: torch.export.Dim("rois")})
    with H.registrations(("tvfix::roi_align", V.roi_align_opset11, 11)), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = H.export_new(RoIAlignHead(), (x, rois), dynamic_shapes=shapes,
                               opset_version=request.param)
    return request.param, outcome


def test_opset11_roi_align_keeps_output_half_pixel(roi_align_export):
    opset, outcome = roi_align_export
    proto = outcome.program.model_proto
    assert H.opset_imports(proto)[""] == opset
    (node,) = [n for n in proto.graph.node if n.op_type == "RoiAlign"]
    attrs = {a.name: H.attr_value(a)[1] for a in node.attribute}
    # RoiAlign-10 (opset 11) has no such attribute: its only mode is output_half_pixel
    assert attrs.get("coordinate_transformation_mode") == (
        "output_half_pixel" if opset >= 16 else None)
    assert any("RoiAlign" in t.action and "output_half_pixel" in t.action
               for t in outcome.translations)


@pytest.mark.parametrize(("n_rois", "hw"), [(4, 12), (7, 12), (4, 20)])
def test_opset11_roi_align_numerics(roi_align_export, n_rois, hw):
    _, outcome = roi_align_export
    x, rois = torch.randn(2, 3, hw, hw), _rois(n_rois, size=2 * hw)
    (got,) = H.run_ort(outcome.program.model_proto, {"x": x, "rois": rois})
    want = V.roi_align_reference(x, rois, 0.5, 2, 2, 2, aligned=False)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)


def test_roi_align_at_opset16_keeps_the_new_default():
    from dynamo import opset_idioms

    spec = opset_idioms.NodeSpec("RoiAlign", [None, None, None], {"output_height": 2}, 1)
    assert opset_idioms.rewrite(spec, None, None, source_opset=16) is None
    assert "coordinate_transformation_mode" not in spec.attrs
