"""Data-dependent branches on the torch.export route (issue 19 item 1).

torch.export stops at a guard on tensor values; the route then captures with
``torch.export.draft_export``, which keeps the branch the example took, as the TorchScript tracer
did. Each baked place is in the ledger (``baked``: file, line, source), in one ONX003 warning at
the call line, and in ``compat report``; onnxruntime matches eager at the example and at another
size on the same branch.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest
import torch

import baked_models  # tests/helpers
import compat
import route_parity as parity  # tests/helpers
from compat.errors import ExportFailed
from dynamo import capture, draft_ops, torch_internals

#: the models issue 19 names: `if x.mean() > 0:`, torchvision's batched_nms idiom, Piper's VITS
#: transforms assert, a duration-driven output length
ISSUE_CASES = ("mean_gate", "batched_nms", "vits_assert", "duration_length")


def _export(case: baked_models.Case, tmp_path, monkeypatch, route: str = "dynamo"):
    """Export ``case`` through compat with a ledger; (ONNX path, record, ONX003 warnings, call line)."""
    book, out = tmp_path / "ledger.jsonl", tmp_path / f"{case.name}.onnx"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        compat.export(case.make(), case.example(), str(out), route=route, input_names=case.names,
                      dynamic_axes=case.axes)
    (record,) = [json.loads(t) for t in book.read_text().splitlines()]
    onx003 = [w for w in caught if getattr(w.message, "code", "") == "ONX003"]
    return out, record, onx003, line


def _matches_eager(case: baked_models.Case, path, inputs: tuple) -> None:
    got = parity.run(parity.session(_load(path)), dict(zip(case.names, inputs)))
    want = parity.eager(case.make(), inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _load(path):
    import onnx

    return onnx.load(str(path))


@pytest.mark.parametrize("name", ISSUE_CASES)
def test_branch_is_baked_recorded_and_exact_on_its_branch(name, tmp_path, monkeypatch):
    case = baked_models.BY_NAME[name]
    out, record, onx003, line = _export(case, tmp_path, monkeypatch)
    assert record["status"] == "ok" and record["route_taken"] == "dynamo"
    # every place torch.export stopped at is in the ledger, with the model file, line and source
    helpers_file = os.path.abspath(baked_models.__file__)
    assert {b["source"] for b in record["baked"]} == set(case.baked)
    source = open(helpers_file, encoding="utf-8").read().splitlines()
    for place in record["baked"]:
        assert place["file"] == helpers_file
        assert source[place["line"] - 1].strip() == place["source"]
        assert " -> " in place["guard"]  # what the example's values made of the guard
    # one warning, at the call line, naming the places; its code is in the record
    (warning,) = onx003
    assert warning.filename == __file__ and warning.lineno == line
    assert all(f"baked_models.py:{b['line']}" in str(warning.message) for b in record["baked"])
    assert record["warnings"].count("ONX003") == 1
    # the exported model is right at the example and at another size on the same branch
    _matches_eager(case, out, case.example())
    _matches_eager(case, out, case.same_branch())


def test_other_branch_gets_the_examples_branch_like_the_tracer(tmp_path, monkeypatch):
    case = baked_models.BY_NAME["mean_gate"]
    out, record, _, _ = _export(case, tmp_path, monkeypatch)
    (x,) = case.other_branch()
    got = parity.run(parity.session(_load(out)), {"x": x})[0]
    np.testing.assert_allclose(got, (x * 2).numpy())  # the example's branch, not eager's
    assert not np.allclose(got, case.make()(x).numpy())


class WeightGate(torch.nn.Module):
    """A guard that reads a weight: torch 2.13's draft_export decides it on uninitialized memory
    unless the capture copies parameters' values (docs/upstream/draft-export-parameter-values.md)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.full((3,), 2.0))

    def forward(self, x):
        s = (self.scale * x).sum()
        if 1 < s < 100:  # about 9 at the example; garbage lands outside
            return x + 1
        return x - 1


