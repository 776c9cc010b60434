"""Which share of a model set reaches opsets 11/13/15/17 with parity, three ways side by side,
each writing the model to a file that is then loaded and run (the same file layout everywhere):

* ours: what the shim runs, ``compat.export(route="dynamo", opset_version=N)`` (the torch.export
  route builds at opset 18 and brings the model down with compat's down-conversion, onnx's
  converter as its fallback; an opset it cannot reach is written higher and warned as ONX002);
* onnx: ``compat.export(route="dynamo", opset_version=18)`` (the same route's model at 18) +
  ``onnx.version_converter.convert_version`` to N;
* torchscript: the TorchScript exporter (``torch.onnx.export(..., dynamo=False)``) at N.

Every way gets the same call: input/output names, ``dynamic_axes`` on the input, the opset.
Parity: onnxruntime output equals eager torch (rtol 1e-3, atol 1e-4) at the example size and at
another size along the dynamic axes, and the model imports the asked opset. Rows: numerator ours'
count of models with parity, denominator the TorchScript exporter's, per opset (goal >= 1). No
timing, no asserts. Run: ``.venv/bin/python benchmarks/bench_opsets.py [--quick]``; ``run()``
returns the numbers.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

OPSETS = (11, 13, 15, 17)
WAYS = ("ours", "onnx", "torchscript")


# --- the model set (torchvision is not installable here: its shapes, written by hand) ---------

class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.down(x))


class ResNetTiny(nn.Module):
    """ResNet-18 layout (stem, max-pool, basic blocks, global pool, fc), narrow."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int, act: type[nn.Module]) -> None:
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.block = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), act(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), act(),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return x + self.block(x) if self.use_res else self.block(x)


class MobileNetTiny(nn.Module):
    """MobileNetV2/V3 style: depthwise convs, ReLU6 and Hardswish, inverted residuals."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
            InvertedResidual(16, 16, 1, 2, nn.ReLU6), InvertedResidual(16, 24, 2, 4, nn.ReLU6),
            InvertedResidual(24, 24, 1, 4, nn.Hardswish), InvertedResidual(24, 40, 2, 4, nn.Hardswish))
        self.head = nn.Sequential(nn.Linear(40, 64), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(64, classes))

    def forward(self, x):
        return self.head(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


class ViTTiny(nn.Module):
    """Patch embedding, class token, position embedding, pre-norm encoder, GELU MLP, head."""

    def __init__(self, image: int = 32, patch: int = 8, d: int = 32, classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        tokens = self.embed(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(tokens.shape[0], -1, -1), tokens], dim=1) + self.pos
        return self.head(self.norm(self.encoder(tokens))[:, 0])


class TextEncoder(nn.Module):
    """Embedding + post-norm nn.TransformerEncoder + token classifier (BERT-style)."""

    def __init__(self, vocab: int = 100, d: int = 32) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(d, 5)

    def forward(self, ids):
        return self.out(self.encoder(self.emb(ids))).log_softmax(-1)


class Recurrent(nn.Module):
    def __init__(self, kind: type[nn.Module]) -> None:
        super().__init__()
        self.rnn = kind(12, 24, num_layers=2, batch_first=True)
        self.out = nn.Linear(24, 4)

    def forward(self, x):
        return self.out(self.rnn(x)[0])


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 64), nn.SiLU(),
                                 nn.Linear(64, 3))

    def forward(self, x):
        return self.net(x).softmax(-1)


@dataclass
class Case:
    name: str
    make: Callable[[], nn.Module]
    example: Callable[[], torch.Tensor]
    other: Callable[[], torch.Tensor]  # another size along the dynamic axes
    axes: dict[int, str]


def _img(n: int, h: int, w: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randn(n, 3, h, w)


CASES = (
    Case("mlp", Mlp, lambda: torch.randn(2, 20), lambda: torch.randn(7, 20), {0: "batch"}),
    Case("resnet", ResNetTiny, _img(2, 64, 64), _img(3, 96, 80), {0: "batch", 2: "h", 3: "w"}),
    Case("mobilenet", MobileNetTiny, _img(2, 64, 64), _img(1, 96, 80), {0: "batch", 2: "h", 3: "w"}),
    Case("vit", ViTTiny, _img(2, 32, 32), _img(5, 32, 32), {0: "batch"}),
    Case("text_encoder", TextEncoder, lambda: torch.randint(0, 100, (2, 9)), lambda: torch.randint(0, 100, (3, 14)),
         {0: "batch", 1: "seq"}),
    Case("gru", lambda: Recurrent(nn.GRU), lambda: torch.randn(2, 7, 12), lambda: torch.randn(3, 11, 12),
         {0: "batch", 1: "seq"}),
    Case("lstm", lambda: Recurrent(nn.LSTM), lambda: torch.randn(2, 7, 12), lambda: torch.randn(3, 11, 12),
         {0: "batch", 1: "seq"}),
)
QUICK = ("mlp", "resnet", "lstm")


# --- the three ways -------------------------------------------------------------------------

@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Exporter chatter off while measuring: warnings, torch's logs, and stdout/stderr down to
    the file descriptors (the TorchScript exporter prints graphs from C++)."""
    level = logging.root.manager.disable
    logging.disable(logging.WARNING)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "w") as null, warnings.catch_warnings(), \
                contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            warnings.simplefilter("ignore")
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        logging.disable(level)


