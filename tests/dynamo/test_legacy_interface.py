"""Calls from the families where the torch.export route used to give another interface or another
model than the TorchScript exporter (issue 17): unused inputs, shape-only inputs, in-place
factories, Python scalar inputs, ``torch.cross`` without ``dim``, RNNs at other sequence lengths,
a size-0 example on a dynamic axis.

Each runs under ``auto`` and ``route="dynamo"`` and is compared with a real
``torch.onnx.export(dynamo=False)`` of the same call: the graph inputs (order, dtypes, ranks, and
names where ``input_names`` chose them), the outputs, and onnxruntime's numbers against the
TorchScript model's and eager torch's, at the example and at another size of each dynamic axis.
"""

from __future__ import annotations

import functools
import io
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import compat


class Unused(nn.Module):
    def forward(self, x, position_bias):
        return x * 2


class ShapeOnly(nn.Module):
    def forward(self, x, like):
        return x.new_zeros(like.shape) + x.sum()


class Zeroed(nn.Module):
    def forward(self, x):
        return x.zero_() + 1


class Filled(nn.Module):
    def forward(self, x):
        return x.fill_(3.0)


class IntInput(nn.Module):
    def forward(self, n: int, y):
        return n + y


class IntShape(nn.Module):
    def forward(self, x, rows: int):
        return x.reshape(rows, -1)


class Cross(nn.Module):
    def forward(self, x, y):
        return torch.cross(x, y)


@dataclass
class Case:
    name: str
    model: nn.Module
    args: tuple[Any, ...]
    options: dict[str, Any] = field(default_factory=dict)
    #: other calls the models are run at (same interface): e.g. another int, another length
    others: list[tuple[Any, ...]] = field(default_factory=list)


def _cases() -> list[Case]:
    torch.manual_seed(0)
    x = torch.randn(2, 3)
    return [
        Case("unused position_bias", Unused(), (x, torch.randn(4, 4))),
        Case("unused input, named", Unused(), (x, torch.randn(4, 4)),
             {"input_names": ["x", "position_bias"], "output_names": ["y"]}),
        Case("shape-only input", ShapeOnly(), (x, torch.randn(2, 3))),
        Case("zero_ factory", Zeroed(), (torch.randn(2, 3),)),
        Case("fill_ factory", Filled(), (torch.randn(2, 3),)),
        Case("python int input", IntInput(), (3, torch.randint(10, (2, 3, 4))), {"input_names": ["n", "y"]},
             others=[(7, torch.randint(10, (2, 3, 4)))]),
        Case("python int as a size", IntShape(), (torch.randn(4, 6), 2), others=[(torch.randn(4, 6), 3)]),
        Case("cross without dim", Cross(), (torch.randn(5, 3, 6), torch.randn(5, 3, 6))),
    ]


CASES = _cases()
#: one call per family also runs under auto (the torch.export route runs there first, checked)
AUTO = ("unused input, named", "shape-only input", "zero_ factory", "python int input", "cross without dim")
ROUTED = [(c, "dynamo") for c in CASES] + [(c, "auto") for c in CASES if c.name in AUTO]


def _feed(value: Any) -> np.ndarray:
    if isinstance(value, bool):
        return np.array(value)
    if isinstance(value, int):
        return np.array(value, dtype=np.int64)
    if isinstance(value, float):
        return np.array(value, dtype=np.float64)
    return value.detach().numpy().copy()


def _flat(args: tuple[Any, ...]) -> list[Any]:
    return [a for a in args if a is not None]


@functools.cache
def _legacy_of(name: str) -> bytes:
    return _legacy(next(c for c in CASES if c.name == name))


def _legacy(case: Case) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(case.model, _clone(case.args), buf, dynamo=False, **case.options)
    return buf.getvalue()


def _compat(case: Case, route: str) -> tuple[bytes, Any]:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(case.model, _clone(case.args), buf, route=route, **case.options)
    return buf.getvalue(), compat.last_outcome()