@pytest.mark.parametrize("attempt", range(3))
def test_a_guard_on_a_weight_is_baked_as_eager_takes_it(attempt, tmp_path):
    x = torch.full((2, 3), 0.75)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(WeightGate(), (x,), str(tmp_path / "m.onnx"), route="dynamo", input_names=["x"])
    (place,) = compat.last_outcome().baked
    assert place["guard"].endswith("-> True")
    np.testing.assert_allclose(parity.run(_load(tmp_path / "m.onnx"), {"x": x})[0], (x + 1).numpy())


def test_auto_prefers_the_torch_export_bake(tmp_path, monkeypatch):
    """README "Data-dependent branches": in auto mode the torch.export route's draft capture
    wins over the TorchScript fallback (measured in benchmarks/bench_baked.py)."""
    case = baked_models.BY_NAME["gated_encoder"]
    out, record, onx003, _ = _export(case, tmp_path, monkeypatch, route="auto")
    assert record["route_taken"] == "dynamo" and record["fallback_reason"] is None
    assert [b["source"] for b in record["baked"]] == case.baked and len(onx003) == 1
    # where the TorchScript route bakes the example's batch and sequence into Reshape nodes
    _matches_eager(case, out, case.same_branch())


def test_report_lists_the_baked_places(tmp_path, monkeypatch):
    case = baked_models.BY_NAME["batched_nms"]
    _, record, _, _ = _export(case, tmp_path, monkeypatch)
    book = str(tmp_path / "ledger.jsonl")
    report = subprocess.run([sys.executable, "-m", "compat", "report", book, "--format", "json"],
                            capture_output=True, text=True, timeout=600, check=True)
    baked = json.loads(report.stdout)["baked"]
    assert {(b["file"], b["line"], b["source"]) for b in baked} == {
        (p["file"], p["line"], p["source"]) for p in record["baked"]}
    assert all(b["route"] == "dynamo" and b["calls"] == 1 for b in baked)
    markdown = subprocess.run([sys.executable, "-m", "compat", "report", book], capture_output=True,
                              text=True, timeout=600, check=True).stdout
    section = markdown.split("### Branches and values baked")[1].split("###")[0]
    assert "`if boxes.numel() == 0:`" in section and "`if boxes.numel() > 4000:`" in section
    page = subprocess.run([sys.executable, "-m", "compat", "report", book, "--format", "html"],
                          capture_output=True, text=True, timeout=600, check=True).stdout
    assert '<section id="baked">' in page and "if boxes.numel() == 0:" in page


class BranchThenNumpy(torch.nn.Module):
    """A branch on data whose taken side reads tensor values in numpy: draft_export cannot run
    it on fake tensors."""

    def forward(self, x):
        if x.mean() > 0:
            return x * float(x.detach().numpy().max())
        return x - 1


def test_failed_draft_capture_leaves_the_guard_failure_and_says_why(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ExportFailed) as err:
            compat.export(BranchThenNumpy(), (torch.rand(2, 3),), str(tmp_path / "m.onnx"),
                          route="dynamo")
    failure = err.value.failures["dynamo"]
    assert failure.reason == "data-dependent control flow"
    assert "`if x.mean() > 0:`" in failure.where and "torch.cond" in failure.where
    assert any("draft_export failed too" in n for n in getattr(failure.cause, "__notes__", []))
    assert os.listdir(tmp_path) == []


def test_draft_trace_log_is_not_left_in_the_temp_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    case = baked_models.BY_NAME["mean_gate"]
    program = torch_internals.draft_export(case.make(), case.example(), {}, None,
                                           ops=draft_ops.draft_ops)
    assert [kind for kind, _ in torch_internals.draft_failures(program)] == ["DATA_DEPENDENT_ERROR"]
    logs = [f for _, _, files in os.walk(tmp_path) for f in files]
    assert logs == []


