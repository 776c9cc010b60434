"""What the strict check of every torch.export-route result costs (issue 10), on a mid-size
transformer encoder (~19M parameters, ~76 MB). The three contenders alternate in one process,
order reversed every other round; each check runs on the program of the latest export. Rows
(ratio of medians):

* numerator ``dynamo.validate.check`` (strict shape/type inference on the proto with the weights
  detached), denominator the export it checks: ``compat.export(route="dynamo")`` to a file, the
  check included;
* numerator the same check, denominator serialising the proto with its weights and running the
  same strict inference on it (what the check would cost done the plain way).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from _timing import alternate, cli, quiet, ratio

TITLE = "strict shape/type check of torch.export-route results: cost"
CHECK = "validate.check (weights detached)"
FULL = "serialize with weights + strict infer_shapes"
EXPORT = "compat.export(route='dynamo') to a file (check included)"


def _model(layers: int) -> Any:
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Linear(64, 512)
            layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.encoder(self.embed(x))

    return Encoder().eval()


def run(quick: bool = False) -> dict[str, Any]:
    import onnx
    import torch

    import compat
    from dynamo import validate

    model = _model(2 if quick else 6)
    x = (torch.randn(2, 10, 64),)
    holder: dict[str, Any] = {}

    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp, quiet():
        path = os.path.join(tmp, "model.onnx")

        def export() -> None:
            holder["program"] = compat.export(model, x, path, route="dynamo", opset_version=18)

        def check() -> None:
            validate.check(holder["program"])

        def full() -> None:
            onnx.shape_inference.infer_shapes(holder["program"].model_proto, check_type=True,
                                              strict_mode=True, data_prop=True)

        export()
        times = alternate({EXPORT: export, CHECK: check, FULL: full}, reps=2 if quick else 4, warmup=0)
    rows = [
        ratio(times, CHECK, EXPORT, "strict check / the export it checks"),
        ratio(times, CHECK, FULL, "strict check (weights detached) / strict inference with weights"),
    ]
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    details = {"model_mb": round(size / 1e6, 1), "nodes": len(holder["program"].model.graph)}
    return {"benchmark": "validate", "title": TITLE, "ratios": rows, "details": details}


if __name__ == "__main__":
    cli(run, TITLE)
