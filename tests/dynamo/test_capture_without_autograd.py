"""torch's ONNX conversion fails on timm BEiT's attention with autograd on (an SDPA output's
strides follow whether its mask requires grad; docs/upstream/beit-sdpa-mask-view.md): the
torch.export route captures it again under ``torch.no_grad()``, records that in the ledger, and
leaves the model and the grad mode as they were."""

from __future__ import annotations

import json
import warnings

import numpy as np
import torch

import compat
import route_parity as parity  # tests/helpers
from attention_models import RelativeBiasAttention  # tests/helpers
from dynamo.route import NO_GRAD_ACTION


def test_beit_attention_exports_on_the_torch_export_route(tmp_path, monkeypatch):
    book, out = tmp_path / "ledger.jsonl", tmp_path / "attn.onnx"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    torch.manual_seed(0)
    model = RelativeBiasAttention().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (torch.randn(2, 5, 32),), str(out), route="dynamo", input_names=["x"],
                      dynamic_axes={"x": {0: "batch"}})
    (record,) = [json.loads(line) for line in book.read_text().splitlines()]
    assert [t["action"] for t in record["translations"] if t["option"] == "model"] == [NO_GRAD_ACTION]
    assert record["acceptance"]["status"] == "passed"
    assert torch.is_grad_enabled() and model.table.requires_grad and not model.training
    import onnx

    sess = parity.session(onnx.load(str(out)))
    for batch in (2, 5):
        x = torch.randn(batch, 5, 32)
        (got,) = parity.run(sess, {"x": x})
        with torch.no_grad():
            np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_without_a_parameter_requiring_grad_nothing_is_retried(tmp_path):
    """The cause is autograd: with the table frozen torch converts the model directly, and the
    ledger records no capture without autograd."""
    model = RelativeBiasAttention().eval()
    model.table.requires_grad_(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (torch.randn(2, 5, 32),), str(tmp_path / "m.onnx"), route="dynamo")
    outcome = compat.last_outcome()
    assert outcome.route == "dynamo" and outcome.acceptance["status"] == "passed"
    assert not [t for t in outcome.translations if t.option == "model"]
