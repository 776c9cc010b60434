"""``python -m compat.migrate --check -j 2`` against a bare libcst parse of the same tree.

Generates (in a temp dir) a tree of Python files, about a third with legacy export code of the
kinds in LEGACY_PATTERNS.md, the rest plain torch / utility code, and prints wall times and their
ratio. No asserts. ``python benchmarks/bench_migrate.py [--files N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LEGACY = [
    '''import torch
import torch.onnx as tonnx
from torch.onnx import TrainingMode, OperatorExportTypes


def export_{i}(model, path):
    model.eval()
    dummy = torch.randn(1, 3, 224, 224)
    tonnx.export(model, dummy, path, True, False, TrainingMode.EVAL, ["images"], ["output"],
                 OperatorExportTypes.ONNX, 12, True,
                 dynamic_axes={{"images": {{0: "batch"}}, "output": {{0: "batch"}}}})
''',
    '''from torch.onnx import export as onnx_export
import torch


def convert_{i}(model, tokenizer, output, opset=11):
    inputs = tokenizer("hello", return_tensors="pt")
    onnx_export(
        model,
        (inputs["input_ids"], inputs["attention_mask"]),
        f=output,
        input_names=["input_ids", "attention_mask"],
        output_names=["logits"],
        dynamic_axes={{"input_ids": {{0: "batch", 1: "sequence"}}, "logits": {{0: "batch"}}}},
        do_constant_folding=True,
        use_external_data_format=False,
        enable_onnx_checker=True,
        opset_version=opset,
    )
''',
    '''import torch


class Exporter{i}:
    def __init__(self, **export_kwargs):
        self.kw = export_kwargs

    def run(self, model, x, path):
        torch.onnx.export(model, x, path, opset_version=13, **self.kw)


def main():
    Exporter{i}().run(Net(), torch.randn(2, 8), "m.onnx")
    export_model(Net(), torch.randn(2, 8), "w.onnx", dynamic_axes={{"x": [0]}})
''',
    '''import torch


def export_{i}(model, x):
    with torch.onnx.select_model_mode_for_export(model, torch.onnx.TrainingMode.EVAL):
        torch.onnx.utils.export(model, x, "m.onnx", training=torch.onnx.TrainingMode.TRAINING,
                                do_constant_folding=False)
    program = torch.onnx.dynamo_export(model, x)
    program.save("d.onnx")
''',
]

PLAIN = '''import os
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block{i}(nn.Module):
    """A residual block."""

    def __init__(self, channels: int = {c}) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.dropout(out, p=0.1, training=self.training)
        out = self.bn2(self.conv2(out))
        return F.relu(out + x)


def schedule_{i}(step: int, warmup: int = 100, total: int = 1000) -> float:
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def load_{i}(path: str):
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    state = torch.load(path, map_location="cpu")
    return {{k.replace("module.", ""): v for k, v in state.items()}}


def train_{i}(model, loader, opt, epochs: int = 3):
    model.train()
    for epoch in range(epochs):
        for batch, (x, y) in enumerate(loader):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if batch % 100 == 0:
                print(f"epoch {{epoch}} batch {{batch}} loss {{loss.item():.4f}}")
'''

ONNX_MENTION = '''

def describe_{i}():
    """Mentions onnx in a docstring only: exported elsewhere via tools/export_onnx.py."""
    return "onnx"
'''


def generate(root: str, files: int, seed: int = 0) -> list[str]:
    """Write the tree; returns the file paths."""
    rnd = random.Random(seed)
    paths = []
    for i in range(files):
        folder = os.path.join(root, f"pkg{i % 40}", f"sub{i % 7}")
        os.makedirs(folder, exist_ok=True)
        kind = i % 3
        if kind == 0:
            body = LEGACY[rnd.randrange(len(LEGACY))].format(i=i)
            body += PLAIN.format(i=i, c=rnd.choice([16, 32, 64]))
        else:
            body = PLAIN.format(i=i, c=rnd.choice([16, 32, 64]))
            if i % 10 == 1:
                body += ONNX_MENTION.format(i=i)
        path = os.path.join(folder, f"mod_{i}.py")
        with open(path, "w") as fh:
            fh.write(body)
        paths.append(path)
    return paths


def _parse_chunk(paths: list[str]) -> int:
    import libcst as cst

    for p in paths:
        with open(p, "rb") as fh:
            cst.parse_module(fh.read())
    return len(paths)


def bare_parse(paths: list[str], jobs: int = 2) -> float:
    """Wall time of parsing every file with libcst in ``jobs`` processes."""
    t0 = time.perf_counter()
    size = max(1, len(paths) // (jobs * 8))
    with cf.ProcessPoolExecutor(max_workers=jobs) as pool:
        sum(pool.map(_parse_chunk, [paths[i:i + size] for i in range(0, len(paths), size)]))
    return time.perf_counter() - t0


def migrate_check(root: str, jobs: int = 2) -> tuple[float, int, int]:
    """Wall time of ``python -m compat.migrate --check -j N`` (a fresh process, as in CI)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "compat.migrate", "--check", "--no-progress", "-j", str(jobs),
         "--output-format", "json", root], capture_output=True, text=True, env=env, cwd=root, check=False,
    )
    wall = time.perf_counter() - t0
    findings = len(json.loads(proc.stdout)) if proc.stdout.strip().startswith("[") else -1
    return wall, proc.returncode, findings


def run(files: int = 4000) -> dict:
    """Generate, time both, return the figures."""
    with tempfile.TemporaryDirectory(prefix="bench-migrate-") as root:
        paths = generate(root, files)
        check_s, rc, findings = migrate_check(root)
        parse_s = bare_parse(paths)
    return {
        "files": files,
        "files_with_legacy_export": (files + 2) // 3,
        "migrate_check_s": round(check_s, 3),
        "migrate_exit_code": rc,
        "findings": findings,
        "bare_libcst_parse_s": round(parse_s, 3),
        "ratio_check_over_parse": round(check_s / parse_s, 3) if parse_s else None,
        "jobs": 2,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    res = run(args.files)
    print(f"compat.migrate --check -j 2 on {res['files']} files: {res['migrate_check_s']:.2f} s "
          f"({res['findings']} findings, exit {res['migrate_exit_code']})")
    print(f"bare libcst parse, 2 processes:           {res['bare_libcst_parse_s']:.2f} s")
    print(f"ratio check/parse: {res['ratio_check_over_parse']:.3f} (below 1: check is faster)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
