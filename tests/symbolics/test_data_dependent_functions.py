"""autograd.Functions whose output size depends on the data (issue 19 item 2).

The fake kernel the adapter registers gives each data-dependent size a fresh unbacked one, so the
Function's custom node is emitted on the torch.export route with a dynamic dimension. onnxruntime
cannot run ``mmcv::``/``mmdeploy::`` nodes: the tests check the node (domain, attributes, a
dynamic output dimension), the ONNX checker, and run the rest of the graph with the node's output
fed from eager.
"""

from __future__ import annotations

import warnings

import data_dependent_ops as D
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import symbolics_helpers as H
import torch

import compat

pytestmark = pytest.mark.slow


def _export(model, args, tmp_path, **options):
    path = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, args, str(path), route="dynamo", **options)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    return proto, compat.last_outcome()


def _dims(value_info) -> list:
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _node_output(proto, domain: str):
    """The custom node's output (its ValueInfo), and the model without the node, that output a
    graph input instead: what onnxruntime can run."""
    (node,) = [n for n in proto.graph.node if n.domain == domain]
    (info,) = [v for v in proto.graph.value_info if v.name == node.output[0]]
    rest = onnx.ModelProto()
    rest.CopyFrom(proto)
    rest.graph.node.remove(next(n for n in rest.graph.node if n.domain == domain))
    rest.graph.input.append(info)
    kept = [o for o in rest.opset_import if o.domain != domain]
    del rest.opset_import[:]
    rest.opset_import.extend(kept)
    onnx.checker.check_model(rest, full_check=True)
    return info, ort.InferenceSession(rest.SerializeToString(), providers=["CPUExecutionProvider"])


def test_nms_indices_are_a_dynamic_dimension(tmp_path):
    proto, outcome = _export(D.NMSDetector(), D.boxes(10), tmp_path, input_names=["boxes", "scores"],
                             dynamic_axes={"boxes": {0: "n"}, "scores": {0: "n"}})
    assert H.custom_nodes(proto) == [("mmcv", "NMS", {
        "iou_threshold": ("FLOAT", 0.5), "offset": ("INT", 0), "score_threshold": ("FLOAT", 0.05),
        "max_num": ("INT", -1)}, 2, 1)]
    keep, rest = _node_output(proto, "mmcv")
    (k,) = _dims(keep)
    assert isinstance(k, str) and k != "n"  # its own size: neither static nor the input's
    assert [_dims(o) for o in proto.graph.output] == [[k, 4], [k]]
    for n in (10, 31):  # the rest of the graph, at two input sizes
        boxes, scores = D.boxes(n, seed=n)
        indices = D.NMSop.apply(boxes, scores, 0.5, 0, 0.05, -1)
        got = rest.run(None, {"boxes": boxes.numpy(), "scores": scores.numpy(), keep.name: indices.numpy()})
        for g, w in zip(got, D.NMSDetector()(boxes, scores), strict=True):
            np.testing.assert_allclose(g, w.numpy())
    (note,) = [t.action for t in outcome.translations if t.code == "ONX302"]
    assert "data-dependent output size" in note


def test_batched_nms_triples_keep_their_static_width(tmp_path):
    boxes, _ = D.boxes(12)
    scores = torch.rand(1, 12, 3)
    proto, _ = _export(D.BatchedNMSHead(), (boxes[None], scores), tmp_path,
                       input_names=["boxes", "scores"], dynamic_axes={"boxes": {1: "n"}, "scores": {1: "n"}})
    ((domain, op, attrs, n_in, n_out),) = H.custom_nodes(proto)
    assert (domain, op, n_in, n_out) == ("mmdeploy", "TRTBatchedNMS", 2, 1)
    assert attrs == {"num_classes": ("INT", 3), "background_label_id": ("INT", -1),
                     "iou_threshold": ("FLOAT", 0.5), "score_threshold": ("FLOAT", 0.1),
                     "topk": ("INT", 100), "keep_topk": ("INT", 50), "is_normalized": ("INT", 0),
                     "clip_boxes": ("INT", 0)}
    triples, rest = _node_output(proto, "mmdeploy")
    k, width = _dims(triples)
    assert isinstance(k, str) and width == 3
    assert _dims(proto.graph.output[0]) == [k]
    indices = D.TRTBatchedNMSop.apply(boxes[None], scores, 3, 100, 50, 0.5, 0.1, -1)
    (got,) = rest.run(None, {"boxes": boxes[None].numpy(), "scores": scores.numpy(),
                             triples.name: indices.numpy()})
    np.testing.assert_array_equal(got, indices[:, 2].numpy())


def test_masked_conv_branching_on_data_keeps_the_input_sizes(tmp_path):
    torch.manual_seed(1)
    x, mask = torch.randn(2, 3, 6, 7), (torch.rand(2, 6, 7) > 0.5).float()
    proto, outcome = _export(D.MaskedConvNet(), (x, mask), tmp_path, input_names=["x", "mask"],
                             dynamic_axes={"x": {0: "b", 2: "h", 3: "w"}, "mask": {0: "b", 1: "h", 2: "w"}})
    assert H.custom_nodes(proto) == [("mmcv", "MMCVMaskedConv2d", {
        "padding": ("INT", 1), "stride": ("INT", 1)}, 4, 1)]
    conv, rest = _node_output(proto, "mmcv")
    assert _dims(conv) == ["b", 4, "h", "w"] and _dims(proto.graph.output[0]) == ["b", 4, "h", "w"]
    model = D.MaskedConvNet()
    for shape in ((2, 3, 6, 7), (1, 3, 9, 5)):
        x, mask = torch.randn(*shape), (torch.rand(shape[0], *shape[2:]) > 0.5).float()
        fed = D.MaskedConv2dFunction.apply(x, mask, model.weight, model.bias, 1, 1)
        (got,) = rest.run(None, {"x": x.numpy(), "mask": mask.numpy(), conv.name: fed.detach().numpy()})
        np.testing.assert_allclose(got, model(x, mask).detach().numpy(), rtol=1e-5, atol=1e-6)
    (note,) = [t.action for t in outcome.translations if t.code == "ONX302"]
    assert "synthetic inputs" in note
