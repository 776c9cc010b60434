"""ONX101: ``dynamic_axes`` on the torch.export route, compared with the TorchScript exporter."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm
import torch
from torch import nn

import dynamo
from compat.errors import CompatTypeError, CompatValueError, RouteFailed
from compat.request import ExportRequest
import route_parity as parity  # tests/helpers
from dynamo.dynamic_shapes import DynamicAxesWarning


class PiperLike(nn.Module):
    """piper's VITS export: (input, input_lengths, scales, sid=None); time = 2 * phonemes."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.spk = nn.Embedding(4, 8)
        self.proj = nn.Conv1d(8, 1, 1)

    def forward(self, input, input_lengths, scales, sid=None):
        h = self.emb(input)
        if sid is not None:
            h = h + self.spk(sid)[:, None]
        mask = (torch.arange(input.shape[1])[None, :] < input_lengths[:, None]).unsqueeze(-1).float()
        h = h * mask * scales[0]
        h = torch.cat([h, h * scales[1]], dim=1)
        return self.proj(h.transpose(1, 2))


class WhisperDecoderLike(nn.Module):
    """sherpa-onnx whisper decoder: ``n_audio`` on axis 0 of an input and axis 1 of an output."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 16)
        self.k = nn.Linear(16, 16)
        self.v = nn.Linear(16, 16)
        self.out = nn.Linear(16, 30)

    def forward(self, tokens, audio_features):
        q = self.emb(tokens)
        k, v = self.k(audio_features), self.v(audio_features)
        att = torch.softmax(q @ k.transpose(1, 2) / 4.0, dim=-1) @ v
        return self.out(q + att), torch.stack([k, v])


class Stateful(nn.Module):
    """A nested-tuple state input; list-form axes."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x, state):
        h, c = state
        h2 = torch.tanh(self.lin(x) + h)
        return h2, c + h2


@dataclass
class Case:
    model: nn.Module
    args: tuple[Any, ...]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: dict[str, Any]
    # (sizes along each axis name) -> (call args, feeds by graph input name)
    make: Callable[[dict[str, int]], tuple[tuple[Any, ...], dict[str, Any]]]
    example: dict[str, int]
    others: dict[str, tuple[int, int]]
    opset: int = 18
    kwargs: dict[str, Any] = field(default_factory=dict)


def _piper() -> Case:
    torch.manual_seed(0)
    scales = torch.tensor([0.667, 1.0, 0.8])

    def make(s):
        x = torch.randint(0, 20, (s["batch_size"], s["phonemes"]))
        lengths = torch.full((s["batch_size"],), s["phonemes"], dtype=torch.long)
        return (x, lengths, scales, None), {"input": x, "input_lengths": lengths, "scales": scales}

    args, _ = make({"batch_size": 1, "phonemes": 7})
    return Case(
        PiperLike().eval(), args, ("input", "input_lengths", "scales"), ("output",),
        {"input": {0: "batch_size", 1: "phonemes"}, "input_lengths": {0: "batch_size"},
         "output": {0: "batch_size", 2: "time"}},
        make, {"batch_size": 1, "phonemes": 7}, {"batch_size": (2, 4), "phonemes": (3, 12)},
    )


def _whisper() -> Case:
    torch.manual_seed(1)

    def make(s):
        tokens = torch.randint(0, 30, (s["n_audio"], s["n_tokens"]))
        feats = torch.randn(s["n_audio"], 10, 16)
        return (tokens, feats), {"tokens": tokens, "audio_features": feats}

    args, _ = make({"n_audio": 1, "n_tokens": 3})
    return Case(
        WhisperDecoderLike().eval(), args, ("tokens", "audio_features"), ("logits", "cross_kv"),
        {"tokens": {0: "n_audio", 1: "n_tokens"}, "audio_features": {0: "n_audio"},
         "logits": {0: "n_audio", 1: "n_tokens"}, "cross_kv": {1: "n_audio"},
         "attention_mask": {0: "n_audio"}},  # names nothing (yolov7-style copy-paste)
        make, {"n_audio": 1, "n_tokens": 3}, {"n_audio": (2, 5), "n_tokens": (1, 9)},
    )


