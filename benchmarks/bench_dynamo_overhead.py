"""The shim's own cost on the torch.export route, and what its down-conversion costs (issue 20
item 6), on a CNN, a transformer encoder and a detection head (a small FPN with box and class
heads, written by hand). Contenders alternate in one process, order reversed every other round.

Rows per model (ratio of medians):

* numerator ``compat.export(route='dynamo', opset_version=18)``, denominator torch's own
  ``torch.onnx.export(dynamo=True, opset_version=18, external_data=False)``: the same opset, the
  same ``optimize`` (torch's default, which compat keeps), one ``.onnx`` file each (target <= 1.10);
* numerator compat's down-conversion of that opset-18 model to opset N (``dynamo.downconvert``,
  its own strict checks included), denominator the same torch export (target <= 0.10), N = 11, 17;
* numerator ``compat.export(route='dynamo', opset_version=11)`` end to end, same denominator.

``details`` give the files and opsets each side wrote and how often a result's strict check ran
(onnx's strict shape inference per export: once per result is the goal), and the acceptance
check (``accept``'s work, when present) is switched off for the compat side if it is a setting.
"""

from __future__ import annotations

import collections
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _timing import alternate, cache_dir, cli, layout, quiet, ratio, same_layout

TITLE = "torch.export route: compat.export / torch.onnx.export at opset 18, and down-conversion / that export"
TORCH18 = "torch.onnx.export(dynamo=True, opset_version=18, external_data=False)"
COMPAT18 = "compat.export(route='dynamo', opset_version=18)"
COMPAT11 = "compat.export(route='dynamo', opset_version=11)"
DOWN = "downconvert(opset-18 model, {n})"
TARGETS = (11, 17)


def _cnn() -> Any:
    from _timing import convnet

    return convnet(6, 32), (_randn(1, 3, 64, 64),)


def _encoder() -> Any:
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval(), (_randn(2, 16, 64),)


def _detection_head() -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class FPNDetector(nn.Module):
        """Three backbone stages (strides 8, 16, 32), an FPN (1x1 laterals, nearest top-down,
        3x3 smoothing) and a head shared across levels: class logits and box deltas per anchor,
        flattened and concatenated over the levels."""

        def __init__(self, classes: int = 5, anchors: int = 3, width: int = 32) -> None:
            super().__init__()

            def stage(cin: int, cout: int) -> nn.Module:
                return nn.Sequential(nn.Conv2d(cin, cout, 3, 2, 1), nn.BatchNorm2d(cout), nn.ReLU(),
                                     nn.Conv2d(cout, cout, 3, 1, 1), nn.BatchNorm2d(cout), nn.ReLU())

            self.stem = nn.Sequential(stage(3, 16), stage(16, 24))
            self.c3, self.c4, self.c5 = stage(24, 32), stage(32, 48), stage(48, 64)
            self.lateral = nn.ModuleList(nn.Conv2d(c, width, 1) for c in (32, 48, 64))
            self.smooth = nn.ModuleList(nn.Conv2d(width, width, 3, 1, 1) for _ in range(3))
            self.tower = nn.Sequential(nn.Conv2d(width, width, 3, 1, 1), nn.ReLU(),
                                       nn.Conv2d(width, width, 3, 1, 1), nn.ReLU())
            self.cls = nn.Conv2d(width, anchors * classes, 3, 1, 1)
            self.box = nn.Conv2d(width, anchors * 4, 3, 1, 1)
            self.classes = classes

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            c3 = self.c3(self.stem(x))
            c4 = self.c4(c3)
            c5 = self.c5(c4)
            p5 = self.lateral[2](c5)
            p4 = self.lateral[1](c4) + F.interpolate(p5, scale_factor=2.0, mode="nearest")
            p3 = self.lateral[0](c3) + F.interpolate(p4, scale_factor=2.0, mode="nearest")
            logits, boxes = [], []
            for level, smooth in zip((p3, p4, p5), self.smooth):
                t = self.tower(smooth(level))
                n = t.shape[0]
                logits.append(self.cls(t).permute(0, 2, 3, 1).reshape(n, -1, self.classes))
                boxes.append(self.box(t).permute(0, 2, 3, 1).reshape(n, -1, 4))
            return torch.sigmoid(torch.cat(logits, 1)), torch.cat(boxes, 1)

    torch.manual_seed(0)
    return FPNDetector().eval(), (_randn(1, 3, 128, 128),)