def test_draft_pieces_are_probed():
    from compat.errors import TorchInternalsMoved

    assert torch_internals.has_draft_capture()
    with pytest.raises(TorchInternalsMoved, match="_report"):
        torch_internals.draft_failures(object())  # a program without draft_export's report


def test_axis_names_become_dims_for_draft_export():
    dims = capture.export_dims({"x": {0: "batch", 1: torch.export.Dim.AUTO}, "y": [None, "t"]})
    assert dims == {"x": {0: torch.export.Dim.DYNAMIC, 1: torch.export.Dim.AUTO},
                    "y": [None, torch.export.Dim.DYNAMIC]}


class AspectBranch(torch.nn.Module):
    """torchvision's detection transform reads the image's sizes as values (``torch.tensor(
    x.shape[-2:])``) and decides by their ratio; here a branch on it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        im_shape = torch.tensor(x.shape[-2:])
        if im_shape[0] * 10 > im_shape[1] * 7:
            return x.sigmoid()
        return x.tanh()


def test_a_bake_on_the_axes_ratio_is_found_off_the_example_proportions(tmp_path):
    """The probes one size larger and at half size keep the example's proportions, so a branch
    on the axes' ratio takes the example's way there: after a bake, the acceptance check also
    probes the axes at unequal fractions (torchvision's Faster R-CNN: ScatterND fails in
    onnxruntime at an image of other proportions), so route='dynamo' refuses the model by name."""
    with pytest.raises(ExportFailed, match=r"differs from eager .* at h=20, w=37 \(example h=40, w=50\)"):
        compat.export(AspectBranch().eval(), (torch.rand(3, 40, 50),), str(tmp_path / "m.onnx"),
                      route="dynamo", input_names=["x"], dynamic_axes={"x": {1: "h", 2: "w"}})
    assert not (tmp_path / "m.onnx").exists()


class MaskedSpline(torch.nn.Module):
    """Piper's VITS spline: the values inside the interval picked by a 2-D mask, a domain check on
    them (the data-dependent branch), only they transformed."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inside = (x >= -1) & (x <= 1)
        y = x[inside]
        if torch.min(y) < -2:
            raise ValueError("outside the interval")
        out = x.clone()
        out[inside] = y * 0.5 + y ** 3 * 0.1
        return out


def test_a_two_dimensional_mask_index_is_draft_captured(tmp_path, monkeypatch):
    """torch's draft_export fails on ``x[mask]`` with a 2-D mask (PendingUnbackedSymbolNotFound,
    docs/upstream/draft-export-bool-mask-index.md); the capture indexes it flattened, so the
    model exports with the branch baked at its line and matches eager at other sizes, where
    another count of values is inside the interval."""
    case = baked_models.Case("masked_spline", lambda: MaskedSpline().eval(), ["x"], {"x": {0: "b", 1: "n"}},
                             baked_models._seeded(lambda: (torch.randn(4, 6),), 1),
                             baked_models._seeded(lambda: (torch.randn(7, 6),), 2),
                             baked_models._seeded(lambda: (torch.randn(3, 11) * 3,), 3))
    out, record, onx003, _ = _export(case, tmp_path, monkeypatch)
    assert [b["source"] for b in record["baked"]] == ["if torch.min(y) < -2:"]
    assert record["baked"][0]["file"] == __file__ and len(onx003) == 1
    for inputs in (case.example(), case.same_branch(), case.other_branch()):
        _matches_eager(case, out, inputs)


def test_tensors_are_no_sequences_after_a_draft_capture():
    """auto falls back to the TorchScript route in the same process after a draft capture, and
    its symbolics build ``torch.tensor([<0-d tensor>])``. Assigning ``torch.Tensor.__getitem__``
    (even putting it back) leaves CPython's sequence slot set, and that raises "len() of a 0-d
    tensor" (Piper's VITS fell back to a failing TorchScript route so): the capture's mask
    indexing is a TorchFunctionMode and touches no type."""
    from dynamo import torch_internals

    torch_internals.draft_export(MaskedSpline().eval(), (torch.randn(4, 6),), None, None,
                                 ops=draft_ops.draft_ops)
    assert "__getitem__" not in vars(torch.Tensor)
    assert torch.equal(torch.tensor([torch.tensor(3)]), torch.tensor([3]))


