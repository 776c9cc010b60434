"""Side by side: one transformer-style model with dynamic batch and sequence axes, both routes.

The same call (input/output names, ``dynamic_axes`` on batch and sequence, opset 18, a batch-1
example as in most legacy export scripts) goes through ``compat.export`` on each route, each
writing one ``.onnx`` file; onnxruntime sessions on those files (one intra-op thread each) are
timed. Contenders alternate in one process, order reversed every other round. Rows (ratio of
medians): numerator the torch.export route (``compat.export(route="dynamo")``), denominator the
TorchScript route (``compat.export(route="legacy")``):

* export (call to written file);
* onnxruntime latency of the written models at the example size (1x16);
* the same at 4x40, when the TorchScript route's model runs there.

Findings: whether each route's model runs at other batch sizes and sequence lengths. ``details``:
each model's input dims and its largest difference from eager torch. No asserts.
Run: ``.venv/bin/python benchmarks/bench_transformer.py [--quick]``; ``run()`` returns the numbers.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from _onnx import eager, input_dims, runs_at, session
from _onnx import run as ort_run
from _timing import alternate, cli, layout, quiet, ratio, same_layout

TITLE = "transformer with dynamic batch/sequence: torch.export route / TorchScript route (ratio of medians)"
EXAMPLE = (1, 16)  # batch-1 dummy, as in most legacy export scripts
OTHER_SIZES = [(2, 16), (1, 24), (4, 40)]
BIG = (4, 40)
DYNAMIC_AXES = {"input_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}}
ROUTES = {"dynamo": "compat.export(route='dynamo')", "legacy": "compat.export(route='legacy')"}


def _model(vocab: int = 1000, d: int = 128, heads: int = 4, layers: int = 2) -> Any:
    """Embedding + 2-layer nn.TransformerEncoder + LM head (BERT-style shape handling)."""
    import torch
    from torch import nn

    class TinyEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(512, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d, vocab)

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            h = self.emb(input_ids) + self.pos[: input_ids.shape[1]]
            return self.head(self.encoder(h))

    torch.manual_seed(0)
    return TinyEncoder().eval()


def _ids(batch: int, seq: int) -> Any:
    import torch

    return torch.randint(0, 1000, (batch, seq))


def run(quick: bool = False) -> dict[str, Any]:
    """Export with both routes, alternating; time the written models; ratios and findings."""
    import numpy as np

    import compat

    model = _model()
    example = _ids(*EXAMPLE)
    options = {"input_names": ["input_ids"], "output_names": ["logits"], "dynamic_axes": DYNAMIC_AXES,
               "opset_version": 18}
    reps = 30 if quick else 200
    with tempfile.TemporaryDirectory(prefix="bench-transformer-") as tmp, quiet():
        paths = {r: os.path.join(tmp, f"{r}.onnx") for r in ROUTES}
        exports = alternate({ROUTES[r]: lambda r=r: compat.export(model, (example,), paths[r], route=r, **options)
                             for r in ROUTES}, reps=2 if quick else 4)
        written = {"export": {ROUTES[r]: layout(paths[r]) for r in ROUTES}}
        sessions = {r: session(paths[r]) for r in ROUTES}
        runs_other = {r: runs_at(sessions[r], [{"input_ids": _ids(b, s)} for b, s in OTHER_SIZES]) for r in ROUTES}
        ref = eager(model, (example,))[0]
        details = {
            "model": "TinyEncoder(d=128, 2 layers)", "example_shape": list(EXAMPLE), "written": written,
            "input_dims": {r: input_dims(paths[r], "input_ids") for r in ROUTES},
            "max_abs_diff": {r: float(np.abs(ort_run(sessions[r], {"input_ids": example})[0] - ref).max())
                             for r in ROUTES},
        }
        rows = [ratio(exports, ROUTES["dynamo"], ROUTES["legacy"], "export, call to written file")]
        sizes = [EXAMPLE] + ([BIG] if runs_other["legacy"] and runs_other["dynamo"] else [])
        for size in sizes:
            feeds = {"input_ids": _ids(*size).numpy()}
            t = alternate({ROUTES[r]: lambda s=sessions[r], f=feeds: s.run(None, f) for r in ROUTES}, reps=reps, warmup=3)
            rows.append(ratio(t, ROUTES["dynamo"], ROUTES["legacy"], f"onnxruntime latency at {size[0]}x{size[1]}"))
    return {"benchmark": "transformer", "title": TITLE, "ratios": rows,
            "runs_other_sizes_legacy": runs_other["legacy"], "runs_other_sizes_dynamo": runs_other["dynamo"],
            "same_layout_both_sides": same_layout(written), "details": details}


if __name__ == "__main__":
    cli(run, TITLE)