def _randn(*shape: int) -> Any:
    import torch

    torch.manual_seed(1)
    return torch.randn(*shape)


MODELS = {"CNN": _cnn, "encoder": _encoder, "detection head": _detection_head}


@contextlib.contextmanager
def _counting_strict_checks() -> Iterator[collections.Counter[str]]:
    """Count onnx's strict shape inference runs (``strict_mode=True``) while the block runs."""
    import onnx.shape_inference as si

    counts: collections.Counter[str] = collections.Counter()
    originals = {name: getattr(si, name) for name in ("infer_shapes", "infer_shapes_path")}

    def counted(name: str) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("strict_mode"):
                counts["strict"] += 1
            return originals[name](*args, **kwargs)
        return run

    for name in originals:
        setattr(si, name, counted(name))
    try:
        yield counts
    finally:
        for name, fn in originals.items():
            setattr(si, name, fn)


def run(quick: bool = False) -> dict[str, Any]:
    import torch

    import compat
    from dynamo import downconvert

    reps = 4 if quick else 12
    rows, written, checks = [], {}, {}
    with tempfile.TemporaryDirectory() as tmp, quiet(), cache_dir(Path(tmp) / "cache"):
        for label, build in MODELS.items():
            model, args = build()
            paths = {n: str(Path(tmp) / f"{label}-{i}.onnx") for i, n in enumerate((TORCH18, COMPAT18, COMPAT11))}
            program = compat.export(model, args, paths[COMPAT18], route="dynamo", opset_version=18)
            source = program.model
            contenders = {
                TORCH18: lambda m=model, a=args, p=paths[TORCH18]: torch.onnx.export(
                    m, a, p, dynamo=True, opset_version=18, external_data=False),
                COMPAT18: lambda m=model, a=args, p=paths[COMPAT18]: compat.export(
                    m, a, p, route="dynamo", opset_version=18),
                COMPAT11: lambda m=model, a=args, p=paths[COMPAT11]: compat.export(
                    m, a, p, route="dynamo", opset_version=11),
            }
            for n in TARGETS:
                contenders[DOWN.format(n=n)] = lambda s=source, n=n: downconvert.downconvert(s, n)
            t = alternate(contenders, reps=reps)
            rows.append(ratio(t, COMPAT18, TORCH18, f"{label}: compat / torch at opset 18", "<= 1.10"))
            for n in TARGETS:
                rows.append(ratio(t, DOWN.format(n=n), TORCH18, f"{label}: down-conversion to {n} / torch export",
                                  "<= 0.10"))
            rows.append(ratio(t, COMPAT11, TORCH18, f"{label}: compat at opset 11 / torch at opset 18"))
            written[label] = {n: layout(paths[n]) for n in (TORCH18, COMPAT18)}
            for opset in (18, 11):
                with _counting_strict_checks() as counts:
                    compat.export(model, args, paths[COMPAT18], route="dynamo", opset_version=opset)
                checks[f"{label}, opset {opset}"] = counts["strict"]
    return {"benchmark": "dynamo_overhead", "title": TITLE, "ratios": rows,
            "same_layout_both_sides": same_layout(written),
            "strict_check_once_per_result": all(v == 1 for v in checks.values()),
            "details": {"written": written, "strict_inference_runs_per_export": checks,
                        "models": {"CNN": "6 Conv-BN-ReLU blocks, 32 channels, 1x3x64x64",
                                   "encoder": "nn.TransformerEncoder, 2 layers, d=64, 4 heads, 2x16x64",
                                   "detection head": "3-stage backbone, FPN (3 levels), shared 2-conv "
                                                     "tower, class and box heads, 1x3x128x128"}}}


if __name__ == "__main__":
    cli(run, TITLE)
