"""What the torch.export route does that plain ``torch.onnx.export(dynamo=True)`` does not keeps a
migrated call site on ``compat.export``: each such translation, recorded by a real export, is one
``migration.ledger.shim_only`` reads (``compat.catalog.SHIM_ONLY_TRANSLATIONS``)."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import compat
from migration.ledger import shim_only

# slow (exports each shim-only translation, then migrates it): CI runs it in its own step, `make test-slow`
pytestmark = pytest.mark.slow


class Unused(nn.Module):
    def forward(self, x, unused):
        return x * 2


class Scaled(nn.Module):
    def forward(self, x, n: int):
        return x * n


class Cross(nn.Module):
    def forward(self, a, b):
        return torch.cross(a, b)


def _relative_bias_attention() -> nn.Module:
    from attention_models import RelativeBiasAttention  # tests/helpers

    return RelativeBiasAttention()


class PackedLSTM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 4)

    def forward(self, x, lengths):
        out, _ = self.lstm(nn.utils.rnn.pack_padded_sequence(x, lengths))
        return nn.utils.rnn.pad_packed_sequence(out)[0]


def _quantized() -> nn.Module:
    from torch.ao import quantization as q

    model = nn.Sequential(q.QuantStub(), nn.Linear(4, 4), q.DeQuantStub()).eval()
    model.qconfig = q.get_default_qconfig("x86")
    prepared = q.prepare(model)
    prepared(torch.randn(8, 4))
    return q.convert(prepared)


CASES = {
    "unused input": (Unused, (torch.randn(2, 3), torch.randn(4)), {}, "dropped graph inputs"),
    "python int": (Scaled, (torch.randn(2, 3), 3), {}, "Python int arguments"),
    "cross without dim": (Cross, (torch.randn(5, 3, 6), torch.randn(5, 3, 6)), {}, "torch.cross"),
    "rnn on a dynamic sequence": (lambda: nn.RNN(4, 8), (torch.randn(7, 2, 4),),
                                  {"input_names": ["x"], "dynamic_axes": {"x": {0: "seq"}}},
                                  "sequence axis dynamic"),
    "eager-quantized": (_quantized, (torch.randn(2, 4),), {}, "QDQ form"),
    "packed sequence": (PackedLSTM, (torch.randn(5, 2, 4), torch.tensor([5, 3])), {}, "packed sequences"),
    "captured without autograd": (_relative_bias_attention, (torch.randn(2, 5, 32),), {}, "without autograd"),
}


class ParameterTimesScalar(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return x + self.w * 2


def _type_promotion_fault() -> bool:
    from compat.installed import torch_caps

    return torch_caps.type_promotion_misfinds_overloads()


class Hann(nn.Module):
    def forward(self, x):
        return x * torch.hann_window(x.shape[-1], periodic=True, dtype=torch.float)


def _refuses_assignment() -> bool:
    from compat.installed import torch_caps

    return torch_caps.export_refuses_tensor_attribute_assignment()


def _lstm_missing_loop() -> bool:
    from dynamo import rnn_decompositions

    return rnn_decompositions.lstm_missing_loop()


def _lacks_hann() -> bool:
    from compat.installed import torch_caps

    return torch_caps.lacks_decomposition("hann_window.periodic")


#: recorded only on a torch with that fault (torch 2.9 to 2.12): skipped elsewhere, with the reason
FAULT_CASES = {
    "overloads re-matched by schema": (ParameterTimesScalar, (torch.randn(2, 3),), {},
                                       "re-matched operator overloads", _type_promotion_fault),
    "rnn weights read live": (lambda: nn.GRU(4, 5), (torch.randn(6, 2, 4),), {},
                              "read their weights live", _refuses_assignment),
    "lstm decomposed": (lambda: nn.LSTM(4, 5), (torch.randn(6, 2, 4),), {},
                        "decomposed LSTMs into their cells", _lstm_missing_loop),
    "hann_window decomposed": (Hann, (torch.randn(2, 8),), {}, "hann_window.periodic", _lacks_hann),
}


@pytest.mark.parametrize("case", [*CASES, *FAULT_CASES])
def test_recorded_translation_keeps_the_call_site_on_the_shim(case, tmp_path):
    if case in FAULT_CASES:
        *spec, fault = FAULT_CASES[case]
        if not fault():
            pytest.skip(f"torch {torch.__version__} has not the fault this translation works around")
        build, args, options, reason = spec
    else:
        build, args, options, reason = CASES[case]
    torch.manual_seed(0)
    model = build().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, args, str(tmp_path / "m.onnx"), route="dynamo", **options)
    record = {"translations": [t.to_dict() for t in compat.last_outcome().translations]}
    found = shim_only(record)
    assert any(reason in why for why in found), (found, record["translations"])


def test_a_plain_export_has_no_shim_only_translation(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(nn.Linear(3, 2).eval(), (torch.randn(2, 3),), str(tmp_path / "m.onnx"),
                      route="dynamo", dynamo=True)
    assert shim_only({"translations": [t.to_dict() for t in compat.last_outcome().translations]}) == []
