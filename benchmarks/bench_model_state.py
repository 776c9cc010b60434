"""What keeping the user's model unchanged costs (issue 13), on a mid-size convnet (~24M
parameters, ~96 MB; fewer blocks with ``--quick``). Contenders alternate in one process, order
reversed every other round. Rows (ratio of medians):

* numerator ``preserved()`` (the guard every route runs, eval model, entered and left around
  nothing), denominator a plain ``state_dict`` clone of the same model;
* numerator ``values_preserved()`` (the TorchScript route's guard, likewise), same denominator;
* numerator ``values_preserved()``, denominator the TorchScript export it guards
  (``torch.onnx.export(dynamo=False)`` of the same model to memory).
"""

from __future__ import annotations

import io
from typing import Any

from _timing import alternate, cli, quiet, ratio

TITLE = "model-state guards: cost against a state_dict clone and against the export they guard"
CLONE = "state_dict clone"
ALL_ROUTES = "preserved() (every route, eval model)"
TORCHSCRIPT = "values_preserved() (TorchScript route)"
EXPORT = "torch.onnx.export(dynamo=False)"


def _model(blocks: int) -> Any:
    import torch

    layers: list[Any] = []
    for _ in range(blocks):
        layers += [torch.nn.Conv2d(256, 256, 3, padding=1), torch.nn.BatchNorm2d(256), torch.nn.ReLU()]
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(256, 10)]
    return torch.nn.Sequential(*layers).eval()


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

    def torchscript() -> None:
        with values_preserved(model):
            pass

    def export() -> None:
        torch.onnx.export(model, x, io.BytesIO(), dynamo=False)

    reps = 5 if quick else 9
    with quiet():
        guards = alternate({CLONE: clone, ALL_ROUTES: all_routes, TORCHSCRIPT: torchscript}, reps=reps)
        against_export = alternate({EXPORT: export, TORCHSCRIPT: torchscript}, reps=3)
    rows = [
        ratio(guards, ALL_ROUTES, CLONE, "every-route guard / state_dict clone"),
        ratio(guards, TORCHSCRIPT, CLONE, "TorchScript-route guard / state_dict clone"),
        ratio(against_export, TORCHSCRIPT, EXPORT, "TorchScript-route guard / the TorchScript export itself"),
    ]
    details = {"model_mb": round(size / 1e6, 1),
               "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1)}
    return {"benchmark": "model_state", "title": TITLE, "ratios": rows, "details": details}


if __name__ == "__main__":
    cli(run, TITLE)
