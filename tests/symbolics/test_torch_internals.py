"""Fails loudly when a torch upgrade moves the private internals the symbolics adapter uses."""

from __future__ import annotations

from compat.installed import torch_caps
from dynamo import torch_internals


def test_private_internals_are_where_we_expect():
    assert torch_internals.check() == [], (
        "torch moved internals used by dynamo/torch_internals.py; update SYMBOLICS_INTERNALS "
        "in compat/installed/torch_caps.py"
    )
    assert torch_caps.has_legacy_symbolic_registry()
    assert torch_caps.has_legacy_graph_context()
    assert torch_caps.has_exporter_tracer()
    assert torch_internals.original_register().__module__.endswith("torchscript_exporter.utils")

