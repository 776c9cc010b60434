"""Packed sequences on the torch.export route (issue 19: the GRU/LSTM family). torch.export
cannot capture ``pack_padded_sequence`` -> LSTM/GRU -> ``pad_packed_sequence``; the route writes
them as the TorchScript exporter did, ONNX ``LSTM``/``GRU`` nodes with ``sequence_lens``, and
onnxruntime matches eager torch at other lengths, batch sizes and orders of lengths."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import compat
import route_parity as parity  # tests/helpers
from compat.errors import ExportFailed
from dynamo import packed_sequences


class Packed(nn.Module):
    """torch's own ONNX test model, in the forms real code writes it: unsorted lengths, batch
    first or not, the final hidden state returned too."""

    def __init__(self, cls: type, layers: int, batch_first: bool) -> None:
        super().__init__()
        self.batch_first = batch_first
        self.rnn = cls(8, 6, num_layers=layers, bidirectional=True, batch_first=batch_first)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=self.batch_first, enforce_sorted=False)
        out, hidden = self.rnn(packed)
        hidden = hidden[0] if isinstance(hidden, tuple) else hidden
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=self.batch_first)[0], hidden


class TransformedData(nn.Module):
    """The packed data changed between packing and the RNN (an embedding of ``packed.data``)."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(8, 6)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths)
        packed = nn.utils.rnn.PackedSequence(torch.tanh(packed.data), packed.batch_sizes)
        return nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0])[0]


def _inputs(steps: int, lengths: list[int], batch_first: bool, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shape = (len(lengths), steps, 8) if batch_first else (steps, len(lengths), 8)
    return torch.randn(*shape, generator=g), torch.tensor(lengths)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
@pytest.mark.parametrize("layers,batch_first", [(1, False), (2, True)], ids=["1-layer", "2-layer-batch-first"])
def test_packed_rnn_matches_eager_at_other_lengths(cls, layers, batch_first, tmp_path, monkeypatch):
    book, out = tmp_path / "ledger.jsonl", tmp_path / "packed.onnx"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    torch.manual_seed(0)
    model = Packed(cls, layers, batch_first).eval()
    axes = {0: "batch", 1: "steps"} if batch_first else {0: "steps", 1: "batch"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, _inputs(7, [5, 7, 2], batch_first, 0), str(out), route="dynamo",
                      input_names=["x", "lengths"], output_names=["y", "h"],
                      dynamic_axes={"x": axes, "lengths": {0: "batch"}, "y": axes, "h": {1: "batch"}})
    (record,) = [json.loads(line) for line in book.read_text().splitlines()]
    assert packed_sequences.ACTION in [t["action"] for t in record["translations"]]
    assert record["acceptance"]["status"] == "passed"
    import onnx

    proto = onnx.load(str(out))
    nodes = [n for n in proto.graph.node if n.op_type == cls.__name__]
    assert len(nodes) == layers and all(n.input[4] for n in nodes)  # sequence_lens given
    sess = parity.session(proto)
    # other lengths, batch sizes, orders; the longest shorter than the padded input (output cut)
    for steps, lengths, seed in ((7, [5, 7, 2], 0), (11, [9, 3, 10, 1], 1), (4, [4], 2)):
        x, lens = _inputs(steps, lengths, batch_first, seed)
        got = parity.run(sess, {"x": x, "lengths": lens})
        with torch.no_grad():
            want = model(x, lens)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape)
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


def test_packed_data_transformed_after_packing_fails_the_route_by_name(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ExportFailed, match="transformed after packing"):
            compat.export(TransformedData().eval(), _inputs(5, [5, 3], False, 0), str(tmp_path / "m.onnx"),
                          route="dynamo")
    assert not (tmp_path / "m.onnx").exists()


def test_the_patches_are_undone():
    from torch import _VF

    forwards = nn.LSTM.forward, nn.GRU.forward
    with packed_sequences.packed_rnns():
        assert nn.LSTM.forward is not forwards[0]
    assert (nn.LSTM.forward, nn.GRU.forward) == forwards
    assert "_pack_padded_sequence" not in vars(_VF) and "_pad_packed_sequence" not in vars(_VF)
    x, lengths = _inputs(5, [5, 3], False, 0)
    data, batch_sizes = _VF._pack_padded_sequence(x, lengths, False)  # torch's own again
    assert data.shape == (8, 8) and batch_sizes.tolist() == [2, 2, 2, 1, 1]
