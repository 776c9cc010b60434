"""Packed sequences (``pack_padded_sequence`` -> LSTM/GRU -> ``pad_packed_sequence``) on the
torch.export route, the way the TorchScript exporter wrote them: ONNX ``LSTM``/``GRU`` nodes with
``sequence_lens``.

torch.export cannot capture a packed sequence: its data has a data-dependent size and
``nn.LSTM.forward`` sizes the initial state from ``batch_sizes[0]`` ("zeros(): argument 'size'
... got FakeTensor"). The TorchScript exporter treated packing as the identity and gave the
lengths to the RNN node. While the capture runs, ``packed_rnns()`` does the same: packing keeps
the padded (time-major) tensor as the packed sequence's data, an ``nn.LSTM``/``nn.GRU`` given such
a sequence calls ``compat_onnx::packed_rnn`` (eager: torch's own packed RNN, so the values are
torch's; exported: ONNX ``LSTM``/``GRU`` with ``sequence_lens``, zero past each length, the
reverse direction starting at each sequence's end), and unpacking cuts the padded output at the
longest length. A packed sequence the RNN or the unpacking did not make here (its data
transformed in between) fails the route by name instead of running on padded data.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

from . import rnn_decompositions

OPTION = "model"
ACTION = ("packed sequences exported as the TorchScript exporter wrote them: ONNX LSTM/GRU with "
          "sequence_lens")
_OP = "compat_onnx::packed_rnn"
_MODES = {"LSTM": 4, "GRU": 3}


def needed(model: Any) -> bool:
    """Whether ``model`` is a module with an LSTM or GRU, the only ones a packed sequence is
    given to here (a model without one needs neither the patches nor the custom op)."""
    import torch

    return isinstance(model, torch.nn.Module) and any(isinstance(m, _rnn_classes()) for m in model.modules())


def _rnn_classes() -> tuple[type, ...]:
    import torch

    return (torch.nn.LSTM, torch.nn.GRU)


@contextlib.contextmanager
def packed_rnns(uses: rnn_decompositions.Uses | None = None) -> Iterator[None]:
    """While the block runs, packing is the identity, LSTM/GRU on a packed sequence call
    ``compat_onnx::packed_rnn`` and unpacking cuts at the longest length (see the module)."""
    import torch
    from torch import _VF

    lengths_of = _Lengths()
    op = _op()

    def pack(input: Any, lengths: Any, batch_first: bool) -> tuple[Any, Any]:
        data = input.transpose(0, 1) if batch_first else input
        lengths = lengths.to(torch.int64)
        steps = torch.arange(data.size(0), dtype=torch.int64)
        longest = lengths.max().item()
        torch._check(longest <= data.size(0))
        torch._check(longest >= 1)
        batch_sizes = (lengths[None, :] > steps[:, None]).sum(1)[:longest]
        lengths_of.put(data, lengths)
        return data, batch_sizes

    def unpack(data: Any, batch_sizes: Any, batch_first: bool, padding_value: float,
               total_length: int) -> tuple[Any, Any]:
        lengths = lengths_of.get(data, "pad_packed_sequence")
        out = data[:total_length]
        if total_length > data.size(0):  # pad_packed_sequence(total_length=...) past the input
            out = torch.cat([out, out.new_zeros(total_length - data.size(0), *out.shape[1:])])
        steps = torch.arange(out.size(0), dtype=torch.int64)
        inside = (steps[:, None] < lengths[None, :]).reshape(*out.shape[:2], *([1] * (out.dim() - 2)))
        out = torch.where(inside, out, torch.full((), padding_value, dtype=out.dtype))
        return (out.transpose(0, 1) if batch_first else out), lengths

    def forward_for(cls: Any) -> Any:
        original = cls.forward

        def forward(self: Any, input: Any, hx: Any = None) -> Any:
            if not isinstance(input, torch.nn.utils.rnn.PackedSequence):
                return original(self, input, hx)
            data, batch_sizes, sorted_indices, unsorted_indices = input
            lengths = lengths_of.get(data, f"nn.{cls.__name__}")
            _supported(self, cls.__name__)
            dirs = 2 if self.bidirectional else 1
            shape = (self.num_layers * dirs, data.size(1), self.hidden_size)
            if hx is None:
                zeros = data.new_zeros(shape)
                hx = (zeros, zeros) if cls.__name__ == "LSTM" else zeros
            else:
                hx = self.permute_hidden(hx, sorted_indices)
            states = list(hx) if cls.__name__ == "LSTM" else [hx]
            out, h, c = op(data, lengths, states, list(self._flat_weights), cls.__name__, self.bias,
                           self.num_layers, self.bidirectional)
            if uses is not None:
                uses.count += 1
            lengths_of.put(out, lengths)
            packed = torch.nn.utils.rnn.PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
            hidden = (h, c) if cls.__name__ == "LSTM" else h
            return packed, self.permute_hidden(hidden, unsorted_indices)

        return original, forward

    patched = {cls: forward_for(cls) for cls in _rnn_classes()}
    for cls, (_, forward) in patched.items():
        cls.forward = forward
    # instance attributes of torch's _VF module, found before its __getattr__; deleted after
    _VF._pack_padded_sequence, _VF._pad_packed_sequence = pack, unpack
    try:
        yield
    finally:
        del _VF._pack_padded_sequence, _VF._pad_packed_sequence
        for cls, (original, _) in patched.items():
            cls.forward = original


class _Lengths:
    """The lengths of each padded tensor standing for a packed sequence's data (by identity:
    tensors compare elementwise, so no dict keyed by them)."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Any, Any]] = {}

    def put(self, data: Any, lengths: Any) -> None:
        self._by_id[id(data)] = (weakref.ref(data), lengths)

    def get(self, data: Any, where: str) -> Any:
        ref, lengths = self._by_id.get(id(data), (None, None))
        if ref is None or ref() is not data:
            raise ValueError(
                f"{where} got a packed sequence whose data was transformed after packing: the "
                "torch.export route keeps packed sequences padded and cannot follow that")
        return lengths


