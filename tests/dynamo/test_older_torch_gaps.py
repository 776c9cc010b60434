"""What torch 2.9 to 2.12 cannot do on the torch.export route and the shim works around there
(issue 34), each only where the probe in ``compat.installed.torch_caps`` finds the gap, and
recorded in the ledger when used:

- an RNN's forward re-flattens its weights into ``self._flat_weights`` when export swaps its
  parameters, and torch 2.9 refuses the assignment ("... were assigned during export");
- their ONNX LSTM node fails shape inference, and an LSTM/GRU on a dynamic sequence bakes its
  length (no while_loop body): the LSTM is decomposed into its cells, a dynamic sequence refused
  by name (``test_legacy_interface``);
- ``aten.hann_window.periodic`` has no decomposition (nor ONNX translation) before 2.12;
- a failed non-strict capture leaves its buffer-assignment hook registered, holding the model
  (the model stays alive, and assigning one of its buffers runs the stale hook).
"""

from __future__ import annotations

import gc
import io
import warnings
import weakref

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

import compat
from compat.installed import torch_caps
from compat.installed.torch_internals import lookup
from dynamo import missing_decompositions, rnn_decompositions, torch_internals


def _export(model: nn.Module, args: tuple, **options) -> tuple[ort.InferenceSession, list[str]]:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, args, buf, route="dynamo", **options)
    outcome = compat.last_outcome()
    assert outcome.route == "dynamo"
    session = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    return session, [t.action for t in outcome.translations]


class AssignsTensor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cache = torch.zeros(3)

    def forward(self, x):
        self.cache = x.sum(0)
        return x + 1


def test_the_probe_says_what_torch_export_does_with_an_assigned_tensor_attribute():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.export.export(AssignsTensor(), (torch.randn(2, 3),), strict=False)
            refused = False
        except ValueError as exc:
            refused = "assigned during export" in str(exc)
    assert refused == torch_caps.export_refuses_tensor_attribute_assignment()


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_an_rnn_exports_on_the_torch_export_route_and_its_weights_stay_its_own(kind):
    torch.manual_seed(0)
    model = (nn.LSTM(4, 5, bidirectional=True) if kind == "lstm" else nn.GRU(4, 5)).eval()
    before = list(model._flat_weights)
    session, actions = _export(model, (torch.randn(6, 2, 4),), input_names=["x"])
    x = torch.randn(6, 2, 4)
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], model(x)[0].detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    assert (rnn_decompositions.WEIGHTS_ACTION in actions) == \
        torch_caps.export_refuses_tensor_attribute_assignment()
    # torch's ONNX LSTM node fails shape inference where torch has no while_loop body for it
    assert (rnn_decompositions.UNROLLED_ACTION in actions) == \
        (kind == "lstm" and rnn_decompositions.lstm_missing_loop())
    # the user's module is left as it was: its weights list, no property left on RNNBase
    assert all(a is b for a, b in zip(model._flat_weights, before))
    assert rnn_decompositions.FLAT_WEIGHTS not in vars(nn.RNNBase)


class Hann(nn.Module):
    def __init__(self, periodic: bool) -> None:
        super().__init__()
        self.periodic = periodic

    def forward(self, x):
        return x * torch.hann_window(x.shape[-1], periodic=self.periodic, dtype=torch.float)


@pytest.mark.parametrize("periodic", [True, False])
def test_hann_window_exports_as_torch_computes_it(periodic):
    x = torch.randn(2, 16)
    session, actions = _export(Hann(periodic), (x,), input_names=["x"])
    np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], Hann(periodic)(x).numpy(),
                               rtol=1e-5, atol=1e-6)
    lacks = torch_caps.lacks_decomposition("hann_window.periodic")
    assert (missing_decompositions.ACTION in actions) == lacks


class RefusesCapture(nn.Module):
    """Fails in torch.export's capture (as a model it cannot capture does)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        if torch.compiler.is_exporting():
            raise NotImplementedError("captured by the TorchScript tracer only")
        return self.fc(x)


def _buffer_hooks() -> dict:
    return lookup(*torch_caps.BUFFER_REGISTRATION_HOOKS)


def test_a_failed_export_leaves_no_buffer_hook_holding_the_model():
    seen: list[str] = []
    users = nn.modules.module.register_module_buffer_registration_hook(lambda m, name, b: seen.append(name))
    try:
        before = set(_buffer_hooks())
        model = RefusesCapture()
        ref = weakref.ref(model)
        with pytest.raises(compat.ExportFailed), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compat.export(model, (torch.randn(2, 4),), io.BytesIO(), route="dynamo")
        assert set(_buffer_hooks()) == before  # the user's hook kept, none added
        model.register_buffer("scale", torch.ones(1))  # a stale capture hook asserts on a real tensor
        assert seen == ["scale"]
        del model
        gc.collect()
        assert ref() is None, "the model is still alive after its export failed"
    finally:
        users.remove()


def test_only_the_hooks_holding_the_model_are_removed():
    model, other = nn.Linear(1, 1), nn.Linear(1, 1)

    def holding(module: nn.Module):
        return nn.modules.module.register_module_buffer_registration_hook(lambda m, name, b: module and None)

    earlier = holding(model)  # registered before the export: not the capture's
    with torch_internals.buffer_assignment_hooks_removed(model):
        stale, others = holding(model), holding(other)
        plain = nn.modules.module.register_module_buffer_registration_hook(lambda m, name, b: None)
    try:
        assert stale.id not in _buffer_hooks()
        assert {earlier.id, others.id, plain.id} <= set(_buffer_hooks())
    finally:
        for handle in (earlier, stale, others, plain):
            handle.remove()
