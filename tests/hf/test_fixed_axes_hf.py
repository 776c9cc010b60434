"""4.27 OnnxConfigs mark axes the model fixes (channels, height, width, mel features) dynamic.

Plain torch 2.13 fails on them (``Dim.DYNAMIC`` + an axis traced static); the shim exports them
static, says so, and keeps batch dynamic. Real tiny transformers-5 models, random init.
"""

from __future__ import annotations

import json
import warnings

import hf_zoo
import onnx
import pytest

import compat
import route_parity as parity  # tests/helpers

CASES = {
    "vit": ("pixel_values", ["batch", 3, 16, 16],
            ["axis pixel_values[1] ('num_channels') is fixed by the model at 3; exported static",
             "axis pixel_values[2] ('height') is fixed by the model at 16; exported static",
             "axis pixel_values[3] ('width') is fixed by the model at 16; exported static"]),
    "whisper-encoder": ("input_features", ["batch", 16, 32],
                        ["axis input_features[1] ('feature_size') is fixed by the model at 16; exported static",
                         "axis input_features[2] ('encoder_sequence') is fixed by the model at 32; exported static"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_427_export_of_a_model_with_fixed_axes(name, tmp_path, monkeypatch):
    book, out = tmp_path / "ledger.jsonl", tmp_path / f"{name}.onnx"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    with warnings.catch_warnings(record=True) as caught, compat.patch():
        warnings.simplefilter("always")
        hf_zoo.export(name, str(out))
    # onnxruntime vs eager at the example shape and at another batch size
    ok, detail = hf_zoo.parity(name, str(out))
    assert ok, detail

    input_name, dims, notes = CASES[name]
    graph = onnx.load(str(out), load_external_data=False).graph
    assert parity.dims(next(v for v in graph.input if v.name == input_name)) == dims
    (record,) = [json.loads(line) for line in book.read_text().splitlines()]
    assert record["status"] == "ok" and record["route_taken"] == "dynamo"
    actions = [t["action"] for t in record["translations"] if t["code"] == "ONX101"]
    assert [a for a in actions if "fixed by the model" in a] == notes
    shown = [str(w.message) for w in caught if isinstance(w.message, compat.LegacyExportWarning)]
    assert any(all(n in text for n in notes) for text in shown), shown
