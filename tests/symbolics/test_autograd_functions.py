"""autograd.Function.symbolic on the torch.export route: opaque op, own symbolic, nothing left."""

from __future__ import annotations

import numpy as np
import pytest
import symbolics_helpers as H
import torch

from dynamo import autograd_functions

pytestmark = pytest.mark.slow


class EfficientNMS(torch.autograd.Function):
    """yolov7's TRT EfficientNMS: forward returns random placeholders of the right shapes."""

    @staticmethod
    def forward(ctx, boxes, scores, background_class=-1, box_coding=1, iou_threshold=0.45,
                max_output_boxes=100, plugin_version="1", score_activation=0, score_threshold=0.25):
        batch_size, _, num_classes = scores.shape
        num_det = torch.randint(0, max_output_boxes, (batch_size, 1), dtype=torch.int32)
        det_boxes = torch.randn(batch_size, max_output_boxes, 4)
        det_scores = torch.randn(batch_size, max_output_boxes)
        det_classes = torch.randint(0, num_classes, (batch_size, max_output_boxes), dtype=torch.int32)
        return num_det, det_boxes, det_scores, det_classes

    @staticmethod
    def symbolic(g, boxes, scores, background_class=-1, box_coding=1, iou_threshold=0.45,
                 max_output_boxes=100, plugin_version="1", score_activation=0, score_threshold=0.25):
        out = g.op("TRT::EfficientNMS_TRT", boxes, scores, background_class_i=background_class,
                   box_coding_i=box_coding, iou_threshold_f=iou_threshold,
                   max_output_boxes_i=max_output_boxes, plugin_version_s=plugin_version,
                   score_activation_i=score_activation, score_threshold_f=score_threshold,
                   anchors_is=[], strides_i=[8, 16], outputs=4)
        nums, det_boxes, det_scores, classes = out
        nums.setType(boxes.type().with_dtype(torch.int32).with_sizes([None, 1]))
        return nums, det_boxes, det_scores, classes


ARGS_SEEN: list[tuple] = []


class ScaledGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale, mode):
        ctx.save_for_backward(x)
        return torch.nn.functional.gelu(x) * scale

    @staticmethod
    def symbolic(g, x, scale, mode):
        ARGS_SEEN.append((scale, mode))
        return g.op("Mul", g.op("com.microsoft::Gelu", x).setType(x.type()), scale)


class Head(torch.nn.Module):
    def forward(self, boxes, scores, x):
        num, det_boxes, det_scores, classes = EfficientNMS.apply(
            boxes, scores, -1, 1, 0.45, 100, "1", 0, 0.25)
        return num, det_boxes, det_scores, classes, ScaledGelu.apply(x, 2.0, "erf")


@pytest.fixture(scope="module")
def head_export():
    model = Head().eval()
    args = (torch.randn(2, 50, 4), torch.randn(2, 50, 3), torch.randn(2, 7))
    batch = torch.export.Dim("batch")
    ARGS_SEEN.clear()
    outcome = H.export_new(model, args, custom_opsets={"TRT": 1},
                           dynamic_shapes=({0: batch}, {0: batch}, {0: batch}))
    return model, outcome


def test_trt_style_symbolic_structure(head_export):
    _, outcome = head_export
    proto = outcome.program.model_proto
    nodes = H.custom_nodes(proto)
    trt = [n for n in nodes if n[1] == "EfficientNMS_TRT"]
    assert len(trt) == 1
    domain, _, attrs, n_in, n_out = trt[0]
    assert (domain, n_in, n_out) == ("TRT", 2, 4)
    assert attrs == {
        "background_class": ("INT", -1), "box_coding": ("INT", 1),
        "iou_threshold": ("FLOAT", 0.45), "max_output_boxes": ("INT", 100),
        "plugin_version": ("STRING", "1"), "score_activation": ("INT", 0),
        "score_threshold": ("FLOAT", 0.25), "anchors": ("INTS", []), "strides": ("INTS", [8, 16]),
    }
    # the custom node's outputs are the graph outputs: no random placeholder was exported
    node = next(n for n in proto.graph.node if n.op_type == "EfficientNMS_TRT")
    assert list(node.output) == [o.name for o in proto.graph.output[:4]]
    assert not [n for n in proto.graph.node if n.op_type.startswith("Random")]
    elem = {o.name: o.type.tensor_type.elem_type for o in proto.graph.output}
    assert elem[node.output[0]] == 6 and elem[node.output[3]] == 6  # INT32 from setType/forward
    assert H.opset_imports(proto)["TRT"] == 1


