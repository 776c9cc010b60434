"""The call is bound to forward() once, in normalize(), and routes and tools read that binding."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm
import torch

import compat
from compat.request import ExportRequest, binding, normalize

REPO = Path(__file__).resolve().parents[2]


class Scaled(torch.nn.Module):
    def forward(self, x, extra=None, *, scale=None):
        out = x if extra is None else x + extra["bias"]
        return out if scale is None else out * scale


class TakesDict(torch.nn.Module):
    def forward(self, x, extra):
        return x + extra["bias"]


X, S, B = torch.randn(2, 3), torch.full((2, 3), 2.0), torch.ones(2, 3)


def _bound(req: ExportRequest) -> list[tuple[str, str, object]]:
    return [(p.name, p.kind, p.value) for p in req.params]


def test_the_request_carries_the_call_bound_to_forward():
    req = normalize.normalize(Scaled(), (X,), None, kwargs={"scale": S})
    assert [(n, k) for n, k, _ in _bound(req)] == [("x", "pos"), ("scale", "kw")]
    assert req.params[0].value is X and req.params[1].value is S
    assert req.unbound is None


def test_a_trailing_kwargs_dict_and_real_keyword_inputs_bind_the_same():
    legacy = normalize.normalize(Scaled(), (X, {"scale": S}), None)
    modern = normalize.normalize(Scaled(), (X,), None, kwargs={"scale": S})
    assert legacy.args == modern.args == (X,)
    assert legacy.kwargs == modern.kwargs == {"scale": S}
    assert _bound(legacy) == _bound(modern)


def test_the_empty_dict_marker_leaves_no_trace_in_the_request():
    """(x, {...}, {}): the dict is a positional input; the marker itself is not an input."""
    extra = {"bias": B}
    req = normalize.normalize(Scaled(), (X, extra, {}), None)
    assert req.args == (X, extra) and req.kwargs is None
    assert [(n, k) for n, k, _ in _bound(req)] == [("x", "pos"), ("extra", "pos")]
    assert req.params[1].value is extra


def test_only_the_torchscript_adapter_writes_the_legacy_form():
    from legacy import keyword_inputs

    extra = {"bias": B}
    assert keyword_inputs.legacy_args((X, extra), None) == (X, extra, {})
    assert keyword_inputs.legacy_args((X,), {"scale": S}) == (X, {"scale": S})
    assert keyword_inputs.legacy_args((X,), None) == (X,)


@pytest.mark.parametrize("route", ["legacy", "dynamo"])
def test_a_dict_as_the_last_positional_input_reaches_forward_positionally(route, parity, tmp_path):
    """(x, {...}, {}) on each route: the dict is forward()'s ``extra``, not keyword inputs."""
    torch.manual_seed(0)
    x, bias = torch.randn(2, 3), torch.randn(2, 3)
    target = tmp_path / "m.onnx"
    compat.export(TakesDict().eval(), (x, {"bias": bias}, {}), target, route=route,
                  input_names=["x", "bias"])
    assert compat.last_outcome().route == route
    assert parity.input_names(str(target)) == ["x", "bias"]
    got = parity.run(str(target), {"x": x.numpy(), "bias": bias.numpy()})[0]
    np.testing.assert_allclose(got, (x + bias).numpy(), rtol=1e-6)


def test_a_request_built_directly_binds_like_normalize():
    direct = ExportRequest(model=Scaled(), args=(X, {"scale": S}))
    normalized = normalize.normalize(Scaled(), (X, {"scale": S}), None)
    assert direct.args == normalized.args and direct.kwargs == normalized.kwargs
    assert _bound(direct) == _bound(normalized)


def test_replace_keeps_the_binding_unless_the_inputs_change():
    req = normalize.normalize(Scaled(), (X,), None, kwargs={"scale": S})
    assert req.replace(route="legacy").params is req.params
    other = req.replace(args=(B,), kwargs=None)
    assert [(n, v) for n, _, v in _bound(other)] == [("x", B)]


