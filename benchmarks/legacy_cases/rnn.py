"""RNN/GRU/LSTM cases after torch's TorchScript-era RNN tests: tanh/relu Elman RNNs, GRU, LSTM,
seq-first and batch-first, bidirectional, stacked, with and without initial states, most with a
dynamic sequence axis checked at another length."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .case import Case

FEATURES, HIDDEN = 5, 7


class Recurrent(nn.Module):
    """One recurrent layer stack (``kind``: rnn_tanh, rnn_relu, gru, lstm) and a linear head;
    with ``states`` the initial hidden (and cell) state are inputs."""

    def __init__(self, kind: str, batch_first: bool = False, bidirectional: bool = False, layers: int = 1,
                 states: bool = False, return_hidden: bool = False) -> None:
        super().__init__()
        common = {"input_size": FEATURES, "hidden_size": HIDDEN, "num_layers": layers, "batch_first": batch_first,
                  "bidirectional": bidirectional}
        if kind.startswith("rnn"):
            self.rnn = nn.RNN(nonlinearity=kind.split("_")[1], **common)
        else:
            self.rnn = {"gru": nn.GRU, "lstm": nn.LSTM}[kind](**common)
        self.head = nn.Linear(HIDDEN * (2 if bidirectional else 1), 3)
        self.states, self.return_hidden = states, return_hidden
        self.is_lstm = kind == "lstm"

    def forward(self, x, h0=None, c0=None):
        if self.states:
            state = (h0, c0) if self.is_lstm else h0
            out, hidden = self.rnn(x, state)
        else:
            out, hidden = self.rnn(x)
        y = self.head(out)
        if self.return_hidden:
            return y, hidden[0] if self.is_lstm else hidden
        return y


def _seq(batch_first: bool, batch: int, seq: int) -> torch.Tensor:
    return torch.randn(batch, seq, FEATURES) if batch_first else torch.randn(seq, batch, FEATURES)


def _rnn_case(name: str, kind: str, *, batch_first: bool = False, bidirectional: bool = False, layers: int = 1,
              states: bool = False, return_hidden: bool = False, dynamic: str = "seq", batch: int = 3,
              quick: bool = False, note: str = "") -> Case:
    """A case with input ``x`` (plus ``h0``/``c0``), dynamic axes per ``dynamic`` ("seq",
    "batch_seq", "none"), checked at another sequence length (and batch size)."""
    seq_axis, batch_axis = (1, 0) if batch_first else (0, 1)
    names = ["x"] + (["h0", "c0"] if states and kind == "lstm" else ["h0"] if states else [])
    dirs = layers * (2 if bidirectional else 1)

    def inputs(b: int, s: int) -> tuple[Any, ...]:
        x = _seq(batch_first, b, s)
        extra = [torch.randn(dirs, b, HIDDEN) for _ in names[1:]]
        return (x, *extra)

    axes: dict[str, dict[int, str]] = {}
    if dynamic != "none":
        axes["x"] = {seq_axis: "seq"}
        axes["y"] = {seq_axis: "seq"}
        if dynamic == "batch_seq":
            axes["x"][batch_axis] = axes["y"][batch_axis] = "batch"
            for n in names[1:]:
                axes[n] = {1: "batch"}
    kwargs: dict[str, Any] = {"input_names": names, "output_names": ["y"] + (["hn"] if return_hidden else [])}
    if axes:
        kwargs["dynamic_axes"] = axes
    other_batch = batch + 2 if dynamic == "batch_seq" else batch
    others = (lambda: [inputs(other_batch, 11)]) if dynamic != "none" else (lambda: [inputs(batch, 6)])
    return Case(name, "rnn", lambda: Recurrent(kind, batch_first, bidirectional, layers, states,
                                               return_hidden).eval(),
                lambda: inputs(batch, 6), kwargs, others=others, atol=1e-5, quick=quick, note=note)


CASES = [
    _rnn_case("rnn_tanh_seq", "rnn_tanh", quick=True, note="test_rnn_elman-tanh without sequence lengths"),
    _rnn_case("rnn_relu_seq", "rnn_relu", note="test_rnn_elman-relu without sequence lengths"),
    _rnn_case("gru_seq", "gru", note="test_rnn_gru without sequence lengths"),
    _rnn_case("lstm_seq", "lstm", quick=True, note="test_rnn_lstm without sequence lengths"),
    _rnn_case("rnn_tanh_batch_first", "rnn_tanh", batch_first=True, dynamic="batch_seq"),
    _rnn_case("gru_bidirectional_batch_first", "gru", batch_first=True, bidirectional=True),
    _rnn_case("lstm_bidirectional_two_layers", "lstm", batch_first=True, bidirectional=True, layers=2),
    _rnn_case("lstm_initial_states", "lstm", states=True, dynamic="batch_seq"),
    _rnn_case("gru_initial_state_hidden_out", "gru", states=True, return_hidden=True),
    _rnn_case("rnn_relu_bidirectional", "rnn_relu", bidirectional=True, layers=2),
    _rnn_case("lstm_static", "lstm", dynamic="none"),
    _rnn_case("gru_two_layers_hidden_out", "gru", layers=2, return_hidden=True, dynamic="batch_seq"),
    _rnn_case("lstm_batch1_example", "lstm", batch_first=True, dynamic="batch_seq", batch=1,
              note="batch 1 example on a dynamic batch axis"),
]