class TopkAnchors(torch.nn.Module):
    """torchvision FCOS/RetinaNet post-processing: the indices kept, divided by the class count
    (floor division of a data-dependent size), behind a data-dependent branch."""

    def forward(self, scores: torch.Tensor) -> tuple[torch.Tensor, ...]:
        keep = torch.where(scores > 0.5)[0] - 7
        if keep.numel() > 4000:
            keep = keep[:4000]
        return (torch.div(keep, 5, rounding_mode="floor"), keep // -3,
                torch.floor_divide(keep, torch.tensor(4)), keep.div(2, rounding_mode="floor"), keep % 5)


def test_integer_floor_division_of_a_data_dependent_size_is_draft_captured(tmp_path, monkeypatch):
    """torch's draft_export fails on it (docs/upstream/draft-export-integer-floor-division.md);
    the capture computes it from truncating division and fmod, equal to eager for negative
    values and divisors too, at other sizes and counts."""
    case = baked_models.Case("topk_anchors", lambda: TopkAnchors().eval(), ["scores"], {"scores": {0: "n"}},
                             baked_models._seeded(lambda: (torch.rand(50),), 1),
                             baked_models._seeded(lambda: (torch.rand(90),), 2),
                             baked_models._seeded(lambda: (torch.rand(13),), 3))
    out, record, _, _ = _export(case, tmp_path, monkeypatch)
    assert [b["source"] for b in record["baked"]] == ["if keep.numel() > 4000:"]
    for inputs in (case.example(), case.same_branch(), case.other_branch()):
        _matches_eager(case, out, inputs)


@pytest.mark.parametrize("b", [5, -3, 7, -1])
def test_floor_divide_equals_torch_for_every_sign(b):
    from dynamo import draft_ops

    a = torch.arange(-40, 40)
    assert torch.equal(draft_ops.floor_divide(a, b), torch.div(a, b, rounding_mode="floor"))
    assert torch.equal(draft_ops.floor_divide(a, torch.tensor(b)), torch.div(a, b, rounding_mode="floor"))


@pytest.mark.parametrize("index", ["mask", "mask, :", "mask, ...", "mask3"])
def test_flat_mask_index_takes_what_eager_takes(index):
    from dynamo import draft_ops

    x = torch.randn(3, 4, 5)
    masks = {"mask": (x[..., 0] > 0,), "mask, :": (x[..., 0] > 0, slice(None)),
             "mask, ...": (x[..., 0] > 0, Ellipsis), "mask3": (x > 0,)}
    key = masks[index] if len(masks[index]) > 1 else masks[index][0]
    flat, mask = draft_ops._flat_index(x, key)
    assert torch.equal(flat[mask], x[key])


def test_flat_mask_index_leaves_other_indexes_to_eager():
    from dynamo import draft_ops

    x = torch.randn(3, 4)
    for key in (x[0] > 0, (x > 0).int(), (slice(None), x[0] > 0), 1, (x > 0)[:2], (x > 0, 0)):
        assert draft_ops._flat_index(x, key) is None, key


def test_a_baked_model_is_also_checked_at_half_its_example_size(tmp_path, monkeypatch):
    """A draft capture may bake a count that follows the input's size (detections kept): the
    acceptance check adds a probe at half the example size, where such a count differs."""
    case = baked_models.BY_NAME["batched_nms"]
    _, record, _, _ = _export(case, tmp_path, monkeypatch)
    n = case.example()[0].shape[0]
    labels = [p["probe"] for p in record["acceptance"]["probes"]]
    assert labels[0] == "the example input" and labels[1].startswith(f"n={n + 1} ")
    assert labels[2].startswith(f"n={n // 2} "), labels
    assert record["acceptance"]["status"] == "passed"