def test_a_remembered_signature_follows_changed_defaults_and_a_replaced_forward():
    """forward()'s signature is worked out once per function, and again when its defaults or
    code change (a skipped positional parameter binds to the default of the moment)."""

    class Defaults(torch.nn.Module):
        def forward(self, x, extra=None, scale=None):
            return x

    model = Defaults()
    first = normalize.normalize(model, (X,), None, kwargs={"scale": S})
    assert [(n, v) for n, _, v in _bound(first)] == [("x", X), ("extra", None), ("scale", S)]
    Defaults.forward.__defaults__ = ({"bias": B}, None)
    again = normalize.normalize(model, (X,), None, kwargs={"scale": S})
    assert [(n, v) for n, _, v in _bound(again)] == [("x", X), ("extra", {"bias": B}), ("scale", S)]

    def renamed(self, y, scale=None):
        return y

    Defaults.forward.__code__ = renamed.__code__
    Defaults.forward.__defaults__ = (None,)
    third = normalize.normalize(model, (X,), None, kwargs={"scale": S})
    assert [(n, v) for n, _, v in _bound(third)] == [("y", X), ("scale", S)]


class _OneInput(torch.nn.Module):
    def forward(self, x):
        return x


class _Defaults(torch.nn.Module):
    def forward(self, x, y=None, z=2):
        return x


class _PositionalOnly(torch.nn.Module):
    def forward(self, x, /, y, z=None):
        return x


class _NoInput(torch.nn.Module):
    def forward(self):
        return torch.zeros(1)


@pytest.mark.parametrize("model_class", [_OneInput, _Defaults, _PositionalOnly, _NoInput])
def test_positional_calls_bind_as_the_signature_binds_them(model_class):
    """A forward() of positional parameters only, called without keyword inputs, binds through a
    remembered plan: each call length binds as ``Signature.bind`` does, and one it refuses is
    recorded as unbound, on the first call (which works the plan out) and on the next."""
    model = model_class()
    sig = binding.inspect.signature(model.forward)
    for n in range(len(sig.parameters) + 2):
        args = tuple(torch.full((1,), float(i)) for i in range(n))
        try:
            want = [(name, "pos", value) for name, value in sig.bind(*args).arguments.items()]
        except TypeError:
            want = None
        for _ in range(2):
            params, why = binding.try_bind(model, args, None)
            assert (None if params is None else [(p.name, p.kind, p.value) for p in params]) == want, n
            assert (why is None) == (want is not None)


def test_a_call_forward_cannot_take_is_recorded_not_raised():
    req = normalize.normalize(Scaled(), (X,), None, kwargs={"nope": S})
    assert req.params is None
    assert "do not match Scaled.forward()" in req.unbound and "nope" in req.unbound


@pytest.mark.parametrize("route,options", [
    ("legacy", {"kwargs": {"scale": S}, "input_names": ["x", "scale"]}),
    ("dynamo", {"kwargs": {"scale": S}, "input_names": ["x", "scale"],
                "dynamic_axes": {"x": {0: "batch"}}}),
])
def test_one_export_binds_the_call_once(route, options, tmp_path, monkeypatch):
    """normalize, route memory, the dispatcher and the route all read the one binding."""
    calls = []
    real_bind = binding.bind

    def counting_bind(*args, **kwargs):
        calls.append(args[0])
        return real_bind(*args, **kwargs)

    monkeypatch.setattr(binding, "bind", counting_bind)
    monkeypatch.setenv("TORCH_ONNX_COMPAT_CACHE_DIR", str(tmp_path / "cache"))
    model = Scaled().eval()
    target = tmp_path / "m.onnx"
    compat.export(model, (X,), target, route=route, **options)
    assert target.exists() and compat.last_outcome().route == route
    assert len(calls) == 1 and calls[0] is model


def test_the_request_modules_bind_without_loading_a_route_package():
    code = (
        "import sys, torch\n"
        "from compat.request import normalize\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x, *, s=None):\n"
        "        return x\n"
        "x = torch.randn(2, 3)\n"
        "req = normalize.normalize(M(), (x, {'s': x}), None, dynamic_shapes={'x': {0: torch.export.Dim('n')}})\n"
        "assert req.layout.axes == {0: {0: 'n'}}, req.layout.axes\n"
        "from compat.request import shapes_to_axes\n"
        "converted, _ = shapes_to_axes.for_torchscript(req)\n"
        "assert converted.dynamic_axes == {'x': {0: 'n'}}, converted.dynamic_axes\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('legacy', 'dynamo')\n"
        "          or m.startswith('_torch_onnx_compat_')]\n"
        "assert loaded == [], loaded\n"
    )
    run = warm_python.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False)
    assert run.returncode == 0, run.stderr[-2000:]


def test_the_request_modules_load_the_projects_modules_by_plain_imports():
    offenders = []
    for path in sorted((REPO / "compat" / "request").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in ("import_module", "route_module", "__import__"):
                    offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
