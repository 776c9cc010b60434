"""Side-by-side timing for the benchmarks: alternate the contenders, compare medians, never quote
one absolute time on its own.

Every timed benchmark goes through ``alternate`` (the one place the interleaving and the order
reversal live) and reports ``ratio`` rows: median(numerator) / median(denominator) of runs that
alternated in this process. ``layout`` tells what a side wrote, so a benchmark can show that both
sides of a ratio wrote the same files at the same opset.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def alternate(contenders: Mapping[str, Callable[[], Any]], reps: int, warmup: int = 1) -> dict[str, list[float]]:
    """Run each contender ``reps`` times, interleaved in rounds: every round runs each contender
    once, and every other round runs them in reverse order, so no side always runs first (or right
    after the same neighbour). ``warmup`` untimed rounds come first. Returns the seconds of every
    timed run per contender."""
    names = list(contenders)
    for _ in range(warmup):
        for n in names:
            contenders[n]()
    # timing starts on a quiet disk: the writeback of what earlier rows or benchmarks wrote
    # (gigabytes after a large model's row) would land on some runs and not others
    os.sync()
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(reps):
        for n in (names if i % 2 == 0 else names[::-1]):
            t = time.perf_counter()
            contenders[n]()
            times[n].append(time.perf_counter() - t)
    return times


def ratio(times: Mapping[str, list[float]], numerator: str, denominator: str, name: str,
          target: str | None = None) -> dict[str, Any]:
    """One result row: median(numerator) / median(denominator)."""
    num, den = statistics.median(times[numerator]), statistics.median(times[denominator])
    return {
        "name": name, "ratio": round(num / den, 4), "target": target,
        "numerator": numerator, "denominator": denominator, "reps": len(times[numerator]),
        "median_s": {numerator: num, denominator: den},
    }


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence warnings and torch's export chatter (logs and prints) while timing."""
    with warnings.catch_warnings(), open(os.devnull, "w") as null, \
            contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        warnings.simplefilter("ignore")
        previous = logging.root.manager.disable
        logging.disable(logging.CRITICAL)
        try:
            yield
        finally:
            logging.disable(previous)


def convnet(blocks: int = 6, width: int = 32, torchscript_only: bool = False) -> Any:
    """A small CNN (``blocks`` Conv-BN-ReLU); with ``torchscript_only`` its forward refuses
    torch.export's capture (a stand-in for what torch.export cannot capture; a data-dependent
    branch no longer is one: the torch.export route bakes it), so only the TorchScript tracer
    exports it."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = []
            for i in range(blocks):
                layers += [nn.Conv2d(3 if i == 0 else width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
            self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.body(x)
            if torchscript_only and torch.compiler.is_exporting():
                raise NotImplementedError("captured by the TorchScript tracer only")
            return y

    torch.manual_seed(0)
    return Net().eval()


@contextlib.contextmanager
def cache_dir(path: Any) -> Iterator[None]:
    """Route memory in ``path`` (a private cache, so a user's own memory is neither used nor
    touched); the previous setting is restored."""
    name = "TORCH_ONNX_COMPAT_CACHE_DIR"
    saved = os.environ.get(name)
    os.environ[name] = str(path)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def layout(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What an export to ``path`` left on disk: the file names it wrote (the model and any
    external-data files beside it) and the default-domain opset the model imports."""
    import onnx

    path = Path(path)
    files = sorted(p.name for p in path.parent.iterdir() if p.name == path.name or p.name.startswith(path.name + "."))
    imports = onnx.load(str(path), load_external_data=False).opset_import
    opset = next((i.version for i in imports if i.domain in ("", "ai.onnx")), None)
    return {"files": [f.replace(path.name, "<f>", 1) for f in files], "opset": opset}


def same_layout(written: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> bool:
    """True when, in every group of ``written`` (group -> side -> ``layout``), all sides wrote the
    same files at the same opset."""
    return all(len({(tuple(v["files"]), v["opset"]) for v in sides.values()}) == 1 for sides in written.values())


def print_rows(title: str, rows: list[dict[str, Any]], stream: Any = None) -> None:
    stream = stream or sys.stdout
    print(f"\n{title}", file=stream)
    for r in rows:
        target = f"  (target {r['target']})" if r.get("target") else ""
        print(f"  {r['name']:<58} {r['ratio']:>7.3f}{target}  [{r['numerator']} / {r['denominator']}, "
              f"{r['reps']} alternating runs]", file=stream)


def cli(run: Callable[..., dict[str, Any]], title: str) -> None:
    """``python benchmarks/bench_x.py [--quick] [--json PATH]``."""
    p = argparse.ArgumentParser(description=title)
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    ns = p.parse_args()
    result = run(quick=ns.quick)
    print_rows(title, result["ratios"])
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=2) + "\n")
