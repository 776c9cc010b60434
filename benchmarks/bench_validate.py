"""What the strict check of every torch.export-route result costs (issue 10): ``dynamo.validate``
(weights detached) against the export it checks, and against strict inference on the full proto,
on a mid-size transformer encoder (~19M parameters, ~76 MB)."""

from __future__ import annotations

from typing import Any

from _timing import alternate, cli, quiet, ratio

TITLE = "strict shape/type check of torch.export-route results: cost"
CHECK = "validate.check (weights detached)"
FULL = "serialize with weights + strict infer_shapes"
EXPORT = "torch.export route export (check included)"


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

    import dynamo
    from compat.request import ExportRequest
    from dynamo import validate

    model = _model(2 if quick else 6)
    request = ExportRequest(model=model, args=(torch.randn(2, 10, 64),), opset_version=18)
    holder: dict[str, Any] = {}

    def export() -> None:
        holder["program"] = dynamo.export(request).program

    def check() -> None:
        validate.check(holder["program"])

    def full() -> None:
        onnx.shape_inference.infer_shapes(holder["program"].model_proto, check_type=True,
                                          strict_mode=True, data_prop=True)

    with quiet():
        exported = alternate({EXPORT: export}, reps=1, warmup=0)
        checks = alternate({CHECK: check, FULL: full}, reps=3 if quick else 5)
    times = {**exported, **checks}
    rows = [
        ratio(times, CHECK, EXPORT, "strict check / the export it checks"),
        ratio(times, CHECK, FULL, "strict check (weights detached) / strict inference with weights"),
    ]
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    details = {"model_mb": round(size / 1e6, 1), "nodes": len(holder["program"].model.graph)}
    return {"benchmark": "validate", "title": TITLE, "ratios": rows, "details": details}


if __name__ == "__main__":
    cli(run, TITLE)
