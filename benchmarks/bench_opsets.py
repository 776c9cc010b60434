"""Which share of a model set reaches opsets 11/13/15/17 with parity, three ways side by side:

* ours: the torch.export route (built at opset 18) + compat's down-conversion (``dynamo.downconvert``),
* onnx: the same opset-18 model + ``onnx.version_converter.convert_version``,
* torchscript: the TorchScript exporter (``torch.onnx.export(..., dynamo=False)``) at that opset.

Parity: onnxruntime output equals eager torch (rtol 1e-3, atol 1e-4) at the example size and at
another size along the dynamic axes, and the model imports the asked opset. Ratios: ours over
the TorchScript exporter's share per opset (goal >= 1). No asserts.
Run: ``.venv/bin/python benchmarks/bench_opsets.py [--quick]``; ``run()`` returns the numbers.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

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


def _opset18(case: Case, model: nn.Module) -> Any:
    """The torch.export route's model at opset 18 (as an onnx_ir Model), or the error."""
    import dynamo
    from compat.request import ExportRequest

    req = ExportRequest(model=model, args=(case.example(),), input_names=("x",), output_names=("y",),
                        dynamic_axes={"x": case.axes}, opset_version=18,
                        given=frozenset({"dynamic_axes", "opset_version"}))
    with _quiet():
        return dynamo.export(req).program.model


def _ours(base: Any, opset: int) -> Any:
    import onnx_ir as ir

    from dynamo.downconvert import downconvert

    result = downconvert(base, opset, onnx_fallback=False)
    if not result.complete:
        raise RuntimeError(result.reason())
    return ir.to_proto(result.model)


def _onnx_converter(base: Any, opset: int) -> Any:
    import onnx.version_converter
    import onnx_ir as ir

    with _quiet():
        return onnx.version_converter.convert_version(ir.to_proto(base), opset)


def _torchscript(case: Case, model: nn.Module, opset: int) -> Any:
    import onnx

    buf = io.BytesIO()
    with _quiet():
        torch.onnx.export(model, (case.example(),), buf, dynamo=False, opset_version=opset,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": case.axes})
    return onnx.load_from_string(buf.getvalue())


def _parity(proto: Any, model: nn.Module, case: Case, opset: int) -> str | None:
    """None when ``proto`` is at ``opset`` and matches eager at two sizes; else why not."""
    from dynamo import parity

    got = {o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")}
    if got != {opset}:
        return f"opset {sorted(got)}"
    try:
        sess = parity.session(proto, quiet=True)
    except Exception as exc:  # noqa: BLE001 - any runtime rejection is "no parity"
        return f"onnxruntime rejects the model: {type(exc).__name__}"
    for x in (case.example(), case.other()):
        try:
            out = parity.run(sess, {"x": x})[0]
        except Exception as exc:  # noqa: BLE001
            return f"onnxruntime fails at {tuple(x.shape)}: {type(exc).__name__}"
        ref = parity.eager(model, (x,))[0]
        if out.shape != ref.shape or not np.allclose(out, ref, rtol=1e-3, atol=1e-4):
            return f"differs from eager at {tuple(x.shape)}"
    return None


def _attempt(make: Callable[[], Any], model: nn.Module, case: Case, opset: int) -> str | None:
    try:
        proto = make()
    except Exception as exc:  # noqa: BLE001 - a failed conversion/export is "no parity"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}: {first.rsplit('failed: ', 1)[-1][:100]}"
    return _parity(proto, model, case, opset)


def run(quick: bool = False) -> dict[str, Any]:
    """Share of the model set with parity per opset and way; ratios ours/torchscript per opset."""
    cases = [c for c in CASES if not quick or c.name in QUICK]
    failures: dict[str, dict[str, str]] = {}  # "way@opset" -> {model: why}
    passed = {(way, opset): 0 for way in WAYS for opset in OPSETS}
    seconds = dict.fromkeys(("torch_export_at_18", *WAYS), 0.0)
    start = time.perf_counter()
    for case in cases:
        torch.manual_seed(0)
        model = case.make().eval()
        t0 = time.perf_counter()
        try:
            base, base_error = _opset18(case, model), None
        except Exception as exc:  # noqa: BLE001
            base, base_error = None, f"torch.export route at 18: {type(exc).__name__}"
        seconds["torch_export_at_18"] += time.perf_counter() - t0
        for opset in OPSETS:
            makers = {
                "ours": functools.partial(_ours, base, opset),
                "onnx": functools.partial(_onnx_converter, base, opset),
                "torchscript": functools.partial(_torchscript, case, model, opset),
            }
            for way, make in makers.items():
                t0 = time.perf_counter()
                why = base_error if base is None and way != "torchscript" else _attempt(make, model, case, opset)
                seconds[way] += time.perf_counter() - t0
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
                       "target": ">= 1"})
    return {
        "models": [c.name for c in cases],
        "opsets": list(OPSETS),
        "shares": shares,
        "failures": failures,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
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
    print(f"  seconds {res['seconds']}, total {res['total_s']} s")


if __name__ == "__main__":
    main()