def test_function_symbolic_emits_contrib_op_with_parity(head_export):
    model, outcome = head_export
    proto = outcome.program.model_proto
    assert ("com.microsoft", "Gelu") in [(n[0], n[1]) for n in H.custom_nodes(proto)]
    assert ARGS_SEEN and ARGS_SEEN[0] == (2.0, "erf")  # Python constants, as under the legacy exporter
    import onnx

    # drop the TensorRT-only node so onnxruntime can run the rest
    keep = onnx.helper.make_graph(
        [n for n in proto.graph.node if n.domain != "TRT"], "g",
        [i for i in proto.graph.input if i.name == "x"], [proto.graph.output[4]],
        list(proto.graph.initializer))
    small = onnx.helper.make_model(keep, opset_imports=proto.opset_import, ir_version=proto.ir_version)
    for batch in (2, 4):
        x = torch.randn(batch, 7)
        (got,) = H.run_ort(small, {"x": x})
        want = model(torch.randn(batch, 50, 4), torch.randn(batch, 50, 3), x)[4]
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_nothing_stays_patched_after_export(head_export):
    assert torch.autograd.Function.__dict__["apply"] is autograd_functions._ORIGINAL_APPLY
    assert getattr(autograd_functions._ACTIVE, "session", None) is None
    x = torch.randn(3, 7)
    torch.testing.assert_close(ScaledGelu.apply(x, 2.0, "erf"), torch.nn.functional.gelu(x) * 2.0)
    assert not [n for n in dir(torch.ops) if n.startswith("compat_onnx_fn")
                and hasattr(getattr(torch.ops, n), "apply")]


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha=1.0):
        return x * alpha

    @staticmethod
    def symbolic(g, x, alpha=1.0):
        return g.op("qa::Scale", x, alpha_f=alpha)


class _Inner(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def symbolic(g, x):
        return g.op("qa::Inner", x)


class _Outer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _Inner.apply(x) + 1

    @staticmethod
    def symbolic(g, x):
        return g.op("qa::Outer", x)


def _nodes(outcome):
    return [(n.domain, n.op_type) for n in outcome.program.model_proto.graph.node]


def test_keyword_arguments_and_nested_functions_keep_their_custom_nodes():
    """``Function.apply(x, alpha=2.0)`` and a Function whose forward applies another one export
    like the TorchScript exporter: the outer custom node only, attributes from the keywords."""
    from compat.request import ExportRequest

    import dynamo

    class Kw(torch.nn.Module):
        def forward(self, x):
            return _Scale.apply(x, alpha=2.0)

    class Nested(torch.nn.Module):
        def forward(self, x):
            return _Outer.apply(x) * 2

    out = dynamo.export(ExportRequest(model=Kw(), args=(torch.randn(2, 3),), opset_version=18))
    node = next(n for n in out.program.model_proto.graph.node if n.op_type == "Scale")
    assert node.domain == "qa" and node.attribute[0].name == "alpha" and node.attribute[0].f == 2.0
    out = dynamo.export(ExportRequest(model=Nested(), args=(torch.randn(2, 3),), opset_version=18))
    assert ("qa", "Outer") in _nodes(out) and ("qa", "Inner") not in _nodes(out)