def _stateful() -> Case:
    torch.manual_seed(2)

    def make(s):
        x, h, c = (torch.randn(s["batch"], 6) for _ in range(3))
        return (x, (h, c)), {"x": x, "h": h, "c": c}

    args, _ = make({"batch": 3})
    return Case(
        Stateful().eval(), args, ("x", "h", "c"), ("h_out", "c_out"),
        {"x": [0], "h": {0: "batch"}, "c": {0: "batch"}, "h_out": [0], "c_out": {0: "batch"}},
        make, {"batch": 3}, {"batch": (1, 6)},
    )


CASES = {"piper": _piper, "whisper": _whisper, "stateful": _stateful}


@pytest.fixture(scope="module", params=sorted(CASES))
def pair(request):
    case = CASES[request.param]()
    common = {"input_names": case.input_names, "output_names": case.output_names, "dynamic_axes": case.dynamic_axes}
    legacy = parity.legacy_proto(case.model, case.args, opset_version=case.opset,
                                 input_names=list(case.input_names), output_names=list(case.output_names),
                                 dynamic_axes=case.dynamic_axes)
    req = ExportRequest(model=case.model, args=case.args, opset_version=case.opset,
                        given=frozenset({"dynamic_axes", "input_names", "output_names", "opset_version"}), **common)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = dynamo.export(req)
    return request.param, case, legacy, outcome.program.model_proto, outcome, caught


def _sizes(case: Case):
    yield dict(case.example)
    for name, others in case.others.items():
        for size in others:
            yield {**case.example, name: size}


def test_graph_inputs_outputs_and_names_match_legacy(pair):
    _, case, legacy, new, _, _ = pair
    old, cur = parity.describe(legacy), parity.describe(new)
    assert list(cur["inputs"]) == list(old["inputs"]) == list(case.input_names)
    assert list(cur["outputs"]) == list(old["outputs"]) == list(case.output_names)
    assert cur["opsets"][""] == old["opsets"][""] == case.opset


def test_dim_params_are_the_users_names(pair):
    _, case, legacy, new, _, _ = pair
    old, cur = parity.describe(legacy), parity.describe(new)
    for kind in ("inputs", "outputs"):
        for name, axes in case.dynamic_axes.items():
            if name not in cur[kind]:
                continue
            named = axes if isinstance(axes, dict) else {a: f"{name}_dynamic_axes_{i + 1}" for i, a in enumerate(axes)}
            for axis, dim_name in named.items():
                assert cur[kind][name][axis] == dim_name, (kind, name, cur[kind][name])
                assert old[kind][name][axis] == dim_name, (kind, name, old[kind][name])
    # static input dims agree too
    for name, shape in old["inputs"].items():
        assert [d for d in shape if isinstance(d, int)] == [d for d in cur["inputs"][name] if isinstance(d, int)]


def test_dynamo_model_matches_eager_at_several_sizes(pair):
    _, case, _, new, _, _ = pair
    sess = parity.session(new)
    for sizes in _sizes(case):
        args, feeds = case.make(sizes)
        ref = parity.eager(case.model, args)
        got = parity.run(sess, feeds)
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5, err_msg=str(sizes))


def test_legacy_model_matches_eager_at_example(pair):
    _, case, legacy, _, _, _ = pair
    args, feeds = case.make(case.example)
    for g, r in zip(parity.run(legacy, feeds), parity.eager(case.model, args)):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


def test_translation_recorded_and_unmatched_key_warned(pair):
    name, case, _, _, outcome, caught = pair
    rec = [t for t in outcome.translations if t.code == "ONX101"]
    assert rec and rec[0].option == "dynamic_axes"
    unmatched = [w for w in caught if issubclass(w.category, DynamicAxesWarning)]
    if name == "whisper":
        assert "attention_mask" in rec[0].action
        assert len(unmatched) == 1 and "attention_mask" in str(unmatched[0].message)
        assert unmatched[0].filename == __file__  # the user's export call, not dynamo/
    else:
        assert not unmatched
    if case.example.get("batch_size") == 1 or case.example.get("n_audio") == 1:
        assert "tiled" in rec[0].action


def test_model_left_untouched(pair):
    _, case, _, _, _, _ = pair
    assert not case.model.training


# --- errors before export ----------------------------------------------------------------------

