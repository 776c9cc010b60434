"""``python -m compat.migrate --check -j 2`` against a bare parse of the files it parses.

Generates (in a temp dir) a tree of Python files, about a third with legacy export code of the
kinds in LEGACY_PATTERNS.md, the rest plain torch / utility code. The check reads every file and
parses those that pass its byte prefilter (a catalog token in the bytes) with the stdlib ``ast``
(libcst only for fixes, which ``--check`` does not make). The floor does the same work minus the
analysis: a fresh Python process (as the check is, as in CI) reading every file in the check's
chunks over 2 worker processes, applying the same prefilter and ``ast``-parsing the files that
pass. The two alternate in one benchmark process, order reversed every other round.

Rows (ratio of medians): numerator ``compat.migrate --check -j 2``, denominator that floor on the
same tree: what the analysis costs over the parse it needs; once on the generated tree, once on
real third-party code (the Python files of mmdeploy, mmcv-lite, yolov5 and piper-tts wheels, eight
copies: about 4,700 files), whose details also give the check's median time. No asserts.
``python benchmarks/bench_migrate.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import zipfile
from typing import Any

from _timing import ROOT, alternate, cli, ratio

TITLE = "compat.migrate --check / a bare parse of the files it parses (ratio of medians)"
CHECK = "compat.migrate --check -j 2"
FLOOR = "prefilter + ast parse, same files, 2 processes"
JOBS = 2

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
    """Read every file of ``paths``; ``ast``-parse those passing the rewriter's byte prefilter."""
    import ast

    from compat.catalog import prefilter_tokens

    tokens = prefilter_tokens()
    parsed = 0
    for p in paths:
        with open(p, "rb") as fh:
            data = fh.read()
        if any(tok in data for tok in tokens):
            ast.parse(data.decode("utf-8"))
            parsed += 1
    return parsed


def bare_parse(root: str, jobs: int = JOBS) -> int:
    """The floor, in this process: the tree's ``.py`` files in the rewriter's chunks over
    ``jobs`` processes; returns how many files were parsed."""
    paths = sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names if f.endswith(".py"))
    size = max(8, len(paths) // (jobs * 8))  # migration.cli.run_files's chunking
    chunks = [paths[i:i + size] for i in range(0, len(paths), size)]
    with cf.ProcessPoolExecutor(max_workers=jobs) as pool:
        return sum(pool.map(_parse_chunk, chunks))


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def migrate_check(root: str, jobs: int = JOBS) -> subprocess.CompletedProcess[str]:
    """``python -m compat.migrate --check -j N`` on ``root`` (a fresh process, as in CI)."""
    return subprocess.run(
        [sys.executable, "-m", "compat.migrate", "--check", "--no-progress", "-j", str(jobs),
         root], capture_output=True, text=True, env=_env(), cwd=root, check=False,
    )


def parse_process(root: str) -> subprocess.CompletedProcess[str]:
    """``bare_parse`` in a fresh process, started like the check."""
    return subprocess.run([sys.executable, os.path.abspath(__file__), "--parse", root],
                          capture_output=True, text=True, env=_env(), cwd=root, check=True)


# Real third-party code: the Python files of these wheels (pip downloads them once into
# benchmarks/results/, which git ignores), copied COPIES times: about 4,700 files, the size of
# the tree issue 35 measured (mmdeploy, mmcv, yolov5, piper, four copies of their repositories).
REAL_WHEELS = ("mmdeploy==1.3.1", "mmcv-lite==2.2.0", "yolov5==7.0.14", "piper-tts==1.8.0")
COPIES = 8
WHEELS = ROOT / "benchmarks" / "results" / "real-code-wheels"


def real_tree(root: str) -> int | None:
    """Write the real-code tree under ``root``; its file count, or None without the wheels."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    if len(list(WHEELS.glob("*.whl"))) < len(REAL_WHEELS):
        got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                              "-d", str(WHEELS), *REAL_WHEELS], capture_output=True, check=False)
        if got.returncode != 0:
            return None
    count = 0
    for wheel in sorted(WHEELS.glob("*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist() if m.endswith(".py")]
            for copy in range(COPIES):
                dest = os.path.join(root, f"copy{copy}", wheel.name.split("-")[0])
                zf.extractall(dest, members)
                count += len(members)
    return count


def _measure(root: str, reps: int) -> tuple[dict[str, list[float]], int, int, int]:
    check = migrate_check(root)
    # the default (text) output, as the issue measured: --output-format json also computes each
    # fixable file's fix, for ruff's fix.edits
    found = re.search(r"Found (\d+) finding", check.stdout)
    findings = int(found.group(1)) if found else 0
    parsed = int(parse_process(root).stdout)
    times = alternate({CHECK: lambda: migrate_check(root), FLOOR: lambda: parse_process(root)},
                      reps=reps, warmup=0)
    return times, parsed, findings, check.returncode


def run(quick: bool = False, files: int | None = None) -> dict[str, Any]:
    """Generate the tree, alternate the check and the floor; the ratio of medians. Then the same
    on the real-code tree (skipped, with a note, when its wheels cannot be downloaded)."""
    files = files or (800 if quick else 2000)
    reps = 3 if quick else 5
    with tempfile.TemporaryDirectory(prefix="bench-migrate-") as root:
        generate(root, files)
        times, parsed, findings, code = _measure(root, reps)
    rows = [ratio(times, CHECK, FLOOR, f"check / prefilter + ast parse of the same files, {files} files")]
    details: dict[str, Any] = {
        "files": files, "files_parsed": parsed, "files_with_legacy_export": (files + 2) // 3,
        "migrate_exit_code": code, "findings": findings, "jobs": JOBS}
    with tempfile.TemporaryDirectory(prefix="bench-migrate-real-") as root:
        real = real_tree(root)
        if real is None:
            details["real_code"] = "skipped: the wheels could not be downloaded"
        else:
            times, parsed, findings, code = _measure(root, reps)
            rows.append(ratio(times, CHECK, FLOOR, f"check / the same floor, real code "
                                                   f"({', '.join(REAL_WHEELS)}; {real} files)"))
            details["real_code"] = {"files": real, "files_parsed": parsed, "findings": findings,
                                    "migrate_exit_code": code,
                                    "check_median_s": statistics.median(times[CHECK])}
    return {"benchmark": "migrate", "title": TITLE, "ratios": rows, "details": details}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--parse"]:
        print(bare_parse(sys.argv[2]))
    else:
        cli(run, TITLE)
