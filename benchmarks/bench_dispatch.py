"""Dispatch overhead per route: ``compat.export`` against ``torch.onnx.export`` on the same route,
the same model and the same file layout (one ``.onnx`` file each: torch's torch.export route is
asked for ``external_data=False``, as the shim writes a model under 2 GB), alternating in one
process (order reversed every other round).

Rows (ratio of medians, target <= 1.05):

* TorchScript route: numerator ``compat.export(route='legacy')``, denominator
  ``torch.onnx.export(dynamo=False)``, for a 6-block and a 1-block CNN and a 24M-parameter
  convnet (``bench_model_state``'s; 6M with ``--quick``);
* the same TorchScript-route pair for the 1-block CNN writing into a folder that holds 2,000
  other files (500 with ``--quick``), as a checkpoint or output folder does: what the shim pays
  per file in the folder (its leftover check) shows here;
* torch.export route: numerator ``compat.export(route='dynamo')``, denominator
  ``torch.onnx.export(dynamo=True, external_data=False)``, 1-block CNN;
* auto route: numerator ``compat.export()`` (torch.export succeeds, route memory in a private
  folder), same denominator.

``details`` lists the files each side wrote and the opset it wrote. Both sides of a torch.export
row get the same opset (torch's default), ``optimize`` (torch's default, which compat keeps) and
file layout; the one difference in the call is ``verbose``: compat passes False (a legacy call
printed nothing), torch's default None prints progress lines (here into ``quiet()``'s sink).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from _timing import alternate, cache_dir, cli, convnet, layout, quiet, ratio, same_layout
from bench_model_state import _model as wide_convnet

TITLE = "dispatch overhead: compat.export / torch.onnx.export, same route, same file layout (ratio of medians)"
TORCH_TS, COMPAT_TS = "torch.onnx.export(dynamo=False)", "compat.export(route='legacy')"
TORCH_DY = "torch.onnx.export(dynamo=True, external_data=False)"
COMPAT_DY, COMPAT_AUTO = "compat.export(route='dynamo')", "compat.export() auto"
BUSY_FOLDER_FILES = 2000


def run(quick: bool = False) -> dict[str, Any]:
    import torch

    import compat

    x = (torch.randn(1, 3, 32, 32),)
    models = {"6-block CNN": convnet(6), "1-block CNN": convnet(1, 8)}
    rows, written = [], {}
    with tempfile.TemporaryDirectory() as tmp, quiet(), cache_dir(Path(tmp) / "cache"):
        paths = {n: str(Path(tmp) / f"{i}.onnx") for i, n in enumerate((TORCH_TS, COMPAT_TS, TORCH_DY, COMPAT_DY,
                                                                          COMPAT_AUTO))}
        big = wide_convnet(10 if quick else 40)
        big_label = f"{round(sum(p.numel() for p in big.parameters()) / 1e6)}M-parameter convnet"
        # each row runs for seconds: with 40 runs (7 for the convnet) a row's ratio moved between
        # runs of this benchmark by more than its distance to the target
        row_reps = {"6-block CNN": 10 if quick else 100, "1-block CNN": 10 if quick else 300}
        runs = [(label, model, x, row_reps[label], 2) for label, model in models.items()]
        runs.append((big_label, big, (torch.randn(1, 256, 8, 8),), 3 if quick else 15, 1))
        for label, model, inputs, reps, warmup in runs:
            t = alternate({
                TORCH_TS: lambda m=model, i=inputs: torch.onnx.export(m, i, paths[TORCH_TS], dynamo=False),
                COMPAT_TS: lambda m=model, i=inputs: compat.export(m, i, paths[COMPAT_TS], route="legacy"),
            }, reps=reps, warmup=warmup)
            rows.append(ratio(t, COMPAT_TS, TORCH_TS, f"TorchScript route, {label}", "<= 1.05"))
            written[f"TorchScript route, {label}"] = {n: layout(paths[n]) for n in (TORCH_TS, COMPAT_TS)}
        busy = Path(tmp) / "busy"
        busy.mkdir()
        for i in range(500 if quick else BUSY_FOLDER_FILES):
            (busy / f"other-{i}.txt").touch()
        busy_paths = {n: str(busy / f"{i}.onnx") for i, n in enumerate((TORCH_TS, COMPAT_TS))}
        model = models["1-block CNN"]
        t = alternate({
            TORCH_TS: lambda: torch.onnx.export(model, x, busy_paths[TORCH_TS], dynamo=False),
            COMPAT_TS: lambda: compat.export(model, x, busy_paths[COMPAT_TS], route="legacy"),
        }, reps=row_reps["1-block CNN"], warmup=2)
        rows.append(ratio(t, COMPAT_TS, TORCH_TS, "TorchScript route, 1-block CNN, into a folder of "
                                                  f"{500 if quick else BUSY_FOLDER_FILES:,} files", "<= 1.05"))
        written["TorchScript route, busy folder"] = {n: layout(busy_paths[n]) for n in (TORCH_TS, COMPAT_TS)}
        # torch.export costs ~0.5 s even here: more runs beat noise
        t = alternate({
            TORCH_DY: lambda: torch.onnx.export(model, x, paths[TORCH_DY], dynamo=True, external_data=False),
            COMPAT_DY: lambda: compat.export(model, x, paths[COMPAT_DY], route="dynamo"),
            COMPAT_AUTO: lambda: compat.export(model, x, paths[COMPAT_AUTO]),
        }, reps=4 if quick else 15)
        rows.append(ratio(t, COMPAT_DY, TORCH_DY, "torch.export route, 1-block CNN", "<= 1.05"))
        rows.append(ratio(t, COMPAT_AUTO, TORCH_DY, "auto route (torch.export succeeds), 1-block CNN", "<= 1.05"))
        written["torch.export route, 1-block CNN"] = {n: layout(paths[n]) for n in (TORCH_DY, COMPAT_DY, COMPAT_AUTO)}
    return {"benchmark": "dispatch", "title": TITLE, "ratios": rows, "same_layout_both_sides": same_layout(written),
            "details": {"models": "Conv-BN-ReLU blocks (32 or 8 channels), input 1x3x32x32", "written": written}}


if __name__ == "__main__":
    cli(run, TITLE)