def _req(**kw: Any) -> ExportRequest:
    base = {"model": Stateful().eval(), "args": (torch.randn(2, 6), (torch.randn(2, 6), torch.randn(2, 6))),
            "input_names": ("x", "h", "c"), "given": frozenset({"dynamic_axes"})}
    base.update(kw)
    return ExportRequest(**base)


@pytest.mark.parametrize("axes, err, text", [
    ({"x": {3: "b"}}, CompatValueError, "dynamic_axes['x']: axis 3 is out of range for input 'x' of rank 2"),
    ({"x": {-3: "b"}}, CompatValueError, "out of range"),
    ({"x": {0: "b", -2: "c"}}, CompatValueError, "same axis"),
    ({"x": "batch"}, CompatTypeError, "dynamic_axes['x'] must be a dict"),
    ({"x": {0: 1}}, CompatTypeError, "axis name must be a non-empty str"),
    ({"x": {"0": "b"}}, CompatTypeError, "must be an int"),
    ({"x": [True]}, CompatTypeError, "must be an int"),
    ({0: {0: "b"}}, CompatTypeError, "must be an input or output name"),
    ([("x", {0: "b"})], CompatTypeError, "dynamic_axes must be a dict"),
])
def test_bad_dynamic_axes_fail_before_export(axes, err, text):
    with pytest.raises(err, match=None) as info:
        dynamo.export(_req(dynamic_axes=axes))
    assert text in str(info.value)


class Reshapes(nn.Module):
    def forward(self, x):
        return x.reshape(3, -1) * 2


class BroadcastsAgainstTable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(3, 4))

    def forward(self, x):
        return x + self.table  # forces batch == 3


def test_axis_the_model_fixes_is_exported_static_and_said_so():
    """The TorchScript exporter only labelled it; a static axis is the faithful graph (more in
    tests/dynamo/test_fixed_axes.py)."""
    req = ExportRequest(model=BroadcastsAgainstTable(), args=(torch.randn(3, 4),), input_names=("x",),
                        dynamic_axes={"x": {0: "batch"}}, given=frozenset({"dynamic_axes"}))
    with pytest.warns(DeprecationWarning, match=r"axis x\[0\] \('batch'\) is fixed by the model at 3"):
        outcome = dynamo.export(req)
    assert parity.dims(outcome.program.model_proto.graph.input[0]) == [3, 4]


def test_axis_exported_static_is_reported_not_renamed():
    """If torch.export bakes an axis in (it refines 'suggested fixes' silently), the post-check fails."""
    from dynamo.dynamic_shapes import Axis, ShapePlan, rename_graph

    req = ExportRequest(model=Reshapes(), args=(torch.randn(3, 4),), input_names=("x",),
                        dynamic_axes={"x": {0: "batch"}}, given=frozenset({"dynamic_axes"}))
    program = dynamo.export(req).program
    assert parity.dims(program.model_proto.graph.input[0]) == ["batch", 4]
    fake = ShapePlan(args=(), kwargs={}, dynamic_shapes=None, input_axes=[Axis("x", 0, 1, "feat")], leaf_names=["x"])
    with pytest.raises(RouteFailed) as info:
        rename_graph(program.model, fake)
    assert info.value.reason == "dynamic axis specialised" and "'feat'" in str(info.value)


def test_keyword_and_default_inputs_resolve_through_the_signature():
    """kwargs out of order and a skipped default: graph inputs follow forward()'s order."""
    from dynamo.dynamic_shapes import translate

    class M(nn.Module):
        def forward(self, a, b=None, c=None, *, d=None):
            return a

    a, c, d = torch.randn(1, 2), torch.randn(3, 2), torch.randn(4)
    sp = translate(ExportRequest(model=M(), args=(a,), kwargs={"d": d, "c": c},
                                 dynamic_axes={"a": {0: "n"}, "c": [0], "d": {0: "m"}}))
    assert sp.args[:3] == (sp.args[0], None, sp.args[2]) and sp.args[2] is c
    assert list(sp.kwargs) == ["d"]
    assert sp.leaf_names == ["a", "c", "d"]
    assert [(x.key, x.axis, x.name) for x in sp.input_axes] == [("a", 0, "n"), ("c", 0, "c_dynamic_axes_1"), ("d", 0, "m")]
    assert sp.args[0].shape[0] == 2  # the batch-1 example is tiled for capture
    assert set(sp.dynamic_shapes) == {"a", "b", "c", "d"} and sp.dynamic_shapes["b"] is None


