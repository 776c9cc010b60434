"""What differs between supported torch releases: ``Function.apply`` is a Python classmethod up to
torch 2.13 and a C ``classmethod_descriptor`` from 2.14; both kinds are exercised on any torch."""

from __future__ import annotations

import numpy as np
import pytest
import symbolics_helpers as H
import torch

from compat.installed import torch_caps
from dynamo import autograd_functions

pytestmark = pytest.mark.slow

_C_APPLY = torch._C._FunctionBase.__dict__["apply"]  # the C descriptor in every torch


def _python_classmethod() -> classmethod:
    def apply(cls, *args, **kwargs):
        return _C_APPLY.__get__(None, cls)(*args, **kwargs)

    return classmethod(apply)


class Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def symbolic(g, x):
        return g.op("Mul", x, g.op("Constant", value_t=torch.tensor(2.0)))


class Plain(torch.autograd.Function):  # no symbolic: traced through
    @staticmethod
    def forward(ctx, x):
        return x.relu()


class Model(torch.nn.Module):
    def forward(self, x):
        return Plain.apply(Doubled.apply(x) - 1)


@pytest.mark.parametrize("kind", ["classmethod", "classmethod_descriptor"])
def test_apply_patch_handles_both_classmethod_kinds(monkeypatch, kind):
    original = _C_APPLY if kind == "classmethod_descriptor" else _python_classmethod()
    assert type(original).__name__ == kind
    assert not hasattr(_C_APPLY, "__func__")
    # the session restores Function.apply from _ORIGINAL_APPLY; monkeypatch restores both
    monkeypatch.setattr(torch.autograd.Function, "apply", original)
    monkeypatch.setattr(autograd_functions, "_ORIGINAL_APPLY", original)

    x = torch.randn(2, 3)
    outcome = H.export_new(Model(), (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    assert torch.autograd.Function.__dict__["apply"] is original  # restored after the session
    proto = outcome.program.model_proto
    assert ("ONX302", f"{__name__}.Doubled") in {(t.code, t.option) for t in outcome.translations}
    for batch in (2, 4):
        x = torch.randn(batch, 3)
        (got,) = H.run_ort(proto, {"x": x})
        np.testing.assert_allclose(got, Model()(x).numpy(), rtol=1e-6)


def test_installed_torch_is_within_the_declared_floor():
    assert torch_caps.at_least(torch_caps.MIN_TORCH)
    assert torch_caps.has_dynamo_exporter()
    from dynamo import torch_internals

    assert torch_internals.check() == []


def test_registration_dispatch_does_not_depend_on_an_earlier_torchscript_export():
    """torch loads its opset-11+ symbolics lazily; a fresh process must decide like one that has
    already run a TorchScript export (mmdeploy's layer_norm at 11 yields to torch's own at 17)."""
    import subprocess
    import sys

    code = ("from compat.routing import registry\n"
            "registry.register_custom_op_symbolic('aten::layer_norm', lambda g, *a: None, 11)\n"
            "print('aten::layer_norm' in registry.active(16), 'aten::layer_norm' in registry.active(18))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]