def _supported(rnn: Any, name: str) -> None:
    if getattr(rnn, "proj_size", 0):
        raise ValueError(f"nn.{name} with proj_size on a packed sequence: no ONNX form here")
    if rnn.training and rnn.dropout and rnn.num_layers > 1:
        raise ValueError(f"nn.{name} with dropout in training mode on a packed sequence: no ONNX form here")


_DEFINED: Any = None


def _op() -> Any:
    """``compat_onnx::packed_rnn``, defined on first use."""
    global _DEFINED
    if _DEFINED is not None:
        return _DEFINED
    import torch

    @torch.library.custom_op(_OP, mutates_args=(), schema=(
        "(Tensor input, Tensor lengths, Tensor[] hx, Tensor[] params, str mode, bool has_biases, "
        "int num_layers, bool bidirectional) -> (Tensor, Tensor, Tensor)"))
    def packed_rnn(input: torch.Tensor, lengths: torch.Tensor, hx: list[torch.Tensor],
                   params: list[torch.Tensor], mode: str, has_biases: bool, num_layers: int,
                   bidirectional: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # torch's own packed RNN on the padded input: the values of the eager model
        vf = torch._C._VariableFunctions
        data, batch_sizes = vf._pack_padded_sequence(input, lengths.cpu(), False)
        if mode == "LSTM":
            out, h, c = vf.lstm(data, batch_sizes, hx, params, has_biases, num_layers, 0.0, False, bidirectional)
        else:
            out, h = vf.gru(data, batch_sizes, hx[0], params, has_biases, num_layers, 0.0, False, bidirectional)
            c = h.new_zeros(0)
        padded, _ = vf._pad_packed_sequence(out, batch_sizes, False, 0.0, input.size(0))
        return padded, h, c

    @packed_rnn.register_fake
    def _(input: torch.Tensor, lengths: torch.Tensor, hx: list[torch.Tensor], params: list[torch.Tensor],
          mode: str, has_biases: bool, num_layers: int, bidirectional: bool) -> tuple[Any, Any, Any]:
        dirs = 2 if bidirectional else 1
        out = input.new_empty(input.size(0), input.size(1), dirs * hx[0].size(2))
        c = hx[1].new_empty(hx[1].shape) if mode == "LSTM" else hx[0].new_empty(0)
        return out, hx[0].new_empty(hx[0].shape), c

    _DEFINED = packed_rnn
    return _DEFINED


def translation_table() -> dict[Any, Any]:
    """``compat_onnx::packed_rnn`` as ONNX ``LSTM``/``GRU`` nodes with ``sequence_lens``, one per
    layer, weights in ONNX's gate order, as the TorchScript exporter wrote them."""
    import torch

    _op()
    return {torch.ops.compat_onnx.packed_rnn.default: _onnx_packed_rnn}


def _onnx_packed_rnn(input: Any, lengths: Any, hx: Any, params: Any, mode: str, has_biases: bool,
                     num_layers: int, bidirectional: bool) -> tuple[Any, Any, Any]:
    from onnxscript import opset18 as op

    from .rnn_decompositions import (
        onnx_cat,
        onnx_layer_state,
        onnx_layer_weights,
        onnx_merge_directions,
    )

    lstm = mode == "LSTM"
    gates = _MODES[mode]
    # torch's gate order -> ONNX's: LSTM i,f,g,o -> i,o,f,g (c); GRU r,z,n -> z,r,n (h)
    order = [0, 3, 1, 2] if lstm else [1, 0, 2]
    dirs = 2 if bidirectional else 1
    hidden_size = hx[0].shape[2]
    seq_lens = op.Cast(lengths, to=6)  # INT32

    def reorder(w: Any) -> Any:
        parts = op.Split(w, num_outputs=gates, axis=0)
        return op.Concat(*[parts[i] for i in order], axis=0)

    current, finals_h, finals_c = input, [], []
    for layer in range(num_layers):
        w, r, b = onnx_layer_weights(op, params, layer, dirs, has_biases, reorder)
        h0 = onnx_layer_state(op, hx[0], layer, dirs)
        direction = "bidirectional" if bidirectional else "forward"
        if lstm:
            y, y_h, y_c = op.LSTM(current, w, r, b, seq_lens, h0, onnx_layer_state(op, hx[1], layer, dirs),
                                  direction=direction, hidden_size=hidden_size)
            finals_c.append(y_c)
        else:
            y, y_h = op.GRU(current, w, r, b, seq_lens, h0,
                            direction=direction, hidden_size=hidden_size, linear_before_reset=1)
        current = onnx_merge_directions(op, y)
        finals_h.append(y_h)
    c = onnx_cat(op, finals_c) if lstm else op.ConstantOfShape(op.Constant(value_ints=[0]))
    return current, onnx_cat(op, finals_h), c
