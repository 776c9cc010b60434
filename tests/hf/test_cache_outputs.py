"""transformers-5 models return ``Cache`` objects (transformers 4 returned tuples): the torch.export
route flattens them through transformers' own pytree registration, for one export only."""

from __future__ import annotations

import json
import subprocess
import sys
import warm_python  # tests/helpers: commands that import torch, forked warm

import hf_zoo
import numpy as np
import onnxruntime as ort
import torch
from torch.utils import _pytree

import compat
from dynamo import hf_caches


def _cache_classes() -> list[str]:
    return [c.__name__ for c in _pytree.SUPPORTED_NODES if c.__name__.endswith("Cache")]


def _export(name: str, out, monkeypatch, cache: str) -> None:
    """The 4.27 export under the shim: on the torch.export route, the cache said so in the ledger."""
    book = out.parent / "ledger.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    assert cache not in _cache_classes()
    with compat.patch():
        hf_zoo.export(name, str(out))
    assert cache not in _cache_classes()  # registered for that export only
    (record,) = [json.loads(line) for line in book.read_text().splitlines()]
    assert record["status"] == "ok" and record["route_taken"] == "dynamo"
    assert any(t["option"] == "outputs" and f"transformers {cache} flattened into graph outputs" in t["action"]
               for t in record["translations"])


def test_encoder_decoder_cache(tmp_path, monkeypatch):
    out = tmp_path / "t5.onnx"
    _export("t5", out, monkeypatch, "EncoderDecoderCache")
    ok, detail = hf_zoo.parity("t5", str(out))  # named outputs, example shape and another size
    assert ok, detail


def test_dynamic_cache_outputs_match_eager(tmp_path, monkeypatch):
    """The cache tensors are graph outputs after the named ones, layer by layer (keys, values)."""
    out = tmp_path / "gpt2-past.onnx"
    _export("gpt2-past", out, monkeypatch, "DynamicCache")
    model, config = hf_zoo.build("gpt2-past")
    model.config.use_cache = True
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    for batch, seq in ((hf_zoo.BATCH, hf_zoo.SEQ), (hf_zoo.OTHER_BATCH, hf_zoo.OTHER_SEQ)):
        inputs = config.generate_dummy_inputs(None, batch, seq)
        with torch.no_grad():
            eager = model(**inputs)
        got = sess.run(None, {k: v.numpy() for k, v in inputs.items()})
        want = [t for layer in eager.past_key_values.layers for t in (layer.keys, layer.values)]
        assert len(got) == 1 + len(want)
        for g, w in zip(got[1:], want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


def test_nothing_registered_for_other_models_and_transformers_never_imported():
    assert hf_caches.register(torch.nn.Linear(2, 2)) == []
    code = ("import sys, torch; from dynamo import hf_caches; "
            "print(hf_caches.register(torch.nn.Linear(2, 2)), 'transformers' in sys.modules)")
    proc = warm_python.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           cwd=hf_zoo.__file__.rsplit("/tests/", 1)[0])
    assert proc.stdout.split() == ["[]", "False"]
