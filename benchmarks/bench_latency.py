"""onnxruntime latency of each route's model: per model, ``compat.compare`` exports it on both
routes (files written as the shim writes them) and checks parity; then one onnxruntime session
per file (same options, one intra-op thread each) runs the example inputs, the two routes
alternating run by run in one process, order reversed every other round.

Rows (ratio of medians, per model): numerator the torch.export route's model, denominator the
TorchScript route's model, same inputs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from _onnx import positional, session
from _timing import alternate, cli, convnet, quiet, ratio

TITLE = "onnxruntime latency: torch.export route's model / TorchScript route's model (ratio of medians)"
DYNAMO, LEGACY = "torch.export route's model", "TorchScript route's model"


def _models() -> dict[str, tuple[Any, tuple[Any, ...], dict[str, Any]]]:
    import torch

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).eval()
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    return {
        "MLP 64-256-64, batch 8": (mlp, (torch.randn(8, 64),), {}),
        "6-block CNN, 1x3x32x32": (convnet(6), (torch.randn(1, 3, 32, 32),), {}),
        "TransformerEncoder d64 x2, 2x32 tokens": (encoder, (torch.randn(2, 32, 64),), {}),
    }


def run(quick: bool = False) -> dict[str, Any]:
    from compat.tools.parity import compare

    reps = 30 if quick else 200
    rows, details = [], {}
    for label, (model, args, options) in _models().items():
        with tempfile.TemporaryDirectory() as tmp, quiet():
            report = compare(model, args, latency_runs=0, probes=[], workdir=tmp, **options)
            legacy, dyn = report.routes["legacy"], report.routes["dynamo"]
            details[label] = {"verdict": report.verdict, "nodes": {"legacy": legacy.nodes, "dynamo": dyn.nodes}}
            if legacy.status != "ok" or dyn.status != "ok":
                details[label]["errors"] = {"legacy": legacy.error, "dynamo": dyn.error}
                continue
            sessions = {DYNAMO: session(str(Path(tmp) / "dynamo.onnx")),
                        LEGACY: session(str(Path(tmp) / "legacy.onnx"))}
            inputs = {name: positional(sess, args) for name, sess in sessions.items()}
            t = alternate({name: lambda s=sess, i=inputs[name]: s.run(None, i) for name, sess in sessions.items()},
                          reps=reps, warmup=3)
        rows.append(ratio(t, DYNAMO, LEGACY, label))
    return {"benchmark": "latency", "title": TITLE, "ratios": rows, "details": details}


if __name__ == "__main__":
    cli(run, TITLE)
