"""Route memory, on CNNs that torch.export cannot capture (so ``compat.export`` falls back to the
TorchScript route), alternating in one process (order reversed every other
round); ratios of medians:

* numerator ``compat.export()`` with the fallback remembered (route memory in a private folder,
  one export on the TorchScript route), denominator ``torch.onnx.export(dynamo=False)`` with the
  same options (both write one ``.onnx`` file at the same opset; target <= 1.3);
* numerator ``compat.export()`` with memory off (the failing torch.export attempt paid every
  call, then the TorchScript export), denominator the remembered fallback: what memory saves.

``details`` lists the routes' fallback reasons and the files each side wrote.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from _timing import alternate, cache_dir, cli, convnet, layout, quiet, ratio, same_layout

TITLE = "route memory: remembered fallback vs direct TorchScript export (ratio of medians)"
REMEMBERED, DIRECT = "compat.export() remembered fallback", "torch.onnx.export(dynamo=False)"
NO_MEMORY = "compat.export() fallback, memory off"


def run(quick: bool = False) -> dict[str, Any]:
    import torch

    import compat

    x = (torch.randn(2, 3, 32, 32),)
    axes = {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch"}}}
    models = {"6-block CNN": convnet(6, torchscript_only=True), "1-block CNN": convnet(1, 8, torchscript_only=True)}
    rows, details, written = [], {}, {}
    with tempfile.TemporaryDirectory() as tmp, quiet():
        a, b = str(Path(tmp) / "torch.onnx"), str(Path(tmp) / "compat.onnx")
        memory = Path(tmp) / "cache"
        for label, model in models.items():
            with cache_dir(memory):
                compat.export(model, x, b, **axes)  # falls back once, and remembers
                details[f"{label}: first call"] = compat.api.last_outcome().fallback_reason
                remembered = lambda m=model: compat.export(m, x, b, **axes)
                remembered()
                details[f"{label}: later calls"] = compat.api.last_outcome().fallback_reason
                t = alternate({REMEMBERED: remembered,
                               DIRECT: lambda m=model: torch.onnx.export(m, x, a, dynamo=False, **axes)},
                              reps=10 if quick else 30, warmup=2)
            rows.append(ratio(t, REMEMBERED, DIRECT, f"remembered fallback / direct TorchScript, {label}", "<= 1.3"))
            written[label] = {REMEMBERED: layout(b), DIRECT: layout(a)}
        model = models["6-block CNN"]

        def without_memory() -> None:
            with cache_dir("off"):
                compat.export(model, x, b, **axes)

        def with_memory() -> None:
            with cache_dir(memory):
                compat.export(model, x, b, **axes)

        t = alternate({NO_MEMORY: without_memory, REMEMBERED: with_memory}, reps=3 if quick else 6)
        rows.append(ratio(t, NO_MEMORY, REMEMBERED, "fallback without memory / remembered (what memory saves)"))
    return {"benchmark": "memory", "title": TITLE, "ratios": rows, "same_layout_both_sides": same_layout(written),
            "details": {**details, "written": written}}


if __name__ == "__main__":
    cli(run, TITLE)
