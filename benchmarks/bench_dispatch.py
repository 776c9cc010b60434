"""Dispatch overhead per route: ``compat.export`` against ``torch.onnx.export`` on the same route
and the same model, alternating in one process; the ratio of medians (target <= 1.05)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from _timing import alternate, cache_dir, cli, convnet, quiet, ratio

TITLE = "dispatch overhead: compat.export / torch.onnx.export, same route (ratio of medians)"
TORCH_TS, COMPAT_TS = "torch.onnx.export(dynamo=False)", "compat.export(route='legacy')"
TORCH_DY, COMPAT_DY, COMPAT_AUTO = "torch.onnx.export(dynamo=True)", "compat.export(route='dynamo')", "compat.export() auto"


def run(quick: bool = False) -> dict[str, Any]:
    import torch

    import compat

    x = (torch.randn(1, 3, 32, 32),)
    models = {"6-block CNN": convnet(6), "1-block CNN": convnet(1, 8)}
    rows = []
    with tempfile.TemporaryDirectory() as tmp, quiet(), cache_dir(Path(tmp) / "cache"):
        a, b, c = (str(Path(tmp) / n) for n in ("torch.onnx", "compat.onnx", "auto.onnx"))
        for label, model in models.items():
            t = alternate({
                TORCH_TS: lambda m=model: torch.onnx.export(m, x, a, dynamo=False),
                COMPAT_TS: lambda m=model: compat.export(m, x, b, route="legacy"),
            }, reps=10 if quick else 40, warmup=2)
            rows.append(ratio(t, COMPAT_TS, TORCH_TS, f"TorchScript route, {label}", "<= 1.05"))
        model = models["1-block CNN"]  # torch.export costs ~0.5 s even here: more runs beat noise
        t = alternate({
            TORCH_DY: lambda: torch.onnx.export(model, x, a, dynamo=True),
            COMPAT_DY: lambda: compat.export(model, x, b, route="dynamo"),
            COMPAT_AUTO: lambda: compat.export(model, x, c),
        }, reps=4 if quick else 15)
        rows.append(ratio(t, COMPAT_DY, TORCH_DY, "torch.export route, 1-block CNN", "<= 1.05"))
        rows.append(ratio(t, COMPAT_AUTO, TORCH_DY, "auto route (torch.export succeeds), 1-block CNN", "<= 1.05"))
    return {"benchmark": "dispatch", "title": TITLE, "ratios": rows,
            "details": {"models": "Conv-BN-ReLU blocks (32 or 8 channels), input 1x3x32x32"}}


if __name__ == "__main__":
    cli(run, TITLE)
