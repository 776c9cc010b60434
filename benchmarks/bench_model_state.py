"""What keeping the user's model unchanged costs (issues 13 and 20), on a mid-size convnet (~24M
parameters, ~96 MB; fewer blocks with ``--quick``) and on a many-op model (a 12-layer transformer
encoder: the copy-on-write mode's cost per torch call). Contenders alternate in one process,
order reversed every other round. Rows (ratio of medians):

* numerator ``preserved()`` (the guard every route runs, eval model, around nothing), denominator
  a plain ``state_dict`` clone of the same model;
* numerator ``values_preserved()`` (the full copy: ``verify=True``, ``verbose=True`` and models
  holding TorchScript code on the TorchScript route), same denominator;
* numerator ``torch.onnx.export(dynamo=False)`` inside ``copy_on_write()`` (the TorchScript
  route's guard), denominator the same export bare (target <= 1.05): the convnet, then the
  many-op encoder;
* numerator the same export inside ``values_preserved()``, denominator the bare export: what
  the TorchScript route's guard cost before it copied on write.
"""

from __future__ import annotations

import io
from typing import Any

from _timing import alternate, cli, quiet, ratio

TITLE = "model-state guards: cost against a state_dict clone and inside the export they guard"
CLONE = "state_dict clone"
ALL_ROUTES = "preserved() (every route, eval model)"
FULL = "values_preserved() (full copy)"
EXPORT = "torch.onnx.export(dynamo=False)"
COW_EXPORT = "the export inside copy_on_write()"
FULL_EXPORT = "the export inside values_preserved()"


def _model(blocks: int) -> Any:
    import torch

    layers: list[Any] = []
    for _ in range(blocks):
        layers += [torch.nn.Conv2d(256, 256, 3, padding=1), torch.nn.BatchNorm2d(256), torch.nn.ReLU()]
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(256, 10)]
    return torch.nn.Sequential(*layers).eval()


def _encoder(layers: int) -> Any:
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()


def _exports(model: Any, x: tuple[Any, ...]) -> dict[str, Any]:
    import torch

    from compat.routing.copy_on_write import copy_on_write
    from compat.routing.model_state import values_preserved

    def bare() -> None:
        torch.onnx.export(model, x, io.BytesIO(), dynamo=False)

    def cow() -> None:
        with copy_on_write(model):
            bare()

    def full() -> None:
        with values_preserved(model):
            bare()

    return {EXPORT: bare, COW_EXPORT: cow, FULL_EXPORT: full}


def run(quick: bool = False) -> dict[str, Any]:
    import torch

    from compat.routing.model_state import preserved, values_preserved

    model = _model(10 if quick else 40)
    size = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    x = (torch.randn(1, 256, 8, 8),)

    def clone() -> None:
        {k: v.clone() for k, v in model.state_dict().items()}

    def all_routes() -> None:
        with preserved(model, will_train=False):
            pass

    def full_copy() -> None:
        with values_preserved(model):
            pass

    with quiet():
        guards = alternate({CLONE: clone, ALL_ROUTES: all_routes, FULL: full_copy}, reps=5 if quick else 9)
        convnet = alternate(_exports(model, x), reps=3 if quick else 7)
        encoder = alternate(_exports(_encoder(12), (torch.randn(2, 16, 64),)), reps=5 if quick else 15)
    label = f"{round(size / 1e6)} MB convnet"
    rows = [
        ratio(guards, ALL_ROUTES, CLONE, "every-route guard / state_dict clone"),
        ratio(guards, FULL, CLONE, "full-copy guard / state_dict clone"),
        ratio(convnet, COW_EXPORT, EXPORT, f"TorchScript export with its guard / without, {label}", "<= 1.05"),
        ratio(encoder, COW_EXPORT, EXPORT, "TorchScript export with its guard / without, 12-layer encoder", "<= 1.05"),
        ratio(convnet, FULL_EXPORT, EXPORT, f"TorchScript export with a full copy / without, {label}"),
    ]
    details = {"model_mb": round(size / 1e6, 1),
               "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
               "encoder": "nn.TransformerEncoder, 12 layers, d=64, 4 heads, input 2x16x64"}
    return {"benchmark": "model_state", "title": TITLE, "ratios": rows, "details": details}


if __name__ == "__main__":
    cli(run, TITLE)
