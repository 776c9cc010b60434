"""onnxruntime latency of each route's model, via ``compat.compare`` (routes alternate run by run);
the ratio dynamo / legacy of the medians, per model."""

from __future__ import annotations

from typing import Any

from _timing import cli, convnet, quiet

TITLE = "onnxruntime latency: torch.export route's model / TorchScript route's model (ratio of medians)"


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

    rows, details = [], {}
    for label, (model, args, options) in _models().items():
        with quiet():
            report = compare(model, args, latency_runs=30 if quick else 200, probes=[], **options)
        legacy, dyn = report.routes["legacy"], report.routes["dynamo"]
        details[label] = {"verdict": report.verdict, "nodes": {"legacy": legacy.nodes, "dynamo": dyn.nodes},
                          "export_s_ratio": round(dyn.export_s / legacy.export_s, 2)
                          if dyn.export_s and legacy.export_s else None}
        if legacy.latency_ms and dyn.latency_ms:
            rows.append({
                "name": label, "ratio": round(dyn.latency_ms / legacy.latency_ms, 4), "target": None,
                "numerator": "dynamo model", "denominator": "legacy model",
                "reps": 30 if quick else 200,
                "median_s": {"dynamo model": dyn.latency_ms / 1e3, "legacy model": legacy.latency_ms / 1e3},
            })
    return {"benchmark": "latency", "title": TITLE, "ratios": rows, "details": details}


if __name__ == "__main__":
    cli(run, TITLE)
