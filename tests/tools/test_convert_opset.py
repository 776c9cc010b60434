"""``compat.convert_opset`` and ``convert-opset`` on opset-18 models that plain torch 2.13's
torch.export route wrote: each converted model passes onnx's strict checks at its opset and gives
the original model's onnxruntime results at the example size and at another size."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm
import torch
import torch.nn.functional as F
from torch import nn

import compat
import route_parity as parity  # tests/helpers
from compat.errors import CompatFileNotFoundError, CompatTypeError, CompatValueError, OpsetNotConvertible

ROOT = Path(__file__).resolve().parents[2]


class Cnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(3, 2, padding=1, ceil_mode=True)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        h = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(F.adaptive_avg_pool2d(F.hardswish(h), 1).flatten(1)).softmax(-1)


class DetectionHead(nn.Module):
    """Upsample + add, a YOLO-style head: Reshape, Sigmoid, Split, Concat, Resize."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.head = nn.Conv2d(8, 2 * 8, 1)

    def forward(self, x):
        p1 = F.relu(self.c1(x))
        fused = p1 + F.interpolate(F.relu(self.c2(p1)), scale_factor=2.0, mode="nearest")
        n, _, h, w = fused.shape
        out = self.head(fused).view(n, 2, 8, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        box, obj, cls = out.split([4, 1, 3], dim=-1)
        return torch.cat([box * 2.0 - 0.5, obj, cls], dim=-1).reshape(n, -1, 8)


class Normed(nn.Module):
    """LayerNormalization (opset 17) and GroupNormalization (18) in one MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.gn = nn.GroupNorm(2, 4)
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(self.ln(x))
        return F.gelu(self.gn(h.reshape(h.shape[0], 4, -1)).reshape(h.shape)) + h.mean(-1, keepdim=True)


class GridSample(nn.Module):
    def forward(self, x, grid):
        return F.grid_sample(x, grid, align_corners=False)


MODELS = {
    # name: (factory, example shapes, dynamic axes per input, another size)
    "cnn": (Cnn, [(2, 3, 15, 17)], [{0: "batch", 2: "h", 3: "w"}], [(3, 3, 20, 13)]),
    "transformer": (lambda: nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True),
                    [(2, 7, 16)], [{0: "batch", 1: "seq"}], [(3, 11, 16)]),
    "detection": (DetectionHead, [(1, 3, 16, 16)], [{0: "batch", 2: "h", 3: "w"}], [(2, 3, 24, 32)]),
    "layernorm": (Normed, [(2, 6, 16)], [{0: "batch", 1: "seq"}], [(4, 9, 16)]),
    "gridsample": (GridSample, [(1, 2, 5, 5), (1, 3, 3, 2)], [{0: "batch"}, {0: "batch"}],
                   [(2, 2, 5, 5), (2, 3, 3, 2)]),
}
TARGETS = {"cnn": (11, 13, 17), "transformer": (11, 14, 17), "detection": (11, 13, 16),
           "layernorm": (11, 13, 16), "gridsample": (17, 16)}


def _inputs(shapes: list[tuple[int, ...]], seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(*s, generator=g) * 2 - 1 for s in shapes]


@pytest.fixture(scope="module")
def opset18(tmp_path_factory: pytest.TempPathFactory):
    """Each model exported once by plain torch (torch.onnx.export(dynamo=True), opset 18)."""
    cache: dict[str, tuple[nn.Module, Path]] = {}

    def get(name: str) -> tuple[nn.Module, Path]:
        if name not in cache:
            factory, shapes, axes, _ = MODELS[name]
            torch.manual_seed(0)
            model = factory().eval()
            path = tmp_path_factory.mktemp("opset18") / f"{name}.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, tuple(_inputs(shapes, 0)), str(path), dynamo=True, opset_version=18,
                                  input_names=[f"in{i}" for i in range(len(shapes))], dynamic_shapes=tuple(axes))
            cache[name] = (model, path)
        return cache[name]

    return get


def _feeds(name: str, seed: int, other: bool) -> dict[str, np.ndarray]:
    _, shapes, _, others = MODELS[name]
    return {f"in{i}": t.numpy() for i, t in enumerate(_inputs(others if other else shapes, seed))}


def _opsets(proto: onnx.ModelProto) -> set[int]:
    return {o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")}


@pytest.mark.parametrize("name", [n for n in MODELS if n != "gridsample"] + ["gridsample"])
def test_converted_model_matches_the_original(opset18, name: str) -> None:
    model, path = opset18(name)
    original = onnx.load(str(path))
    assert _opsets(original) == {18}
    reference = parity.session(original)
    for target in TARGETS[name]:
        converted = compat.convert_opset(str(path), target)
        assert _opsets(converted) == {target}
        onnx.checker.check_model(converted)
        onnx.shape_inference.infer_shapes(converted, check_type=True, strict_mode=True, data_prop=True)
        sess = parity.session(converted)
        for other in (False, True):
            feeds = _feeds(name, 1, other)
            for got, want in zip(parity.run(sess, feeds), parity.run(reference, feeds)):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                           err_msg=f"{name} at opset {target}, other size: {other}")
        example = [torch.from_numpy(v) for v in _feeds(name, 2, False).values()]
        np.testing.assert_allclose(parity.run(sess, _feeds(name, 2, False))[0],
                                   parity.eager(model, tuple(example))[0], rtol=1e-4, atol=1e-5)


def test_operator_without_older_form_is_named_with_the_lowest_opset(opset18, tmp_path: Path) -> None:
    _, path = opset18("gridsample")
    out = tmp_path / "gs13.onnx"
    with pytest.raises(OpsetNotConvertible) as info:
        compat.convert_opset(path, 13, out)
    err = info.value
    assert isinstance(err, compat.CompatError) and isinstance(err, ValueError)
    assert "GridSample has no opset-13 form" in str(err) and "lowest opset this model reaches is 16" in str(err)
    assert (err.ops, err.wanted, err.reached, err.source) == (("GridSample",), 13, 16, 18)
    assert not out.exists() and os.listdir(tmp_path) == []  # nothing written, no temp file left


def test_inputs_of_every_kind_and_the_given_model_unchanged(opset18, tmp_path: Path) -> None:
    _, path = opset18("layernorm")
    proto = onnx.load(str(path))
    before = proto.SerializeToString()
    model = ir.load(str(path))
    for given in (proto, model, str(path), path):
        converted = compat.convert_opset(given, 13)
        assert isinstance(converted, onnx.ModelProto) and _opsets(converted) == {13}
        assert converted.ir_version == 7  # the IR version onnx paired with opset 13
    assert proto.SerializeToString() == before and model.opset_imports[""] == 18
    # the model's own opset: returned unchanged (a copy), written when asked
    same = compat.convert_opset(proto, 18, tmp_path / "same.onnx")
    assert same is not proto and same.SerializeToString() == before
    assert _opsets(onnx.load(str(tmp_path / "same.onnx"))) == {18}


def test_out_is_written_atomically_with_external_data_as_saved(tmp_path: Path) -> None:
    """A model saved with external data is written with <out>.data beside <out>; its input
    files are untouched; the returned proto holds the weights in memory."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.Linear(64, 8)).eval()
    src = tmp_path / "src" / "m.onnx"
    src.parent.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(2, 64),), str(src), dynamo=True, opset_version=18,
                          external_data=True, input_names=["in0"])
    assert (src.parent / "m.onnx.data").is_file()
    inputs = {p.name: p.read_bytes() for p in src.parent.iterdir()}
    out = tmp_path / "dst" / "m13.onnx"
    out.parent.mkdir()
    returned = compat.convert_opset(src, 13, out)
    assert {p.name: p.read_bytes() for p in src.parent.iterdir()} == inputs
    assert sorted(os.listdir(out.parent)) == ["m13.onnx", "m13.onnx.data"]
    written = onnx.load(str(out), load_external_data=False)
    locations = {e.value for t in written.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"m13.onnx.data"} and _opsets(written) == {13}
    assert not any(t.external_data for t in returned.graph.initializer)
    x = {"in0": np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)}
    want = parity.run(parity.session(onnx.load(str(src))), x)[0]
    np.testing.assert_allclose(parity.run(parity.session(onnx.load(str(out))), x)[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(parity.run(parity.session(returned), x)[0], want, rtol=1e-5, atol=1e-5)
    # converted again into the same name: the pair is replaced, nothing else left behind
    compat.convert_opset(src, 11, out)
    assert sorted(os.listdir(out.parent)) == ["m13.onnx", "m13.onnx.data"]
    assert _opsets(onnx.load(str(out), load_external_data=False)) == {11}
    # in place, over the files its weights are read from
    returned = compat.convert_opset(src, 12, src)
    assert sorted(os.listdir(src.parent)) == ["m.onnx", "m.onnx.data"]
    for proto in (onnx.load(str(src)), returned):
        assert _opsets(proto) == {12}
        np.testing.assert_allclose(parity.run(parity.session(proto), x)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("args", "error", "names"), [
    (("PATH", "13"), CompatTypeError, "opset must be an int"),
    (("PATH", True), CompatTypeError, "opset must be an int"),
    (("PATH", 13.0), CompatTypeError, "opset must be an int"),
    (("PATH", 10), CompatValueError, "opset=10"),
    (("PATH", 19), CompatValueError, "opset=19: the model is at opset 18; convert_opset converts down only"),
    ((b"\x08\x07", 13), CompatTypeError, "model_or_path must be"),
    ((123, 13), CompatTypeError, "model_or_path must be"),
    (("MISSING", 13), CompatFileNotFoundError, "model_or_path: no such file"),
    (("NOT_ONNX", 13), CompatValueError, "is not an ONNX model"),
    (("PATH", 13, 5), CompatTypeError, "out must be a path"),
    (("PATH", 13, "NOFOLDER"), CompatFileNotFoundError, "out: the folder"),
    (("PATH", 13, "FOLDER"), CompatValueError, "is a folder"),
])
def test_bad_arguments_are_named_before_any_work(opset18, tmp_path: Path, args, error, names) -> None:
    _, path = opset18("layernorm")
    (tmp_path / "not.onnx").write_text("hello")
    subs = {"PATH": str(path), "MISSING": str(tmp_path / "missing.onnx"), "NOT_ONNX": str(tmp_path / "not.onnx"),
            "NOFOLDER": str(tmp_path / "no" / "x.onnx"), "FOLDER": str(tmp_path)}
    args = tuple(subs.get(a, a) if isinstance(a, str) else a for a in args)
    if len(args) == 2:
        args = (*args, str(tmp_path / "out.onnx"))
    with pytest.raises(error, match=names):
        compat.convert_opset(*args)
    assert sorted(os.listdir(tmp_path)) == ["not.onnx"]


def _cli(*args: str, argv0: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if argv0 is None:
        cmd = [sys.executable, "-m", "compat", "convert-opset", *args]
    else:
        code = (f"import sys; sys.argv[0] = {argv0!r}; from compat.__main__ import main; "
                "raise SystemExit(main())")
        cmd = [sys.executable, "-c", code, "convert-opset", *args]
    return warm_python.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_command_end_to_end(opset18, tmp_path: Path) -> None:
    _, path = opset18("detection")
    out = tmp_path / "det13.onnx"
    done = _cli(str(path), "--opset", "13", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{out}: opset 18, converted to 13 by compat's down-conversion")
    assert _opsets(onnx.load(str(out))) == {13}
    feeds = _feeds("detection", 3, True)
    np.testing.assert_allclose(parity.run(onnx.load(str(out)), feeds)[0],
                               parity.run(onnx.load(str(path)), feeds)[0], rtol=1e-4, atol=1e-5)
    # without -o: IN.opsetN.onnx beside IN (torch wrote IN.data: so is OUT.data), never the input itself
    folder = tmp_path / "copy"
    shutil.copytree(path.parent, folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert set(before) == {"detection.onnx", "detection.onnx.data"}
    assert _cli(str(folder / "detection.onnx"), "--opset", "11").returncode == 0
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert set(after) == {*before, "detection.opset11.onnx", "detection.opset11.onnx.data"}
    assert all(after[name] == data for name, data in before.items())
    assert _opsets(onnx.load(str(folder / "detection.opset11.onnx"))) == {11}


def test_command_exit_codes_and_messages(opset18, tmp_path: Path) -> None:
    _, grid = opset18("gridsample")
    failed = _cli(str(grid), "--opset", "13", "-o", str(tmp_path / "g.onnx"))
    assert failed.returncode == 1 and failed.stdout == ""
    assert "error: cannot convert" in failed.stderr and "GridSample has no opset-13 form" in failed.stderr
    assert f"convert-opset {grid} --opset 16" in failed.stderr  # what to run instead
    assert not (tmp_path / "g.onnx").exists()
    for args, text in ((["--opset", "13"], "the following arguments are required"),
                       ([str(grid), "--opset", "x"], "invalid int value"),
                       ([str(grid)], "--opset"),
                       ([str(grid), "--opset", "19"], "--opset 19: the model is at opset 18"),
                       ([str(tmp_path / "none.onnx"), "--opset", "13"], "IN.onnx: no such file")):
        usage = _cli(*args)
        assert usage.returncode == 2 and text in usage.stderr, (args, usage.stderr)
    helped = _cli("--help", argv0="/usr/bin/torch-onnx-compat")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: torch-onnx-compat convert-opset")
    assert _cli("--version").stdout == f"torch-onnx-compat {compat.__version__}\n"