class TakesDict(nn.Module):
    def forward(self, x, extra):
        return x * extra["scale"]


def test_trailing_dict_conventions_like_legacy():
    """(x, {...}) means keyword inputs; (x, {...}, {}) means the dict is positional."""
    x, scale = torch.randn(1, 3), torch.randn(1, 3)
    proto, _ = parity.dynamo_proto(ExportRequest(model=TakesDict(), args=(x, {"scale": scale}, {}),
                                                 input_names=("x", "scale"), dynamic_axes={"x": {0: "n"}, "scale": {0: "n"}},
                                                 given=frozenset({"dynamic_axes"})))
    assert parity.describe(proto)["inputs"] == {"x": ["n", 3], "scale": ["n", 3]}
    x3, s3 = torch.randn(3, 3), torch.randn(3, 3)
    np.testing.assert_allclose(parity.run(proto, {"x": x3, "scale": s3})[0], (x3 * s3).numpy(), rtol=1e-6)


# --- DynamicAxesWarning: at the user's call site, once per call site ------------------------------

SCRIPT = """
import torch
import dynamo
from compat.request import ExportRequest


class Twice(torch.nn.Module):
    def forward(self, x):
        return x * 2


x = torch.randn(3, 4)
for _ in range(3):
    outcome = dynamo.export(ExportRequest(model=Twice(), args=(x,), input_names=("x",), given=frozenset({"dynamic_axes"}),
                                          dynamic_axes={"x": {0: "batch"}, "attention_mask": {0: "batch"}}))
import onnxruntime as ort
sess = ort.InferenceSession(outcome.program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
y = torch.randn(5, 4)
assert abs(sess.run(None, {"x": y.numpy()})[0] - (y * 2).numpy()).max() < 1e-6
print("OK")
"""


def test_unmatched_key_warning_points_at_the_users_line_once(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "user_export.py"
    script.write_text(SCRIPT)
    root = str(Path(dynamo.__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}  # the default filters
    env["PYTHONPATH"] = root
    done = warm_python.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                           timeout=300, check=False)
    assert done.returncode == 0 and "OK" in done.stdout, done.stderr[-3000:]
    line = next(i for i, text in enumerate(SCRIPT.splitlines(), 1) if "outcome = dynamo.export" in text)
    shown = [ln for ln in done.stderr.splitlines() if "DynamicAxesWarning" in ln]
    want = (f"{script}:{line}: DynamicAxesWarning: dynamic_axes key 'attention_mask' names no graph "
            "input or output (inputs: ['x'], outputs: []); it is ignored, as the TorchScript exporter did")
    assert shown == [want]


def test_dynamic_axes_warning_is_a_user_warning():
    assert issubclass(DynamicAxesWarning, UserWarning)


# --- ExportedProgram: its shapes were fixed when it was captured ----------------------------------

def test_dynamic_axes_on_an_exported_program_fail_early_with_how_to_fix():
    m = Stateful().eval()
    args = (torch.randn(3, 6), (torch.randn(3, 6), torch.randn(3, 6)))
    ep = torch.export.export(m, args)
    with pytest.raises(CompatValueError) as info:
        dynamo.export(_req(model=ep, args=args, dynamic_axes={"x": {0: "batch"}}))
    assert str(info.value) == ("dynamic_axes cannot change an ExportedProgram's shapes: capture it with "
                               "dynamic_shapes, or pass the nn.Module")
    # the way out it names: a program captured with dynamic_shapes runs at other batch sizes
    batch = torch.export.Dim("batch")
    ep = torch.export.export(m, args, dynamic_shapes=({0: batch}, ({0: batch}, {0: batch})))
    proto = dynamo.export(_req(model=ep, args=args, given=frozenset())).program.model_proto
    new_args = (torch.randn(5, 6), (torch.randn(5, 6), torch.randn(5, 6)))
    feeds = dict(zip(("x", "h", "c"), (new_args[0], *new_args[1])))
    for got, want in zip(parity.run(proto, feeds), parity.eager(m, new_args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
