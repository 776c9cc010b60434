"""Fails loudly when a torch upgrade moves a private piece the torch.export route uses."""

from __future__ import annotations

import pytest
import torch

from compat.errors import CompatError, TorchInternalsMoved
from compat.installed import torch_caps
from dynamo import torch_internals


def test_every_route_internal_is_where_we_expect():
    missing = torch_internals.check()
    assert missing == [], (
        f"torch {torch.__version__} moved {missing}: update dynamo/torch_internals.py "
        "(ROUTE_INTERNALS) and compat/installed/torch_caps.py (SYMBOLICS_INTERNALS)"
    )


def test_function_library_and_shape_accessors():
    class Old(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    class New(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

    assert not torch_internals.uses_setup_context(Old)
    assert torch_internals.uses_setup_context(New)
    assert not torch_internals.has_unbacked_symbols([torch.zeros(2)])
    x = torch.zeros(4)
    assert torch_internals.is_view(x[:2]) and not torch_internals.is_view(x)
    schema = torch_internals.op_schema(torch.ops.aten.gelu.default)
    assert [a.name for a in schema.arguments] == ["self", "approximate"]
    assert torch_internals.schema_of(len) is None

    lib = torch.library.Library("compat_internals_probe", "FRAGMENT")
    lib.define("f(Tensor x) -> Tensor")
    assert hasattr(torch.ops.compat_internals_probe, "f")
    torch_internals.destroy_library(lib)
    with pytest.raises((AttributeError, RuntimeError)):
        torch.ops.compat_internals_probe.f.default(torch.zeros(1))


def test_pytree_accessors_round_trip():
    tree = {"a": (torch.zeros(1), 3), "b": [torch.ones(2)]}
    leaves, spec = torch_internals.tree_flatten(tree)
    assert len(torch_internals.tree_leaves(tree)) == len(leaves) == 3
    rebuilt = torch_internals.tree_unflatten(leaves, spec)
    assert rebuilt["a"][1] == 3 and torch.equal(rebuilt["b"][0], torch.ones(2))
    assert dict in torch_internals.pytree_node_types()


def test_a_moved_registry_is_a_loud_failure(monkeypatch):
    """The custom-symbolic registry read never falls back to "no registrations"."""
    if not torch_caps.has_legacy_symbolic_registry():
        pytest.skip("this torch has no TorchScript symbolic registry")
    module, attr = torch_caps.SYMBOLICS_INTERNALS[3]
    registry = torch_internals._get(module, attr)
    monkeypatch.delattr(registry, "_registry")
    with pytest.raises(TorchInternalsMoved, match=r"registry\._registry") as info:
        torch_internals.legacy_custom_symbolics()
    assert isinstance(info.value, CompatError)
    assert info.value.torch_version == torch_caps.torch_version_str()


def test_a_moved_piece_names_itself_and_the_torch(monkeypatch):
    monkeypatch.delattr(torch.library.Library, "_destroy")
    with pytest.raises(TorchInternalsMoved, match=r"torch\.library\.Library\._destroy"):
        torch_internals.destroy_library(object())
    assert "torch.library.Library._destroy" in torch_internals.check()
