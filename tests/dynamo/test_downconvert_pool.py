"""Pools with ceil_mode below opset 22 (issue 17): torch and onnxruntime drop a last window that
starts in the right padding, the opset<22 specification (onnx's shape inference) counts it. The
down-conversion writes such a pool so both agree, with eager's values."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import route_parity as parity  # tests/helpers
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper
from torch import nn

import compat
from compat.installed import torch_caps
from dynamo.downconvert import downconvert
from dynamo.downconvert.pool import Axis

ISSUE_17 = nn.AvgPool2d(3, 3, padding=1, ceil_mode=True, count_include_pad=False)
POOLS = {
    "avg_exclude_pad": ISSUE_17,
    "avg_include_pad": nn.AvgPool2d(3, 3, padding=1, ceil_mode=True, count_include_pad=True),
    "max": nn.MaxPool2d(3, 3, padding=1, ceil_mode=True),
    "max_dilated_1d": nn.MaxPool1d(2, 3, padding=1, dilation=2, ceil_mode=True),
}
EXAMPLES = {"max_dilated_1d": (20, 16, 50)}


def _strict(proto: onnx.ModelProto) -> None:
    onnx.checker.check_model(proto)
    onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True, data_prop=True)


def test_the_issue_17_shape_rules_disagree():
    axis = Axis(size=50, kernel=3, dilation=1, stride=3, begin=1, end=1)
    assert (axis.spec_size, axis.torch_size, axis.fitted_end) == (18, 17, 0)
    assert ISSUE_17(torch.randn(1, 1, 50, 32)).shape[-2:] == (17, 11)


@pytest.mark.parametrize("name", list(POOLS))
@pytest.mark.parametrize("opset", [None, 18, 17, 11])
def test_ceil_mode_pool_exports_with_eager_values(tmp_path, name, opset):
    """Down-converted (17, 11) or at the opset torch builds (default, 18: no conversion, the pads
    are fitted all the same), the model passes the strict check with eager's values."""
    model = POOLS[name].eval()
    shape = EXAMPLES.get(name, (20, 16, 50, 32))
    path = str(tmp_path / f"{name}.onnx")
    options = {} if opset is None else {"opset_version": opset}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (torch.randn(*shape),), path, route="dynamo",
                      input_names=["x"], dynamic_axes={"x": {0: "batch"}}, **options)
    proto = onnx.load(path)
    written = torch_caps.dynamo_default_opset() if opset is None else opset
    assert {o.version for o in proto.opset_import if o.domain == ""} == {written}
    _strict(proto)
    sess = parity.session(proto)
    for size in (shape, (3, *shape[1:])):
        x = torch.randn(*size)
        np.testing.assert_allclose(parity.run(sess, {"x": x})[0], model(x).numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name} at opset {opset}, input {size}")


def test_dynamic_spatial_axes_keep_eager_sizes(tmp_path):
    """A dynamic spatial size: the node stays as torch wrote it; onnxruntime keeps torch's sizes."""
    path = str(tmp_path / "avg.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(ISSUE_17, (torch.randn(20, 16, 50, 32),), path, route="dynamo", opset_version=17,
                      input_names=["x"], dynamic_axes={"x": {0: "batch", 2: "h", 3: "w"}})
    proto = onnx.load(path)
    _strict(proto)
    sess = parity.session(proto)
    for size in ((20, 16, 50, 32), (2, 16, 47, 29), (1, 16, 51, 30)):
        x = torch.randn(*size)
        np.testing.assert_allclose(parity.run(sess, {"x": x})[0], ISSUE_17(x).numpy(), rtol=1e-5, atol=1e-6)


def _configs():
    for op, k, s, p, d, size, cip in itertools.product(
            ("AveragePool", "MaxPool"), (1, 2, 3, 5), (1, 2, 3, 4), (0, 1, 2), (1, 2), (5, 6, 7, 8, 11), (0, 1)):
        if p > k // 2 or (op == "AveragePool" and d != 1) or (op == "MaxPool" and cip) or (k - 1) * d + 1 > size:
            continue
        yield op, k, s, p, d, size, cip


def test_every_small_ceil_mode_pool_converts_to_a_valid_model_with_torch_values():
    """Kernels, strides, pads, dilations and sizes where the rules agree and disagree (including
    kernels smaller than their stride, which need ceil_mode=0 or a Slice), two spatial sizes."""
    rng = np.random.default_rng(0)
    changed = 0
    for op, k, s, p, d, size, cip in _configs():
        x = torch.from_numpy(rng.standard_normal((1, 2, size, size + 1)).astype(np.float32))
        if op == "AveragePool":
            want = F.avg_pool2d(x, k, s, p, ceil_mode=True, count_include_pad=bool(cip))
            attrs = {"count_include_pad": cip}
        else:
            want = F.max_pool2d(x, k, s, p, dilation=d, ceil_mode=True)
            attrs = {"dilations": [d, d]}
        node = helper.make_node(op, ["x"], ["y"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, ceil_mode=1,
                                **attrs)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(want.shape))])
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        case = f"{op} k={k} s={s} p={p} d={d} size={size} count_include_pad={cip}"
        result = downconvert(ir.from_proto(proto), 13, onnx_fallback=False)
        assert result.complete and result.checked, case
        converted = ir.to_proto(result.model)
        _strict(converted)
        changed += converted.graph.node[0].attribute != node.attribute or len(converted.graph.node) > 1
        got = parity.run(parity.session(converted), {"x": x})[0]
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6, err_msg=case)
    assert changed > 50  # the rules disagree often enough for the sweep to mean something


def test_average_pool_19_dilations():
    """AveragePool-19's dilations: dropped below 19 when all 1, no older form otherwise."""
    def model(dilations):
        node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=dilations)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 6, 6])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])

    x = np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6)
    plain = downconvert(ir.from_proto(model([1, 1])), 17, onnx_fallback=False)
    assert plain.complete
    np.testing.assert_allclose(parity.run(parity.session(ir.to_proto(plain.model)), {"x": x})[0],
                               F.avg_pool2d(torch.from_numpy(x), 2, 1).numpy())
    dilated = downconvert(ir.from_proto(model([2, 2])), 17, onnx_fallback=False)
    assert dilated.reached == 19 and "AveragePool has no opset-17 form (dilations other than 1)" in dilated.reason()