def _clone(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def interface(model: bytes) -> dict[str, list[tuple[Any, ...]]]:
    graph = onnx.load_from_string(model).graph
    inits = {i.name for i in graph.initializer}

    def describe(v: Any) -> tuple[Any, ...]:
        t = v.type.tensor_type
        return v.name, t.elem_type, len(t.shape.dim)

    return {"inputs": [describe(v) for v in graph.input if v.name not in inits],
            "outputs": [describe(v) for v in graph.output]}


def _run(model: bytes, call: tuple[Any, ...], used: list[int]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    values = _flat(call)
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, {n: _feed(values[k]) for n, k in zip(names, used)})


def _used_leaves(legacy: dict[str, list[tuple[Any, ...]]], case: Case) -> list[int]:
    """Which of the call's values each legacy input takes: the legacy exporter numbers its
    generated names after the flattened inputs (``onnx::Add_1``) unless names were given."""
    names = case.options.get("input_names")
    out = []
    for name, _, _ in legacy["inputs"]:
        if names and name in names:
            out.append(names.index(name))
        else:
            out.append(int(name.rsplit("_", 1)[1]))
    return out


@pytest.mark.parametrize("case, route", ROUTED, ids=[f"{c.name}-{r}" for c, r in ROUTED])
def test_interface_and_numbers_match_the_torchscript_exporter(case, route):
    legacy_model = _legacy_of(case.name)
    model, outcome = _compat(case, route)
    assert outcome.route == "dynamo", outcome.fallback_reason
    assert outcome.acceptance["status"] == "passed"
    want, got = interface(legacy_model), interface(model)
    named = "input_names" in case.options
    assert [(t, r) for _, t, r in got["inputs"]] == [(t, r) for _, t, r in want["inputs"]]
    if named:
        assert [n for n, _, _ in got["inputs"]] == [n for n, _, _ in want["inputs"]]
    assert [(t, r) for _, t, r in got["outputs"]] == [(t, r) for _, t, r in want["outputs"]]
    if "output_names" in case.options:
        assert [n for n, _, _ in got["outputs"]] == case.options["output_names"]
    used = _used_leaves(want, case)
    for call in [case.args, *case.others]:
        eager = case.model(*_clone(call))
        expected = _run(legacy_model, call, used)
        actual = _run(model, call, used)
        for a, e in zip(actual, expected):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(actual[0], eager.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_unused_inputs_dropped_are_recorded():
    case = CASES[1]
    _, outcome = _compat(case, "dynamo")
    actions = [t.action for t in outcome.translations if t.option == "args"]
    assert any("['position_bias']" in a and "dropped" in a for a in actions), actions


def test_python_int_input_is_recorded_as_a_dynamic_int():
    _, outcome = _compat(CASES[5], "auto")
    assert any("['n']" in t.action and "dynamic ints" in t.action for t in outcome.translations)


def test_an_explicit_dynamo_true_call_keeps_torchs_interface():
    """dynamo=True chose the new exporter: its unused inputs stay, as plain torch keeps them."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(Unused(), (torch.randn(2, 3), torch.randn(4, 4)), buf, dynamo=True)
    assert [n for n, _, _ in interface(buf.getvalue())["inputs"]] == ["x", "position_bias"]


class Numel(nn.Module):
    def forward(self, x):
        return x * x.numel()


@pytest.mark.parametrize("route", ["auto", "dynamo"])
def test_size_zero_example_on_a_dynamic_axis_exports_as_plain_torch(route):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(Numel(), (torch.randn(0, 3),), buf, route=route, input_names=["x"],
                      dynamic_axes={"x": {0: "n"}})
    assert compat.last_outcome().route == "dynamo"
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    for n in (0, 1, 4):
        x = torch.randn(n, 3)
        np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], (x * x.numel()).numpy())


def _rnn(kind: str) -> nn.Module:
    torch.manual_seed(0)
    if kind == "lstm":
        return nn.LSTM(4, 5, 1, bidirectional=True).eval()
    if kind == "gru":
        return nn.GRU(4, 5, 1, batch_first=True).eval()
    return nn.RNN(4, 5, 2, nonlinearity=kind, bidirectional=kind == "tanh").eval()


RNN_ROUTES = [("lstm", "dynamo"), ("gru", "dynamo"), ("tanh", "dynamo"), ("relu", "dynamo"),
              ("lstm", "auto"), ("relu", "auto")]


@pytest.mark.parametrize("kind, route", RNN_ROUTES, ids=[f"{k}-{r}" for k, r in RNN_ROUTES])
def test_rnn_with_a_dynamic_sequence_axis_runs_at_other_lengths(kind, route):
    """The sequence axis the user marked dynamic stays dynamic (torch 2.15's RNN decomposition
    patch, applied on a torch without it): the model runs at other lengths like the TorchScript
    exporter's."""
    model = _rnn(kind)
    seq = 1 if kind == "gru" else 0
    x = torch.randn(3, 7, 4) if seq == 1 else torch.randn(7, 3, 4)
    options = {"input_names": ["x"], "dynamic_axes": {"x": {seq: "seq"}}}
    case = Case(f"rnn {kind}", model, (x,), options)
    legacy_model = _legacy(case)
    if kind in ("lstm", "gru") and not _torch_loops(kind):
        # torch 2.9 to 2.12 (LSTM), 2.9 to 2.10 (GRU): the route refuses naming the torch gap
        if route == "dynamo":
            with pytest.raises(compat.ExportFailed, match=f"cannot keep aten::{kind} looping over a dynamic"):
                _compat(case, route)
            return
        onnx_model, outcome = _compat(case, route)
        assert outcome.route == "legacy"
        assert f"cannot keep aten::{kind} looping over a dynamic sequence" in outcome.fallback_reason
    else:
        onnx_model, outcome = _compat(case, route)
        assert outcome.route == "dynamo", outcome.fallback_reason
    assert [(t, r) for _, t, r in interface(onnx_model)["inputs"]] == \
        [(t, r) for _, t, r in interface(legacy_model)["inputs"]]
    for length in (7, 10, 3):
        shape = [3, length, 4] if seq == 1 else [length, 3, 4]
        xs = torch.randn(*shape)
        eager = [t.detach().numpy() for t in torch.utils._pytree.tree_leaves(model(xs))]
        got = _run(onnx_model, (xs,), [0])
        want = _run(legacy_model, (xs,), [0])
        assert len(got) == len(want) == len(eager)
        for g, w, e in zip(got, want, eager):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _torch_loops(kind: str) -> bool:
    """torch keeps an LSTM/GRU looping over a dynamic sequence on the torch.export route."""
    from dynamo import rnn_decompositions

    return rnn_decompositions.dynamic_sequence_gap(kind) is None


class HannAdd(nn.Module):
    """torch's ``test_hann_window_not_periodic``: the TorchScript exporter keeps ``n`` as an int64
    input (hann_window reads it); torch.export specialises it at 100 (x's static size)."""

    def forward(self, x, n: int):
        return torch.add(x, torch.hann_window(n, periodic=False, dtype=torch.float))


def _inputs_of(data: bytes) -> list[tuple[str, str]]:
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return [(i.type, str(i.shape)) for i in sess.get_inputs()]


def test_a_python_int_torch_export_specialised_stays_a_graph_input():
    """The route dropped ``n`` as unused and auto returned a model without it (issue 35)."""
    x = torch.randn(100)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(HannAdd(), (x, 100), buf, route="dynamo")
    assert compat.last_outcome().acceptance["status"] == "passed"
    assert _inputs_of(buf.getvalue()) == [("tensor(float)", "[100]"), ("tensor(int64)", "[]")]
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    got = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], [x.numpy(), np.array(100)])))[0]
    np.testing.assert_allclose(got, HannAdd()(x, 100).numpy(), rtol=1e-5, atol=1e-6)


class CopyAt(nn.Module):
    def forward(self, x, data, i):
        x[i] = data  # a 0-d integer tensor index: a graph input of the TorchScript exporter
        return x


def test_a_zero_d_index_tensor_the_capture_baked_is_an_interface_difference():
    """A draft capture baked ``i`` and the route dropped it as unused: a model wrong at any other
    index. The check names it; auto returns the TorchScript exporter's model, which keeps it."""
    args = (torch.randn(3, 4), torch.randn(4), torch.tensor(1))
    buf = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compat.export(CopyAt(), tuple(a.clone() for a in args), buf, route="dynamo")
    except compat.ExportFailed as exc:  # torch 2.13's capture bakes i
        assert re.search(r"input 'i' \(int64 scalar\).*baked its example value", str(exc)), exc
        return
    # a torch whose capture keeps i (2.14): the model must take it and be right at another index
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()][-1] == "i"
    x, data = torch.randn(3, 4), torch.randn(4)
    feed = dict(zip([i.name for i in sess.get_inputs()], [x.numpy(), data.numpy(), np.array(2)]))
    np.testing.assert_allclose(sess.run(None, feed)[0], CopyAt()(x.clone(), data, torch.tensor(2)).numpy())
