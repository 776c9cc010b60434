"""What the acceptance check of a torch.export-route model costs (issue 17), against the export
it checks, on zoo-style models (a CNN, a transformer encoder, a detection head, each with
dynamic axes, so the check runs at the example and at one other size per axis) and on a large
MLP (~100M parameters, ~400 MB: serialising it for onnxruntime dominates the check there).

Rows (ratio of medians, contenders alternating in one process): numerator
``compat.routing.acceptance.check`` on the route's result, denominator
``compat.export(route="dynamo", acceptance_check=False)`` of the same call to a file. Target for
the zoo models: <= 0.10. ``acceptance_check=False`` or ``TORCH_ONNX_COMPAT_ACCEPTANCE_CHECK=0``
turns the check off (README: "The acceptance check").
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from _timing import alternate, cli, quiet, ratio

TITLE = "acceptance check of torch.export-route models: cost against the export"


def _cnn() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    from torch import nn

    def block(cin: int, cout: int) -> nn.Module:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1, stride=2), nn.BatchNorm2d(cout), nn.ReLU())

    model = nn.Sequential(block(3, 32), block(32, 64), block(64, 128), block(128, 256),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 100)).eval()
    return model, (torch.randn(2, 3, 96, 96),), {"input_names": ["image"], "output_names": ["logits"],
                                                 "dynamic_axes": {"image": {0: "batch"}}}


def _encoder() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(1000, 256)
            layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
            self.head = nn.Linear(256, 2)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(self.embed(ids)))

    return Encoder().eval(), (torch.randint(0, 1000, (2, 32)),), {
        "input_names": ["ids"], "dynamic_axes": {"ids": {0: "batch", 1: "seq"}}}


def _detection_head() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    from torch import nn

    class Head(nn.Module):
        """YOLO-style: a conv stem, per-anchor box/objectness/class maps decoded against a grid."""

        def __init__(self, classes: int = 20, anchors: int = 3) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.SiLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.SiLU(),
                                      nn.Conv2d(64, 128, 3, 2, 1), nn.SiLU())
            self.pred = nn.Conv2d(128, anchors * (5 + classes), 1)
            self.anchors, self.outputs = anchors, 5 + classes

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            p = self.pred(self.stem(x))
            b, _, h, w = p.shape
            p = p.view(b, self.anchors, self.outputs, h, w).permute(0, 1, 3, 4, 2)
            ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
            grid = torch.stack((xs, ys), -1).to(p.dtype)
            xy = (p[..., :2].sigmoid() + grid) * 8
            wh = p[..., 2:4].exp() * 8
            boxes = torch.cat((xy, wh), -1).reshape(b, -1, 4)
            scores = (p[..., 4:5].sigmoid() * p[..., 5:].sigmoid()).reshape(b, -1, self.outputs - 5)
            return boxes, scores

    return Head().eval(), (torch.randn(1, 3, 128, 128),), {
        "input_names": ["images"], "output_names": ["boxes", "scores"],
        "dynamic_axes": {"images": {0: "batch"}}}


def _large_mlp(width: int, layers: int) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    import torch
    from torch import nn

    blocks: list[nn.Module] = []
    for _ in range(layers):
        blocks += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*blocks).eval(), (torch.randn(4, width),), {
        "input_names": ["x"], "dynamic_axes": {"x": {0: "batch"}}}


def _measure(name: str, build: Any, reps: int, folder: str) -> tuple[dict[str, Any], dict[str, Any]]:
    import compat
    import dynamo
    from compat.request import normalize
    from compat.routing import acceptance

    model, args, options = build()
    path = os.path.join(folder, f"{name}.onnx")
    req = normalize.normalize(model, args, None, **options)
    holder: dict[str, Any] = {}

    def export() -> None:
        compat.export(model, args, path, route="dynamo", acceptance_check=False, **options)

    def check() -> None:
        acceptance.check(req, holder["outcome"])

    holder["outcome"] = dynamo.export(req)
    check()  # warm: onnxruntime's first session
    export_name, check_name = f"{name}: export (check off)", f"{name}: acceptance check"
    times = alternate({export_name: export, check_name: check}, reps=reps, warmup=0)
    params = sum(p.numel() for p in model.parameters())
    result = holder["outcome"].acceptance
    details = {"parameters": params, "status": result["status"], "probes": len(result["probes"])}
    return ratio(times, check_name, export_name, f"{name}: check / export", target=None), details


def run(quick: bool = False) -> dict[str, Any]:
    zoo = {"cnn": _cnn, "encoder": _encoder, "detection head": _detection_head}
    width, layers = (1024, 4) if quick else (4096, 6)
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-accept-") as tmp, quiet():
        for name, build in zoo.items():
            row, info = _measure(name, build, reps=2 if quick else 3, folder=tmp)
            row["target"] = "<= 0.10"
            rows.append(row)
            details[name] = info
        name = f"MLP {width}x{layers}"
        row, info = _measure(name, lambda: _large_mlp(width, layers), reps=1 if quick else 2, folder=tmp)
        rows.append(row)
        details[name] = info
    return {"benchmark": "acceptance", "title": TITLE, "ratios": rows, "details": details}


if __name__ == "__main__":
    cli(run, TITLE)
