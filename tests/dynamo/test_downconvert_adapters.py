"""Each down-conversion adapter on a small opset-18 graph: the converted model, run by
onnxruntime at opsets 11 and 13 (and 17 where the op changed there), gives the opset-18 result."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from dynamo.downconvert import downconvert

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def _model(nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(proto, feeds):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _i64(name, values):
    return helper.make_tensor(name, I64, [len(values)], values)


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
X_OTHER = RNG.standard_normal((3, 3, 7, 4)).astype(np.float32)

CASES = {
    "reduce_axes_input": ([helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=0),
                           helper.make_node("ReduceSum", ["x", "axes"], ["z"], keepdims=1)],
                          [_i64("axes", [1, -1])], 2),
    "reduce_empty_axes_noop": ([helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=1),
                                helper.make_node("ReduceL2", ["x"], ["z"], keepdims=0)], [], 2),
    "split_uneven_dynamic": ([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=2, num_outputs=3)], [], 3),
    "split_sizes_input": ([helper.make_node("Split", ["x", "s"], ["a", "b"], axis=1)], [_i64("s", [1, 2])], 2),
    "squeeze_unsqueeze": ([helper.make_node("Unsqueeze", ["x", "u"], ["t"]),
                           helper.make_node("Squeeze", ["t", "u"], ["y"])], [_i64("u", [0, 3])], 1),
    "pad_axes": ([helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], mode="reflect")],
                 [_i64("p", [1, 2, 1, 0]), _i64("ax", [2, -1])], 1),
    "resize_sizes": ([helper.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="nearest")],
                     [_i64("sz", [2, 3, 10, 8])], 1),
    "resize_scales": ([helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest")],
                      [helper.make_tensor("sc", F, [4], [1, 1, 2, 2])], 1),
    "softmax_middle_axis": ([helper.make_node("Softmax", ["x"], ["y"], axis=1),
                             helper.make_node("LogSoftmax", ["x"], ["z"], axis=-2),
                             helper.make_node("Hardmax", ["x"], ["w"], axis=2)], [], 3),
    "castlike_and_shape_slice": ([helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
                                  helper.make_node("CastLike", ["s", "x"], ["y"])], [], 1),
    "layer_norm": ([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y", "m", "r"], axis=1,
                                     epsilon=1e-3)],
                   [helper.make_tensor("g", F, [1, 1, 4], RNG.standard_normal(4).tolist()),
                    helper.make_tensor("b", F, [1, 1, 4], RNG.standard_normal(4).tolist())], 3),
    "group_norm_18": ([helper.make_node("GroupNormalization", ["x", "g", "b"], ["y"], num_groups=3,
                                        epsilon=1e-4)],
                      [helper.make_tensor("g", F, [3], [0.5, 1.0, 2.0]),
                       helper.make_tensor("b", F, [3], [0.1, 0.0, -0.1])], 1),
    "activations": ([helper.make_node("Mish", ["x"], ["a"]), helper.make_node("HardSwish", ["x"], ["b"]),
                     helper.make_node("Celu", ["x"], ["c"], alpha=0.7)], [], 3),
    "pow_mixed_types": ([helper.make_node("Pow", ["x", "two"], ["y"])], [_i64("two", [2])], 1),
    "compare_trilu": ([helper.make_node("LessOrEqual", ["x", "x2"], ["a"]),
                       helper.make_node("GreaterOrEqual", ["x", "x2"], ["b"]),
                       helper.make_node("Trilu", ["x", "k"], ["c"], upper=0),
                       helper.make_node("Trilu", ["x"], ["d"], upper=1)],
                      [helper.make_tensor("k", I64, [], [1])], 4),
}


def _case_model(name):
    nodes, inits, n_out = CASES[name]
    defined = {i.name for i in inits} | {o for n in nodes for o in n.output}
    outs = [o for n in nodes for o in n.output if o not in {i for m in nodes for i in m.input}][:n_out]
    inputs = [_vi("x", F, ["N", 3, "H", 4])]
    if any("x2" in n.input for n in nodes):
        inputs.append(_vi("x2", F, ["N", 3, "H", 4]))
    assert all(i in defined or i in ("x", "x2", "") for n in nodes for i in n.input)
    bools = {"a", "b"} if name == "compare_trilu" else set()
    types = [TensorProto.BOOL if o in bools else F for o in outs]
    return _model(nodes, inputs, [_vi(o, t, None) for o, t in zip(outs, types)], inits)


@pytest.mark.parametrize("name", list(CASES))
def test_adapter_matches_opset_18(name):
    proto = _case_model(name)
    model = ir.from_proto(proto)
    for x in (X, X_OTHER):
        feeds = {"x": x}
        if len(proto.graph.input) > 1:
            feeds["x2"] = np.round(x)  # equal entries on purpose
        want = _run(proto, feeds)
        for target in (11, 13, 17):
            result = downconvert(model, target, onnx_fallback=False)
            assert result.complete, result.reason()
            assert result.model.opset_imports[""] == target
            got = _run(ir.to_proto(result.model), feeds)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{name} at {target}")
    assert model.opset_imports[""] == 18  # the given model is never changed


EQUATIONS = {
    # equation: operand shapes (letters sized b=2 c=3 h=5 w=4 k=6; "N"/"H" dynamic in the model)
    "bchw,bchw->bc": ("bchw", "bchw"),
    "bij,bkj->bik": ("bhw", "bcw"),
    "bhwc,ck->bhwk": ("bhwc", "ck"),
    "ij,jk,kl->il": ("hw", "wc", "ck"),
    "bchw->bhwc": ("bchw",),
    "bchw": ("bchw",),
    "i,j->ij": ("h", "w"),
    "ii->i": None,
}
SIZES = {"b": 2, "c": 3, "h": 5, "w": 4, "k": 6}


@pytest.mark.parametrize("equation", list(EQUATIONS))
def test_einsum_below_12(equation):
    shapes = EQUATIONS[equation]
    if shapes is None:  # a diagonal: no older form, named
        proto = _model([helper.make_node("Einsum", ["x"], ["y"], equation=equation)],
                       [_vi("x", F, [3, 3])], [_vi("y", F, None)])
        result = downconvert(ir.from_proto(proto), 11, onnx_fallback=False)
        assert result.reached == 12 and "Einsum has no opset-11 form" in result.reason()
        assert result.model.opset_imports[""] == 12
        return
    names = [f"x{i}" for i in range(len(shapes))]
    dims = [[{"b": "N", "h": "H"}.get(c, SIZES[c]) for c in s] for s in shapes]
    proto = _model([helper.make_node("Einsum", names, ["y"], equation=equation)],
                   [_vi(n, F, d) for n, d in zip(names, dims)], [_vi("y", F, None)])
    result = downconvert(ir.from_proto(proto), 11, onnx_fallback=False)
    assert result.complete, result.reason()
    converted = ir.to_proto(result.model)
    assert "Einsum" not in {n.op_type for n in converted.graph.node}
    for scale in (1, 2):  # the dynamic axes at another size
        feeds = {n: RNG.standard_normal([SIZES[c] * (scale if c in "bh" else 1) for c in s]).astype(np.float32)
                 for n, s in zip(names, shapes)}
        np.testing.assert_allclose(_run(converted, feeds)[0], np.einsum(equation, *feeds.values()),
                                   rtol=1e-5, atol=1e-5)


def test_reduce_axes_computed_at_run_time_has_no_old_form():
    proto = _model([helper.make_node("ReduceMean", ["x", "axes"], ["y"])],
                   [_vi("x", F, ["N", 3]), _vi("axes", I64, [1])], [_vi("y", F, None)])
    result = downconvert(ir.from_proto(proto), 13, onnx_fallback=False)
    assert result.reached == 18 and "ReduceMean has no opset-13 form" in result.reason()
    assert "computed at run time" in result.reason()


def test_integer_max_min_below_12():
    nodes = [helper.make_node("Max", ["a", "b", "c"], ["mx"]), helper.make_node("Min", ["a", "b"], ["mn"])]
    proto = _model(nodes, [_vi("a", I64, ["N", 3]), _vi("b", I64, [1, 3]), _vi("c", I64, [])],
                   [_vi("mx", I64, None), _vi("mn", I64, None)])
    feeds = {"a": RNG.integers(-2**62, 2**62, (4, 3)), "b": RNG.integers(-2**62, 2**62, (1, 3)),
             "c": np.asarray(2**53 + 1)}
    want = _run(proto, feeds)
    result = downconvert(ir.from_proto(proto), 11, onnx_fallback=False)
    assert result.complete, result.reason()
    for got, w in zip(_run(ir.to_proto(result.model), feeds), want):
        np.testing.assert_array_equal(got, w)


def test_type_only_relabel_checks_the_older_types():
    # Relu-14 takes int32; Relu-13 takes floats only
    proto = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", TensorProto.INT32, [2])],
                   [_vi("y", TensorProto.INT32, [2])])
    result = downconvert(ir.from_proto(proto), 13, onnx_fallback=False)
    assert result.reached == 14 and "Relu has no opset-13 form (input 0 is tensor(int32))" in result.reason()


def test_subgraphs_and_functions_are_converted():
    axes = _i64("axes", [-1])
    then_g = helper.make_graph([helper.make_node("ReduceMean", ["x", "axes"], ["t"], keepdims=1)], "then", [],
                               [_vi("t", F, None)], [axes])
    else_g = helper.make_graph([helper.make_node("Softmax", ["x"], ["e0"], axis=1),
                                helper.make_node("ReduceMax", ["e0", "axes"], ["e"], keepdims=1)], "else", [],
                               [_vi("e", F, None)], [_i64("axes", [-1])])
    fn = helper.make_function("local", "SqueezeFirst", ["a"], ["b"],
                              [helper.make_node("Constant", [], ["ax"], value_ints=[0]),
                               helper.make_node("Squeeze", ["a", "ax"], ["b"])],
                              [helper.make_opsetid("", 18)])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Unsqueeze", ["y", "zero_axes"], ["u"]),
             helper.make_node("SqueezeFirst", ["u"], ["z"], domain="local")]
    graph = helper.make_graph(nodes, "g", [_vi("x", F, [2, 3, 4])], [_vi("z", F, None)],
                              [helper.make_tensor("zero", F, [], [0.0]), _i64("zero_axes", [0])])
    proto = helper.make_model(graph, functions=[fn], opset_imports=[helper.make_opsetid("", 18),
                                                                    helper.make_opsetid("local", 1)])
    for x in (np.abs(X[:2, :, 0, :3].reshape(2, 3, 3).repeat(2, 2)[..., :4]), -np.abs(X[:2, :, 1, :]) - 1):
        x = np.ascontiguousarray(x, dtype=np.float32)
        want = _run(proto, {"x": x})
        result = downconvert(ir.from_proto(proto), 11, onnx_fallback=False)
        assert result.complete, result.reason()
        converted = ir.to_proto(result.model)
        assert {o.version for o in converted.functions[0].opset_import if o.domain == ""} == {11}
        np.testing.assert_allclose(_run(converted, {"x": x})[0], want[0], rtol=1e-6, atol=1e-6)


def test_registry_lists_every_adapter_module_once_and_only_onnx_ops():
    import pkgutil

    import onnx.defs

    from dynamo import downconvert
    from dynamo.downconvert import registry

    modules = {m.name for m in pkgutil.iter_modules(downconvert.__path__)}
    with_adapters = {name for name in modules
                     if hasattr(__import__(f"dynamo.downconvert.{name}", fromlist=["_"]), "ADAPTERS")}
    assert with_adapters == set(registry.MODULES)
    for op in registry.adapters():
        assert onnx.defs.has(op), op


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_from_opset_20(approximate):
    proto = _model([helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)],
                   [_vi("x", F, ["N", 3, "H", 4])], [_vi("y", F, None)], opset=20)
    want = _run(proto, {"x": X})[0]
    for target in (11, 17):
        result = downconvert(ir.from_proto(proto), target, onnx_fallback=False)
        assert result.complete, result.reason()
        np.testing.assert_allclose(_run(ir.to_proto(result.model), {"x": X})[0], want, rtol=1e-5, atol=1e-6)


def _f32(name, values):
    values = np.asarray(values, dtype=np.float32)
    return helper.make_tensor(name, F, list(values.shape), values.reshape(-1).tolist())


#: models written at an opset after 18 (other exporters, newer torch): name -> (nodes, inits, source
#: opset, targets that must be reached, input shape)
NEWER = {
    "squeeze_21": ([helper.make_node("Unsqueeze", ["x", "u"], ["t"]), helper.make_node("Squeeze", ["t", "u"], ["y"])],
                   [_i64("u", [0])], 21, (18, 13, 11)),
    "pad_19": ([helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")], [_i64("p", [0, 0, 1, 1, 0, 0, 1, 2])],
               19, (18, 11)),
    "resize_19": ([helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear", antialias=1)],
                  [_f32("sc", [1, 1, 0.5, 0.5])], 19, (18,)),
    "cast_19": ([helper.make_node("Cast", ["x"], ["c"], to=TensorProto.INT32, saturate=1),
                 helper.make_node("CastLike", ["c", "x"], ["y"], saturate=1)], [], 19, (18, 13, 11)),
    "group_norm_21": ([helper.make_node("GroupNormalization", ["x", "g", "b"], ["y"], num_groups=3, epsilon=1e-4)],
                      [_f32("g", [0.5, 1.0, 2.0]), _f32("b", [0.1, 0.0, -0.1])], 21, (20, 18, 11)),
    "grid_sample_20": ([helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", align_corners=1),
                        helper.make_node("GridSample", ["x", "grid"], ["z"], mode="cubic", padding_mode="border")],
                       [_f32("grid", RNG.uniform(-1.1, 1.1, (1, 4, 3, 2)))], 20, (19, 16)),
    "quantize_21": ([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], block_size=0, saturate=1),
                     helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], block_size=0)],
                    [_f32("s", 0.05), helper.make_tensor("zp", TensorProto.UINT8, [], [128])], 21, (20, 13, 11)),
    "average_pool_19": ([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[1, 1],
                                          ceil_mode=1, strides=[2, 2])], [], 19, (18, 11)),
}


@pytest.mark.parametrize("name", list(NEWER))
def test_models_of_later_opsets_come_down_with_their_results(name):
    nodes, inits, source, targets = NEWER[name]
    outs = [o for n in nodes for o in n.output if o not in {i for m in nodes for i in m.input}]
    proto = _model(nodes, [_vi("x", F, [1, 3, 5, 4])], [_vi(o, F, None) for o in outs], inits, opset=source)
    x = np.ascontiguousarray(X[:1] * 2, dtype=np.float32)
    want = _run(proto, {"x": x})
    # declared as the strict check wants them: with their shapes
    proto = _model(nodes, [_vi("x", F, [1, 3, 5, 4])], [_vi(o, F, list(w.shape)) for o, w in zip(outs, want)],
                   inits, opset=source)
    for target in targets:
        result = downconvert(ir.from_proto(proto), target, onnx_fallback=False)
        assert result.complete and result.checked, f"{name} to {target}: {result.reason()}"
        converted = ir.to_proto(result.model)
        assert converted.opset_import[0].version == target
        for got, w in zip(_run(converted, {"x": x}), want):
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5, err_msg=f"{name} at {target}")


@pytest.mark.parametrize(("node", "source", "target", "needs", "why"), [
    (helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap"), 19, 18, 19, "mode='wrap'"),
    (helper.make_node("Resize", ["x", "", "sc"], ["y"], coordinate_transformation_mode="half_pixel_symmetric"),
     19, 18, 19, "half_pixel_symmetric"),
    (helper.make_node("Resize", ["x", "", "sc"], ["y"], antialias=1), 18, 17, 18, "antialias=1"),
    (helper.make_node("QuantizeLinear", ["x", "s"], ["y"], block_size=2), 21, 20, 21, "block_size=2"),
    (helper.make_node("GridSample", ["x", "grid"], ["y"]), 20, 15, 16, "exists from opset 16"),
])
def test_later_meanings_have_no_older_form(node, source, target, needs, why):
    inits = {"p": _i64("p", [0] * 8), "sc": _f32("sc", [1, 1, 2, 2]), "s": _f32("s", 0.1),
             "grid": _f32("grid", np.zeros((1, 2, 2, 2)))}
    proto = _model([node], [_vi("x", F, [1, 3, 5, 4])], [_vi("y", F, None)],
                   [inits[i] for i in node.input[1:] if i], opset=source)
    result = downconvert(ir.from_proto(proto), target, onnx_fallback=False)
    assert result.reached == needs and f"{node.op_type} has no opset-{target} form" in result.reason()
    assert why in result.reason()


def test_split_by_run_time_sizes_below_13():
    """Issue 35 item 6: Split's sizes computed at run time (torchvision detection's
    ``boxes.split(per_image)``) have no opset-11/12 attribute form; they are written as Slices."""
    proto = _model([helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=2)],
                   [_vi("x", F, ["N", 3, "H", 4]), _vi("s", I64, [3])],
                   [_vi(o, F, None) for o in "abc"])
    model = ir.from_proto(proto)
    for x, sizes in ((X, [2, 0, 3]), (X_OTHER, [1, 4, 2])):
        feeds = {"x": x, "s": np.asarray(sizes, dtype=np.int64)}
        want = _run(proto, feeds)
        for target in (11, 12):
            result = downconvert(model, target, onnx_fallback=False)
            assert result.complete, result.reason()
            got = _run(ir.to_proto(result.model), feeds)
            assert [g.shape for g in got] == [w.shape for w in want]
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
