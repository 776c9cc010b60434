"""Real third-party symbolics on the torch.export route (issue 31): onnxruntime's contrib-op
symbolics (``onnxruntime/tools/pytorch_export_contrib_ops.py``, shipped in the installed wheel,
registered with ``torch.onnx.register_custom_op_symbolic`` at ``register()``) are applied on our
graph context with the TorchScript exporter present or hidden, and the model runs in
onnxruntime like eager torch."""

from __future__ import annotations

import numpy as np
import pytest
import symbolics_helpers as H
import torch

contrib = pytest.importorskip("onnxruntime.tools.pytorch_export_contrib_ops")


class TriangleGelu(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(torch.triu(x, 1) + torch.tril(x, -1))


@pytest.fixture
def contrib_registered():
    contrib.register()
    yield
    contrib.unregister()


def test_onnxruntime_contrib_symbolics_are_applied(contrib_registered):
    x = torch.randn(4, 5)
    outcome = H.export_new(TriangleGelu().eval(), (x,))
    nodes = [(n.domain, n.op_type) for n in outcome.program.model.graph]
    assert ("com.microsoft", "Gelu") in nodes
    # torch's own triu symbolic (opset 14) outranks the contrib one (opset 1) where torch's
    # TorchScript registry decides, as the TorchScript exporter does; hidden, the contrib one runs
    assert ("com.microsoft", "Trilu") in nodes or ("", "Trilu") in nodes
    (got,) = H.run_ort(outcome.program.model_proto, {"x": x})
    np.testing.assert_allclose(got, TriangleGelu()(x).numpy(), rtol=1e-4, atol=1e-5)
