"""Both routes bake a data-dependent branch: which result is right where (issue 19 item 1).

For each model of ``tests/helpers/baked_models.py`` (``if x.mean() > 0:``, torchvision's
``batched_nms`` idiom, Piper's VITS spline asserts, a duration-driven output length, a gated
transformer layer, VITS's ``sequence_mask`` with a Python int length), ``compat.export`` on the
TorchScript route (the tracer bakes the branch) and on the torch.export route (draft capture bakes
it), both with the legacy ``dynamic_axes``; onnxruntime against eager at the example, at another
size on the example's branch, and on an input that takes the other branch. README "Data-dependent
branches" takes auto's preference from this table.

Rows (ratio): per model, the torch.export route's export time over the TorchScript route's, run
side by side (alternating) in one process; overall, the share of the other-size checks that match
eager, torch.export route over TorchScript route (>= 1: never worse).
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

from _timing import ROOT, alternate, cli, quiet, ratio

TITLE = "data-dependent branches baked: torch.export draft capture vs TorchScript tracer"
ROUTES = {"legacy": "TorchScript route (tracer bakes)", "dynamo": "torch.export route (draft bakes)"}


def verdict(case: Any, path: str, inputs: tuple[Any, ...]) -> str:
    """``ok``, or how the exported model differs from eager on ``inputs``."""
    import numpy as np
    import onnxruntime as ort
    import torch

    try:
        with torch.no_grad():
            want = case.make()(*inputs)
        want = want if isinstance(want, tuple) else (want,)
    except Exception as exc:  # noqa: BLE001 - eager refusing the input is a finding
        want = exc
    try:
        got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
            None, {n: t.numpy() for n, t in zip(case.names, inputs)})
    except Exception:  # noqa: BLE001
        return "both raise" if isinstance(want, Exception) else "onnxruntime raises"
    if isinstance(want, Exception):
        return f"eager raises {type(want).__name__}, the model returns"
    for g, w in zip(got, want):
        if g.shape != tuple(w.shape):
            return f"shape {tuple(g.shape)} vs eager {tuple(w.shape)}"
        if not np.allclose(g, w.numpy(), rtol=1e-4, atol=1e-5):
            return f"values differ (max {float(np.abs(g - w.numpy()).max()):.3g})"
    return "ok"


def _shown(result: dict[str, Any]) -> dict[str, Any]:
    _print_table(result)
    return result


def run(quick: bool = False) -> dict[str, Any]:
    import compat

    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    import baked_models

    rows, table, matches = [], {}, {r: 0 for r in ROUTES}
    with tempfile.TemporaryDirectory(prefix="bench-baked-") as tmp, quiet():
        for case in baked_models.CASES:
            paths = {r: os.path.join(tmp, f"{case.name}-{r}.onnx") for r in ROUTES}

            def export(route: str, case: Any = case, paths: dict[str, str] = paths) -> None:
                compat.export(case.make(), case.example(), paths[route], route=route,
                              input_names=case.names, dynamic_axes=case.axes)

            times = alternate({ROUTES[r]: (lambda r=r: export(r)) for r in ROUTES},
                              reps=1 if quick else 2, warmup=0)
            rows.append(ratio(times, ROUTES["dynamo"], ROUTES["legacy"],
                              f"export time, torch.export / TorchScript route: {case.name}"))
            table[case.name] = {}
            for route in ROUTES:
                checks = {label: verdict(case, paths[route], make())
                          for label, make in (("example", case.example), ("other size, same branch",
                                              case.same_branch), ("other branch", case.other_branch))}
                matches[route] += checks["other size, same branch"] == "ok"
                table[case.name][route] = checks
    n = len(baked_models.CASES)
    rows.append({"name": "other-size checks matching eager, torch.export / TorchScript route",
                 "ratio": round(matches["dynamo"] / max(matches["legacy"], 1), 4), "target": ">= 1",
                 "numerator": f"{matches['dynamo']} of {n} (torch.export)",
                 "denominator": f"{matches['legacy']} of {n} (TorchScript)", "reps": 1})
    return {"benchmark": "baked", "title": TITLE, "ratios": rows,
            "torch_export_never_worse": matches["dynamo"] >= matches["legacy"], "details": table}


def _print_table(result: dict[str, Any]) -> None:
    for name, routes in result["details"].items():
        for route, checks in routes.items():
            print(f"{name:16} {route:7} " + "; ".join(f"{k}: {v}" for k, v in checks.items()))


if __name__ == "__main__":
    cli(lambda quick=False: _shown(run(quick)), TITLE)
