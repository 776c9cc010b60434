"""Memory over many exports in one process: RSS growth per export of fresh ~32 MB models under
``compat.export`` against plain ``torch.onnx.export``, on each route.

Each side runs in its own fresh interpreter (RSS is process-wide, so the sides cannot share
one): one warm-up export (imports, caches), then ``N`` exports of fresh models, each dropped
after its export; after each, ``gc.collect()`` and glibc's ``malloc_trim`` so RSS counts what
is still referenced rather than what the allocator kept. The rows are ratios (compat / torch;
target <= 1.1) of the growth per export, and, without the ``gc.collect()`` (what a plain loop
sees: torch's own reference cycles keep a model or two until the collector runs), of the peak
growth; ``details`` has MiB per export and every RSS sample.
A side whose growth is under ``FLOOR_MIB`` per export counts as ``FLOOR_MIB`` (noise: a ratio of
two near-zero growths says nothing).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from _timing import cli

TITLE = "memory: RSS growth per export of fresh models, compat.export vs torch.onnx.export"
HERE = Path(__file__).resolve()
FLOOR_MIB = 1.0
SIDES = {
    "legacy": ("torch.onnx.export(dynamo=False)", "compat.export(route='legacy')"),
    "dynamo": ("torch.onnx.export(dynamo=True)", "compat.export(route='dynamo')"),
}


def _model(width: int = 1448, layers: int = 4) -> Any:
    """A fresh MLP of ``layers`` ``width`` x ``width`` Linear layers (4 x 8 MB by default: 32 MB)."""
    import torch

    blocks: list[Any] = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks).eval()


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise OSError("no VmRSS in /proc/self/status")


def _settle(collect: bool) -> float:
    import ctypes
    import gc

    if collect:
        gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: RSS includes what the allocator keeps
        pass
    return _rss_mib()


def side(who: str, route: str, n: int, folder: str, collect: bool) -> dict[str, Any]:
    """Run in a fresh interpreter: ``n`` exports of fresh models by ``who`` (torch|compat);
    ``collect``: a ``gc.collect()`` after each (else only what reference counting frees)."""
    import os
    import warnings

    import torch

    warnings.simplefilter("ignore")
    path = os.path.join(folder, f"{who}-{route}.onnx")
    x = (torch.randn(2, 1448),)
    if who == "torch":
        def export(model: Any) -> Any:
            return torch.onnx.export(model, x, path, dynamo=route == "dynamo", opset_version=18)
    else:
        import compat

        def export(model: Any) -> Any:
            return compat.export(model, x, path, route=route, opset_version=18)

    with open(os.devnull, "w") as null:
        saved = os.dup(1), os.dup(2)
        os.dup2(null.fileno(), 1)
        os.dup2(null.fileno(), 2)
        try:
            export(_model())  # warm-up: imports, registries, caches
            samples = [_settle(collect)]
            for _ in range(n):
                export(_model())  # the result and the model are dropped here
                samples.append(_settle(collect))
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
    return {"samples_mib": [round(s, 1) for s in samples],
            "growth_mib_per_export": round((samples[-1] - samples[0]) / n, 2),
            "peak_growth_mib": round(max(samples) - samples[0], 1)}


def _run_side(who: str, route: str, n: int, folder: str, collect: bool) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(HERE), "--side", who, route, str(n), folder, "gc" if collect else "nogc"],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{who} {route} side failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> dict[str, Any]:
    import tempfile

    n = 4 if quick else 8
    rows, details = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-memory-growth-") as folder:
        for route, (plain, ours) in SIDES.items():
            got = {"torch": _run_side("torch", route, n, folder, True),
                   "compat": _run_side("compat", route, n, folder, True)}
            growth = {who: max(r["growth_mib_per_export"], FLOOR_MIB) for who, r in got.items()}
            rows.append({
                "name": f"RSS growth per export, {route} route (gc.collect after each)",
                "ratio": round(growth["compat"] / growth["torch"], 3), "target": "<= 1.1",
                "numerator": ours, "denominator": plain, "reps": n,
            })
            loop = {"torch": _run_side("torch", route, n, folder, False),
                    "compat": _run_side("compat", route, n, folder, False)}
            peak = {who: max(r["peak_growth_mib"], FLOOR_MIB) for who, r in loop.items()}
            rows.append({
                "name": f"peak RSS growth over {n} exports, {route} route (no gc.collect)",
                "ratio": round(peak["compat"] / peak["torch"], 3), "target": "<= 1.1",
                "numerator": ours, "denominator": plain, "reps": n,
            })
            details[route] = {"gc.collect after each": {plain: got["torch"], ours: got["compat"]},
                              "no gc.collect": {plain: loop["torch"], ours: loop["compat"]}}
    return {"benchmark": "memory_growth", "title": TITLE, "ratios": rows, "floor_mib": FLOOR_MIB,
            "details": details}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--side":
        p = argparse.ArgumentParser()
        p.add_argument("--side", nargs=5, metavar=("WHO", "ROUTE", "N", "FOLDER", "GC"))
        who, route, count, where, collect = p.parse_args().side
        print(json.dumps(side(who, route, int(count), where, collect == "gc")))
    else:
        cli(run, TITLE)
