"""The torch.export route reaches opsets 11..17 with compat's down-conversion: real models exported
through ``compat.export(route="dynamo", opset_version=k)``, run by onnxruntime at the example size
and at other sizes along every dynamic axis, compared with eager torch."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
import route_parity as parity  # tests/helpers
import torch
import torch.nn.functional as F
from torch import nn

import compat
from compat.errors import OpsetNotReached
from compat.request import ExportRequest

#: every model at 11 (the most rewrites); 13/15/17 spread over the models to keep exports few
PAIRS = [(name, 11) for name in ("cnn", "detection", "transformer", "opsmix")] + [
    ("cnn", 13), ("detection", 15), ("transformer", 17), ("opsmix", 13), ("opsmix", 17)]


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.gap(self.pool(torch.relu(self.bn(self.conv(x))))), 1))


class DetectionHead(nn.Module):
    """FPN-style upsample + add, a YOLO-style head: Reshape, Sigmoid, Split, Concat, Resize."""

    def __init__(self, anchors: int = 2, classes: int = 3) -> None:
        super().__init__()
        self.a, self.c = anchors, classes
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.head = nn.Conv2d(8, anchors * (5 + classes), 1)

    def forward(self, x):
        p1 = F.relu(self.c1(x))
        p2 = F.relu(self.c2(p1))
        fused = p1 + F.interpolate(p2, scale_factor=2.0, mode="nearest")
        fused = fused + F.interpolate(p2, scale_factor=2.0, mode="bilinear", align_corners=False)
        n, _, h, w = fused.shape
        out = self.head(fused).view(n, self.a, 5 + self.c, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        box, obj, cls = out.split([4, 1, self.c], dim=-1)
        return torch.cat([box * 2.0 - 0.5, obj, cls], dim=-1).reshape(n, -1, 5 + self.c)


class OpsMix(nn.Module):
    """Reduce*, Squeeze/Unsqueeze, Softmax over a non-last axis, LayerNorm, GroupNorm, Mish,
    HardSwish, Pad, chunk, tril, Clip, Einsum."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.gn = nn.GroupNorm(2, 4)
        self.proj = nn.Linear(16, 16)

    def forward(self, x):  # x: (batch, seq, 16)
        h = self.proj(self.ln(x))
        s = h.softmax(dim=1) + F.log_softmax(h, dim=-1)
        r = h.sum(dim=1, keepdim=True) + h.mean(dim=-1, keepdim=True) + h.amax(dim=1, keepdim=True)
        a, b = h.chunk(2, dim=-1)
        m = torch.cat([F.mish(a), F.hardswish(b)], dim=-1).unsqueeze(1).squeeze(1)
        g = self.gn(h.reshape(h.shape[0], 4, -1)).reshape(h.shape)
        p = F.pad(h, (1, 1))[..., 1:-1]
        attn = torch.einsum("bsd,btd->bst", h, h).softmax(-1) @ h
        return s + r + m + g + p + torch.tril(h).clamp(-2.0, 2.0) + attn


CASES = {
    # name: (model factory, example, input dims, dynamic axes of x, other example shapes)
    "cnn": (SmallCNN, (2, 3, 16, 16), {0: "batch", 2: "h", 3: "w"}, [(5, 3, 16, 16), (2, 3, 24, 20)]),
    "detection": (DetectionHead, (1, 3, 16, 16), {0: "batch", 2: "h", 3: "w"}, [(3, 3, 16, 16), (1, 3, 32, 24)]),
    "transformer": (
        lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 1, enable_nested_tensor=False),
        (2, 7, 16), {0: "batch", 1: "seq"}, [(3, 7, 16), (2, 11, 16)]),
    "opsmix": (OpsMix, (2, 6, 16), {0: "batch", 1: "seq"}, [(4, 6, 16), (2, 9, 16)]),
}


