"""compat.routing.registry: validation, forwarding to torch, registrations made directly with torch."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from compat.routing import registry
from compat.errors import CompatTypeError, CompatValueError
from dynamo import torch_internals


def _sym(g, x):
    return g.op("Relu", x)


@pytest.mark.parametrize("name", ["gelu", "a::", "::", "onnx::Relu", "ns::1op", "a::b::c", ""])
def test_bad_names_are_rejected(name):
    with pytest.raises(CompatValueError):
        registry.register_custom_op_symbolic(name, _sym, 9)


def test_bad_callable_and_opset_are_rejected():
    with pytest.raises(CompatTypeError):
        registry.register_custom_op_symbolic("regtest::op", "not callable", 9)
    with pytest.raises(CompatTypeError):
        registry.register_custom_op_symbolic("regtest::op", _sym, "9")
    with pytest.raises(CompatTypeError):
        registry.register_custom_op_symbolic(42, _sym, 9)
    assert not [r for r in registry.registrations() if r.name == "regtest::op"]


def test_register_forwards_to_torch_and_unregister_removes(registered):
    registered("::regtest_gelu", _sym, 9)
    assert torch_internals.legacy_custom_symbolics()["aten::regtest_gelu"][9] is _sym
    (reg,) = [r for r in registry.registrations() if r.name == "aten::regtest_gelu"]
    assert (reg.opset_version, reg.fn, reg.source, reg.namespace, reg.op) == (
        9, _sym, "compat", "aten", "regtest_gelu")
    registry.unregister_custom_op_symbolic("::regtest_gelu", 9)
    assert "aten::regtest_gelu" not in torch_internals.legacy_custom_symbolics()
    assert registry.lookup("aten::regtest_gelu", 18) is None


def test_registrations_made_directly_with_torch_are_found():
    torch.onnx.register_custom_op_symbolic("regtest::direct", _sym, 11)
    try:
        reg = registry.lookup("regtest::direct", 18)
        assert reg is not None and reg.fn is _sym and reg.source == "torch"
        assert registry.lookup("regtest::direct", 10) is None
    finally:
        torch.onnx.unregister_custom_op_symbolic("regtest::direct", 11)
    assert registry.lookup("regtest::direct", 18) is None


def test_highest_opset_not_above_target_wins(registered):
    def old(g, x):
        return g.op("Relu", x)

    registered("regtest::versioned", old, 9)
    registered("regtest::versioned", _sym, 13)
    assert registry.lookup("regtest::versioned", 12).fn is old
    assert registry.lookup("regtest::versioned", 18).fn is _sym
    assert registry.active(18)["regtest::versioned"].opset_version == 13


def test_patched_torch_function_does_not_recurse(registered):
    saved = torch.onnx.register_custom_op_symbolic
    torch.onnx.register_custom_op_symbolic = registry.register_custom_op_symbolic
    try:
        torch.onnx.register_custom_op_symbolic("regtest::patched", _sym, 9)
        assert registry.lookup("regtest::patched", 9).fn is _sym
    finally:
        torch.onnx.register_custom_op_symbolic = saved
        registry.unregister_custom_op_symbolic("regtest::patched", 9)


def test_importing_registry_and_dynamo_loads_no_onnx():
    code = ("import sys, compat.routing.registry, dynamo, dynamo.symbolics; "
            "print(sorted(m for m in ('onnx', 'onnxscript', 'onnx_ir') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