def _options(case: Case, opset: int) -> dict[str, Any]:
    return {"input_names": ["x"], "output_names": ["y"], "dynamic_axes": {"x": case.axes}, "opset_version": opset}


def _shim(case: Case, model: nn.Module, opset: int, path: str) -> str:
    """``compat.export`` on the torch.export route at ``opset``, written to ``path``."""
    import compat

    with _quiet():
        compat.export(model, (case.example(),), path, route="dynamo", **_options(case, opset))
    return path


def _onnx_converter(base: str, opset: int, path: str) -> str:
    """The torch.export route's opset-18 file ``base`` through onnx's version converter."""
    import onnx.version_converter

    with _quiet():
        onnx.save(onnx.version_converter.convert_version(onnx.load(base), opset), path)
    return path


def _torchscript(case: Case, model: nn.Module, opset: int, path: str) -> str:
    with _quiet():
        torch.onnx.export(model, (case.example(),), path, dynamo=False, **_options(case, opset))
    return path


def _parity(path: str, model: nn.Module, case: Case, opset: int) -> str | None:
    """None when the model file ``path`` is at ``opset`` and matches eager at two sizes; else why not."""
    import onnx
    from _onnx import eager, run, session

    got = {o.version for o in onnx.load(path, load_external_data=False).opset_import if o.domain in ("", "ai.onnx")}
    if got != {opset}:
        return f"opset {sorted(got)}"
    try:
        sess = session(path)
    except Exception as exc:  # noqa: BLE001 - any runtime rejection is "no parity"
        return f"onnxruntime rejects the model: {type(exc).__name__}"
    for x in (case.example(), case.other()):
        try:
            out = run(sess, {"x": x})[0]
        except Exception as exc:  # noqa: BLE001
            return f"onnxruntime fails at {tuple(x.shape)}: {type(exc).__name__}"
        ref = eager(model, (x,))[0]
        if out.shape != ref.shape or not np.allclose(out, ref, rtol=1e-3, atol=1e-4):
            return f"differs from eager at {tuple(x.shape)}"
    return None


def _attempt(make: Callable[[], str], model: nn.Module, case: Case, opset: int) -> str | None:
    try:
        path = make()
    except Exception as exc:  # noqa: BLE001 - a failed conversion/export is "no parity"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {first.rsplit('failed: ', 1)[-1][:100]}"
    return _parity(path, model, case, opset)


def run(quick: bool = False) -> dict[str, Any]:
    """Share of the model set with parity per opset and way; ratios ours/torchscript per opset."""
    cases = [c for c in CASES if not quick or c.name in QUICK]
    failures: dict[str, dict[str, str]] = {}  # "way@opset" -> {model: why}
    passed = {(way, opset): 0 for way in WAYS for opset in OPSETS}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-opsets-") as tmp:
        for case in cases:
            torch.manual_seed(0)
            model = case.make().eval()
            base = os.path.join(tmp, f"{case.name}-18.onnx")
            try:
                _shim(case, model, 18, base)
                base_error = None
            except Exception as exc:  # noqa: BLE001
                base_error = f"torch.export route at 18: {type(exc).__name__}"
            for opset in OPSETS:
                out = os.path.join(tmp, f"{case.name}-{opset}")
                makers = {
                    "ours": functools.partial(_shim, case, model, opset, out + "-ours.onnx"),
                    "onnx": functools.partial(_onnx_converter, base, opset, out + "-onnx.onnx"),
                    "torchscript": functools.partial(_torchscript, case, model, opset, out + "-torchscript.onnx"),
                }
                for way, make in makers.items():
                    why = base_error if base_error and way == "onnx" else _attempt(make, model, case, opset)
                    if why is None:
                        passed[way, opset] += 1
                    else:
                        failures.setdefault(f"{way}@{opset}", {})[case.name] = why
    n = len(cases)
    shares = {f"opset{o}": {w: round(passed[w, o] / n, 3) for w in WAYS} for o in OPSETS}
    ratios = []
    for opset in OPSETS:
        ours, ts = passed["ours", opset], passed["torchscript", opset]
        ratio = ours / ts if ts else (1.0 if ours == 0 else float(ours))
        ratios.append({"name": f"parity_share_ours_over_torchscript@{opset}", "ratio": round(ratio, 3),
                       "target": ">= 1", "numerator": "ours: models with parity",
                       "denominator": "torchscript: models with parity", "counts": {"ours": ours, "torchscript": ts}})
    return {
        "models": [c.name for c in cases],
        "opsets": list(OPSETS),
        "shares": shares,
        "failures": failures,
        "total_s": round(time.perf_counter() - start, 1),
        "ratios": ratios,
        "ours_at_least_torchscript_every_opset": all(passed["ours", o] >= passed["torchscript", o] for o in OPSETS),
        "ours_beats_onnx_converter_every_opset": all(passed["ours", o] > passed["onnx", o] for o in OPSETS),
    }


def main() -> None:
    res = run(quick="--quick" in sys.argv)
    print(f"bench_opsets: {len(res['models'])} models {res['models']}, parity share per opset")
    print(f"  {'opset':<8}" + "".join(f"{w:>13}" for w in WAYS))
    for key, row in res["shares"].items():
        print(f"  {key:<8}" + "".join(f"{row[w]:>13.2f}" for w in WAYS))
    for r in res["ratios"]:
        print(f"  {r['name']:<44} {r['ratio']:>6.2f}  (target {r['target']})")
    for key, why in res["failures"].items():
        print(f"  no parity {key}: {why}")


if __name__ == "__main__":
    main()