class SumGate(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2 + 1
        return x - 1


class SumGateAttention(torch.nn.Module):
    """A branch on data, then an operator the TorchScript exporter writes from opset 14 only."""

    def forward(self, x):
        if x.sum() > 0:
            return torch.nn.functional.scaled_dot_product_attention(x, x, x) * 2
        return x


def test_auto_below_opset_18_tries_torchscript_before_the_draft_capture(tmp_path):
    """Issue 35 item 6: auto at opset 11 paid torch.export's draft capture, translation,
    down-conversion and acceptance check before it fell back (Faster R-CNN: most of its time);
    with fixed input shapes the tracer bakes the same branch, so the TorchScript route goes
    first and the ledger says why the draft capture was deferred; the branch the tracer baked is
    the one capture stopped at, named as a draft capture's bake is (ONX003, ``baked``)."""
    x = torch.rand(2, 3)
    proto, record = parity.compat_proto(SumGate(), (x,), tmp_path / "auto", "auto",
                                        opset_version=11, input_names=["x"])
    assert record["route_taken"] == "legacy"
    assert record["fallback_reason"].startswith(
        "dynamo: data-dependent control flow (draft capture deferred: at opset 11 and fixed input "
        "shapes the TorchScript route, baking the branch alike, is tried first) at ")
    assert "`if x.sum() > 0:`" in record["fallback_reason"]
    # no draft capture ran (no acceptance check of its model); the tracer's bake is said
    assert record["acceptance"] is None and "ONX003" in record["warnings"]
    assert [(b["line"], b["source"]) for b in record["baked"]] == [
        (SumGate.forward.__code__.co_firstlineno + 1, "if x.sum() > 0:")]
    assert "dynamo" in record["attempt_logs"]
    np.testing.assert_allclose(parity.run(proto, {"x": x})[0], (x * 2 + 1).numpy(), rtol=1e-6)
    # route="dynamo" unchanged: the draft capture bakes the branch, written at opset 11
    _, own = parity.compat_proto(SumGate(), (x,), tmp_path / "dynamo", "dynamo", opset_version=11,
                                 input_names=["x"])
    assert own["route_taken"] == "dynamo" and own["fallback_reason"] is None
    assert [b["source"] for b in own["baked"]] == ["if x.sum() > 0:"]


def test_a_deferred_draft_capture_still_delivers_when_torchscript_fails(tmp_path):
    """Never worse than before: when the TorchScript route fails too, the torch.export route's
    draft capture runs after it and its model is delivered, as when it ran first."""
    x = torch.rand(1, 2, 4, 8)
    proto, record = parity.compat_proto(SumGateAttention(), (x,), tmp_path, "auto",
                                        opset_version=11, input_names=["x"])
    assert record["route_taken"] == "dynamo"
    assert record["fallback_reason"].startswith("legacy: TorchScript export failed")
    assert "dynamo" not in record["fallback_reason"]  # the deferred attempt is not a failure
    assert [b["source"] for b in record["baked"]] == ["if x.sum() > 0:"]
    assert "ONX003" in record["warnings"] and record["acceptance"]["status"] == "passed"
    assert {o.version for o in proto.opset_import if o.domain == ""} == {11}
    np.testing.assert_allclose(parity.run(proto, {"x": x})[0], SumGateAttention()(x).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_with_dynamic_axes_auto_keeps_the_draft_capture_first(tmp_path):
    """With dynamic axes the tracer can bake the example's sizes as well as its branch (README,
    Data-dependent branches): there auto keeps the torch.export route's draft capture first."""
    x = torch.rand(2, 3)
    _, record = parity.compat_proto(SumGate(), (x,), tmp_path, "auto", opset_version=11,
                                    input_names=["x"], dynamic_axes={"x": {0: "n"}})
    assert record["route_taken"] == "dynamo" and record["fallback_reason"] is None
    assert [b["source"] for b in record["baked"]] == ["if x.sum() > 0:"]