def _export(model: nn.Module, example: torch.Tensor, axes: dict[int, str], opset: int, path: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (example,), path, route="dynamo", opset_version=opset,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": axes})
    return onnx.load(path), compat.last_outcome()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each (case, opset) exported once; shared by the tests below."""
    cache: dict[tuple[str, int], tuple[nn.Module, object, object]] = {}

    def get(name: str, opset: int):
        if (name, opset) not in cache:
            factory, shape, axes, _ = CASES[name]
            torch.manual_seed(0)
            model = factory().eval()
            path = str(tmp_path_factory.mktemp("downconvert") / f"{name}-{opset}.onnx")
            cache[name, opset] = (model, *_export(model, torch.randn(*shape), axes, opset, path))
        return cache[name, opset]

    return get


@pytest.mark.parametrize(("name", "opset"), PAIRS)
def test_model_reaches_opset_with_eager_numerics(exported, name, opset):
    model, proto, outcome = exported(name, opset)
    assert outcome.route == "dynamo"
    assert {o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")} == {opset}
    assert proto.ir_version == {11: 6, 13: 7, 15: 8, 17: 8}[opset]  # as the TorchScript exporter writes
    onnx.checker.check_model(proto)
    _, shape, _, others = CASES[name]
    sess = parity.session(proto)
    for size in (shape, *others):
        x = torch.randn(*size)
        np.testing.assert_allclose(parity.run(sess, {"x": x})[0], parity.eager(model, (x,))[0],
                                   rtol=1e-4, atol=1e-4, err_msg=f"{name} at opset {opset}, input {size}")
    done = [t.action for t in outcome.translations if t.option == "opset_version"]
    assert done and f"built at 18, converted to {opset} by compat's down-conversion" in done[0]


class GridSample(nn.Module):
    """GridSample exists from opset 16 only (no down-conversion: it has no older form)."""

    def forward(self, x, grid):
        return F.grid_sample(x, grid, align_corners=False)


def test_op_without_older_form_is_opset_not_reached_naming_the_op():
    import dynamo

    x, grid = torch.randn(1, 2, 5, 5), torch.rand(1, 3, 3, 2) * 2 - 1
    req = ExportRequest(model=GridSample(), args=(x, grid), input_names=("x", "grid"),
                        opset_version=15, given=frozenset({"opset_version"}))
    with pytest.raises(OpsetNotReached) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dynamo.export(req)
    err = info.value
    assert "GridSample has no opset-15 form" in str(err) and "TorchScript" not in str(err)
    assert (err.route, err.wanted, err.reached) == ("dynamo", 15, 16)
    # the program it carries is whole, at the lowest opset reached, and still computes the model
    reached = err.program.model_proto
    assert {o.version for o in reached.opset_import if o.domain == ""} == {16}
    np.testing.assert_allclose(parity.run(reached, {"x": x, "grid": grid})[0],
                               parity.eager(GridSample(), (x, grid))[0], rtol=1e-5, atol=1e-5)


class _Diagonal(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("ii->i", x) * 2  # an Einsum with no opset-11 form (a diagonal)


def test_the_ledger_names_the_operator_that_blocks_the_down_conversion(tmp_path):
    """Issue 35 item 6: the ledger said only "opset 11 not reachable"; it names the operator."""
    x = torch.randn(3, 3)
    proto, record = parity.compat_proto(_Diagonal(), (x,), tmp_path, "dynamo", opset_version=11)
    assert record["fallback_reason"] == "dynamo: opset 11 not reachable: Einsum has no opset-11 form"
    assert record["opset_written"] == 12
    np.testing.assert_allclose(parity.run(proto, {"x": x})[0], _Diagonal()(x).numpy(), rtol=1e-6)


class _SmallLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def test_auto_below_the_lowest_convertible_opset_skips_the_capture(tmp_path):
    """Issue 35 item 6: under auto at opset 9 the torch.export route captured the whole model
    before its down-conversion said opset 9 is out of reach; auto now decides that from the
    request and goes straight to the TorchScript route, saying why in the ledger."""
    torch.manual_seed(0)
    model, x = _SmallLinear().eval(), torch.randn(2, 4)
    proto, record = parity.compat_proto(model, (x,), tmp_path, "auto", opset_version=9,
                                        input_names=["x"], dynamic_axes={"x": {0: "n"}})
    assert record["route_taken"] == "legacy"
    assert record["fallback_reason"] == ("dynamo: opset 9 not reachable: compat's down-conversion "
                                         "writes opset 11 and up (decided before capture)")
    assert record["attempt_logs"] == {}  # no torch.export attempt was made (and failed)
    assert {o.version for o in proto.opset_import if o.domain == ""} == {9}
    for n in (2, 5):
        xn = torch.randn(n, 4)
        np.testing.assert_allclose(parity.run(proto, {"x": xn})[0], model(xn).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    # route="dynamo" still exports, at the lowest opset its down-conversion writes (ONX002)
    proto, record = parity.compat_proto(model, (x,), tmp_path / "dynamo", "dynamo", opset_version=9)
    assert record["route_taken"] == "dynamo" and record["opset_written"] == 11


class _Flip(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flip(0) * 2  # the TorchScript exporter has no aten::flip before opset 10


def test_auto_below_the_lowest_opset_still_delivers_when_torchscript_fails(tmp_path):
    """Deciding before capture never makes auto worse: when the TorchScript route fails too,
    the torch.export route runs after it and its model at opset 11 is delivered (ONX002), as
    when it ran first."""
    x = torch.randn(3, 2)
    proto, record = parity.compat_proto(_Flip(), (x,), tmp_path, "auto", opset_version=9,
                                        input_names=["x"])
    assert record["route_taken"] == "dynamo" and record["opset_written"] == 11
    assert "ONX002" in record["warnings"]
    assert record["fallback_reason"].startswith("legacy: TorchScript export failed")
    np.testing.assert_allclose(parity.run(proto, {"x": x})[0], _Flip()(x).numpy(), rtol=1e-6)


class _ClampInt(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, min=2, max=5) * 2  # Clip on int64: no opset-11 form


def test_auto_remembers_the_opset_a_model_reached_at_any_input_size(tmp_path):
    """Issue 35 item 6: a model whose torch.export route could not go below opset 12 (Clip on
    int64) paid a full capture again at every new input size; auto now
    remembers the opset reached and skips the capture below it, naming the operator."""
    model = _ClampInt()
    x = torch.arange(6).reshape(2, 3)
    _, first = parity.compat_proto(model, (x,), tmp_path / "a", "auto", opset_version=11,
                                    input_names=["x"])
    assert first["route_taken"] == "legacy"
    assert first["fallback_reason"] == "dynamo: opset 11 not reachable: Clip has no opset-11 form"
    assert "dynamo" in first["attempt_logs"]
    # another input size (not dynamic: the exact route memory's key differs)
    x2 = torch.arange(12).reshape(3, 4)
    proto, again = parity.compat_proto(model, (x2,), tmp_path / "b", "auto", opset_version=11,
                                       input_names=["x"])
    assert again["route_taken"] == "legacy" and again["attempt_logs"] == {}
    assert again["fallback_reason"] == (
        "dynamo: opset 11 not reachable (remembered: this model's torch.export route went no lower "
        "than opset 12; Clip has no opset-11 form)")
    np.testing.assert_array_equal(parity.run(proto, {"x": x2})[0], model(x2).numpy())
    # at the opset reached the route is tried again
    _, reached = parity.compat_proto(model, (x,), tmp_path / "c", "auto", opset_version=12,
                                      input_names=["x"])
    assert reached["route_taken"] == "dynamo" and reached["fallback_reason"] is None
