"""timm BEiT's and torchvision RAFT's torch.export-route failures, reduced (issue 19 item 5).

Both are torch's (plain ``torch.onnx.export(dynamo=True)`` fails the same way; the reports are in
``docs/upstream/``): the ledger's reason names the failing operator, not only the model line. A
test here fails once torch or onnxscript fixes its fault, so the report and this note get updated.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import compat
from attention_models import RelativeBiasAttention  # tests/helpers
from compat.errors import ExportFailed
from dynamo import quiet
from dynamo.route import classify, with_operator


class RaftChunk(torch.nn.Module):
    """torchvision RAFT's feature-encoder call: both images in one batch, chunked back into two."""

    def forward(self, image1, image2):
        fmap1, fmap2 = torch.chunk(torch.cat([image1, image2], dim=0) + 1, chunks=2, dim=0)
        return fmap1 * fmap2


RAFT_ARGS = (torch.randn(1, 3, 16, 16), torch.randn(1, 3, 16, 16))
RAFT_AXES = {"input_names": ["image1", "image2"],
             "dynamic_axes": {"image1": {0: "n1"}, "image2": {0: "n2"}}}


def _dynamo_failure(model, args, tmp_path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ExportFailed) as err:
            compat.export(model, args, str(tmp_path / "m.onnx"), route="dynamo", **options)
    return err.value.failures["dynamo"]


def _plain_torch_fails(model, args, **options) -> BaseException:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, args, dynamo=True, verbose=False, **options)
        except Exception as exc:  # noqa: BLE001 - whatever torch raises is the finding
            return exc
    pytest.fail("plain torch.onnx.export now exports this model: the upstream fault is fixed; update "
                "docs/upstream/ and this test")


def test_beit_reshape_after_masked_sdpa_names_the_operator_and_the_line():
    """torch's fault (docs/upstream/beit-sdpa-mask-view.md): plain torch fails on the reshape,
    and the reason the route would give names the operator and the model's line. The route itself
    exports the model, captured without autograd (tests/dynamo/test_capture_without_autograd.py)."""
    plain = _plain_torch_fails(RelativeBiasAttention().eval(), (torch.randn(2, 5, 32),))
    assert quiet.failing_operator(plain) == "aten.view.default"
    reason = with_operator(classify(plain), plain)
    assert reason == "ONNX conversion error in aten.view.default"
    where = quiet.describe_block(reason, plain)
    assert where.endswith("`return x.transpose(1, 2).reshape(b, n, c)`") and "attention_models.py:" in where
    # the reported workaround holds: no parameter requires grad during the export
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(RelativeBiasAttention().eval().requires_grad_(False), (torch.randn(2, 5, 32),),
                          dynamo=True, verbose=False)


def test_raft_chunk_of_a_dynamic_batch_names_the_onnx_node(tmp_path):
    failure = _dynamo_failure(RaftChunk(), RAFT_ARGS, tmp_path, **RAFT_AXES)
    assert failure.reason == "ONNX graph pass error in SplitToSequence node node_split"
    # onnxscript's, not ours (docs/upstream/raft-chunk-splittosequence-folding.md)
    auto = torch.export.Dim.AUTO
    plain = _plain_torch_fails(RaftChunk(), RAFT_ARGS, dynamic_shapes=({0: auto}, {0: auto}))
    assert quiet.failing_operator(plain) == "SplitToSequence node node_split"
    assert with_operator(classify(plain), plain) == failure.reason


def _chain(*texts: str) -> BaseException:
    exc: BaseException | None = None
    for text in reversed(texts):  # outermost first
        outer = RuntimeError(text)
        outer.__cause__ = exc
        exc = outer
    assert exc is not None
    return exc


@pytest.mark.parametrize(("texts", "operator"), [
    (("Error when translating node %gelu : [num_users=1] = call_function[target=torch.ops.aten.gelu."
      "default](args = (%x,), kwargs = {}). See the stack trace for more information.",),
     "aten.gelu.default"),
    (("No ONNX function found for <OpOverload(op='aten.rrelu_with_noise', overload='default')>. "
      "Failure message: ...",), "aten.rrelu_with_noise.default"),
    (("An error occurred at step 0", "Error during constant folding for node 'n3' (com.x::Foo)"),
     "Foo node n3"),
    (("Could not guard on data-dependent expression Eq(u0, 1)",), None),
])
def test_failing_operator_is_read_from_the_innermost_error(texts, operator):
    assert quiet.failing_operator(_chain(*texts)) == operator


def test_operator_is_named_only_for_operator_failures():
    exc = _chain("ConversionError: While executing %v : [num_users=1] = "
                 "call_function[target=torch.ops.aten.view.default](args = (%t,), kwargs = {})")
    assert with_operator("ONNX conversion error", exc) == "ONNX conversion error in aten.view.default"
    assert with_operator("data-dependent control flow", exc) == "data-dependent control flow"
    assert classify(_chain("Failed to export the model with torch.export.\n## Exception summary\n\n"
                           "<class 'NotImplementedError'>: nope")) == "torch.export failed (NotImplementedError)"
