"""Side by side: one transformer-style model with dynamic batch and sequence axes, both routes.

Prints export time, onnxruntime latency of each route's model (and the dynamo/legacy ratio), and
whether each route's model runs at other batch sizes and sequence lengths. No asserts.
Run: ``.venv/bin/python benchmarks/bench_transformer.py``; ``run()`` returns the numbers.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch
from torch import nn

EXAMPLE = (1, 16)  # batch-1 dummy, as in most legacy export scripts
OTHER_SIZES = [(2, 16), (1, 24), (4, 40)]
DYNAMIC_AXES = {"input_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}}


class TinyEncoder(nn.Module):
    """Embedding + 2-layer nn.TransformerEncoder + LM head (BERT-style shape handling)."""

    def __init__(self, vocab: int = 1000, d: int = 128, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(512, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.emb(input_ids) + self.pos[: input_ids.shape[1]]
        return self.head(self.encoder(h))


def _ids(batch: int, seq: int) -> torch.Tensor:
    return torch.randint(0, 1000, (batch, seq))


def run(repeat: int = 50) -> dict[str, Any]:
    """Export with both routes and measure; returns a flat dict of numbers and flags."""
    import numpy as np

    import dynamo
    from compat.request import ExportRequest
    from dynamo import parity

    torch.manual_seed(0)
    model = TinyEncoder().eval()
    example = _ids(*EXAMPLE)
    names = {"input_names": ["input_ids"], "output_names": ["logits"]}

    t0 = time.perf_counter()
    legacy = parity.legacy_proto(model, (example,), dynamic_axes=DYNAMIC_AXES, opset_version=18, **names)
    legacy_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = dynamo.export(ExportRequest(
            model=model, args=(example,), dynamic_axes=DYNAMIC_AXES, opset_version=18,
            input_names=("input_ids",), output_names=("logits",), given=frozenset({"dynamic_axes"}),
        ))
    dynamo_s = time.perf_counter() - t0
    new = outcome.program.model_proto

    feeds = {"input_ids": example}
    others = [{"input_ids": _ids(b, s)} for b, s in OTHER_SIZES]
    result: dict[str, Any] = {
        "model": "TinyEncoder(d=128, 2 layers)",
        "example_shape": list(EXAMPLE),
        "export_s_legacy": round(legacy_s, 3),
        "export_s_dynamo": round(dynamo_s, 3),
        "latency_ms_legacy": round(parity.latency(legacy, feeds, repeat) * 1e3, 3),
        "latency_ms_dynamo": round(parity.latency(new, feeds, repeat) * 1e3, 3),
        "runs_other_sizes_legacy": parity.runs_at(legacy, others),
        "runs_other_sizes_dynamo": parity.runs_at(new, others),
        "dim_params_dynamo": parity.describe(new)["inputs"]["input_ids"],
        "dim_params_legacy": parity.describe(legacy)["inputs"]["input_ids"],
    }
    result["latency_ratio_dynamo_over_legacy"] = round(result["latency_ms_dynamo"] / result["latency_ms_legacy"], 3)
    ref = parity.eager(model, (example,))[0]
    result["max_abs_diff_dynamo"] = float(np.abs(parity.run(new, feeds)[0] - ref).max())
    result["max_abs_diff_legacy"] = float(np.abs(parity.run(legacy, feeds)[0] - ref).max())
    big = {"input_ids": _ids(4, 40)}
    if result["runs_other_sizes_legacy"]:
        result["latency_ms_legacy_4x40"] = round(parity.latency(legacy, big, repeat) * 1e3, 3)
    result["latency_ms_dynamo_4x40"] = round(parity.latency(new, big, repeat) * 1e3, 3)
    return result


def main() -> None:
    res = run()
    width = max(len(k) for k in res)
    print("bench_transformer: dynamic batch/sequence, legacy (TorchScript) vs dynamo (torch.export) route")
    for key, value in res.items():
        print(f"  {key:<{width}}  {value}")


if __name__ == "__main__":
    main()
