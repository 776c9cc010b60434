"""Opset policy: never worse than plain torch.

When no route can export at the requested opset, the torch.export route's model at the lowest
opset it reached is written, with an ONX002 warning and ``opset_written`` in the ledger; strict
mode keeps raising. And the TorchScript route passes a trailing kwargs dict to forward() by name.
"""

from __future__ import annotations

import json
import warnings

import hf_zoo
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import compat
from compat.errors import ExportFailed


class Fold(torch.nn.Module):
    """``F.fold`` is ONNX Col2Im, which exists only from opset 18: no route reaches opset 11."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.fold(x, output_size=(4, 4), kernel_size=2, stride=2) * 2


def _opset(path) -> int:
    return {i.domain: i.version for i in onnx.load(str(path)).opset_import}[""]


def _run(path, **feeds) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {k: v.numpy() for k, v in feeds.items()})


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_unreachable_opset_writes_the_lowest_reached_with_a_warning(tmp_path, monkeypatch):
    book, out = tmp_path / "ledger.jsonl", tmp_path / "fold.onnx"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    model = Fold().eval()
    x = torch.randn(2, 12, 4)
    with pytest.warns(compat.LegacyExportWarning) as caught:
        compat.export(model, (x,), str(out), opset_version=11, input_names=["x"],
                      dynamic_axes={"x": {0: "batch"}})
    (onx002,) = [w for w in caught if getattr(w.message, "code", "") == "ONX002"]
    text = str(onx002.message)
    assert "opset_version=11" in text and "written at opset 18" in text
    assert "TorchScript route failed too" in text and "col2im" in text
    assert "builds it directly" not in text
    assert _opset(out) == 18
    for batch in (2, 5):  # example size and another along the dynamic axis
        xb = torch.randn(batch, 12, 4)
        np.testing.assert_allclose(_run(out, x=xb)[0], model(xb).numpy(), rtol=1e-5, atol=1e-6)
    (record,) = _records(book)
    assert record["status"] == "ok" and record["route_taken"] == "dynamo"
    assert record["opset_written"] == 18 and "ONX002" in record["warnings"]
    assert any(t["code"] == "ONX002" for t in record["translations"])
    assert "opset 11 not reachable" in record["fallback_reason"]
    assert compat.last_outcome().route == "dynamo"


def test_strict_mode_keeps_raising_and_writes_nothing(tmp_path, monkeypatch):
    book, out = tmp_path / "ledger.jsonl", tmp_path / "fold.onnx"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    with pytest.raises(ExportFailed) as info:
        compat.export(Fold(), (torch.randn(2, 12, 4),), str(out), opset_version=11, strict=True)
    assert not out.exists()
    assert set(info.value.failures) == {"dynamo", "legacy"}
    assert "opset 11 not reachable" in str(info.value)
    assert "builds it directly" not in str(info.value)  # the TorchScript route failed too
    (record,) = _records(book)
    assert record["status"] == "failed" and record["opset_written"] is None


def test_transformers_model_at_opset_11_is_never_worse_than_plain_torch(tmp_path, monkeypatch):
    """distilbert at opset 11 (4.27's default): the TorchScript route fails (transformers 5 uses
    scaled_dot_product_attention, opset >= 14); the torch.export route's model is delivered at the
    lowest opset it reaches, or at 11 itself once every operator converts down."""
    book, out = tmp_path / "ledger.jsonl", tmp_path / "distilbert.onnx"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    with warnings.catch_warnings(record=True) as caught, compat.patch():
        warnings.simplefilter("always")
        hf_zoo.export("distilbert", str(out), opset=11)
    ok, detail = hf_zoo.parity("distilbert", str(out))
    assert ok, detail
    (record,) = _records(book)
    written = _opset(out)
    assert 11 <= written <= 18
    if written > 11:
        assert record["opset_written"] == written and record["route_taken"] == "dynamo"
        assert any(getattr(w.message, "code", "") == "ONX002" for w in caught)
        assert "legacy: TorchScript export failed" in record["fallback_reason"]


class KwargsNet(torch.nn.Module):
    def forward(self, x, y=None, scale=None, **extra):
        out = x * 2 if y is None else x + y
        return out * scale if scale is not None else out


def test_legacy_route_passes_a_trailing_dict_by_name(tmp_path):
    model = KwargsNet()
    x, scale = torch.randn(2, 3), torch.randn(2, 3)
    out = tmp_path / "m.onnx"
    compat.export(model, (x, {"scale": scale}), str(out), route="legacy", input_names=["x", "scale"],
                  dynamic_axes={"x": {0: "batch"}, "scale": {0: "batch"}})
    assert "forward" not in vars(model)  # the model is as it was
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["x", "scale"]  # legacy order
    for batch in (2, 4):
        xb, sb = torch.randn(batch, 3), torch.randn(batch, 3)
        got = sess.run(None, {"x": xb.numpy(), "scale": sb.numpy()})[0]
        np.testing.assert_allclose(got, model(xb, scale=sb).numpy(), rtol=1e-6)


def test_legacy_route_with_a_decorated_transformers_forward(tmp_path, monkeypatch):
    """The 4.27 ``export_pytorch`` (trailing kwargs dict) on the TorchScript route: transformers 5
    decorators fill ``use_cache`` from the config as a keyword, and the exporter's positional
    binding gave "forward() got multiple values for argument 'use_cache'"."""
    monkeypatch.setenv("TORCH_ONNX_COMPAT_ROUTE", "legacy")
    out = tmp_path / "gpt2.onnx"
    with warnings.catch_warnings(), compat.patch():
        warnings.simplefilter("ignore")
        hf_zoo.export("gpt2", str(out), opset=14)  # scaled_dot_product_attention needs 14 here
    assert compat.last_outcome().route == "legacy"
    assert _opset(out) == 14
    ok, detail = hf_zoo.parity("gpt2", str(out))
    assert ok, detail
