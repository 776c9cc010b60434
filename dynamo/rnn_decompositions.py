"""RNNs with a dynamic sequence axis: loop over the sequence in the graph instead of unrolling it.

torch decomposes ``aten::lstm``/``gru``/``rnn_tanh``/``rnn_relu`` into one step per element of the
example's sequence, which bakes the example length in: torch.export then specialises the axis the
user marked dynamic (or, where the ONNX exporter keeps the op, the re-traced output shapes say the
example length and the optimizer folds them into a Reshape), and the model fails at any other
length ("Got 11, Expected 10"). torch 2.13 swaps in ``while_loop`` decompositions for LSTM and GRU
during capture only; torch 2.15 also does it during the ONNX exporter's decomposition step
(``patch_dynamic_shape_rnn_decompositions``), which is where the shapes go wrong.

``while_loop_decompositions()`` is that patch for a torch without it (``torch_internals``
probes for it), and for Elman RNNs, which 2.15's patch leaves out: while the export runs, the four RNN ops decompose into a ``while_loop`` over the
sequence (torch's own LSTM/GRU bodies where it has them, the Elman one here), which the exporter
turns into an ONNX ``Loop``. Used only when the call has a dynamic axis, as torch does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from . import torch_internals

#: the ledger's translation when a decomposition here ran (compat.catalog.SHIM_ONLY_TRANSLATIONS)
OPTION = "dynamic_axes"
ACTION = ("RNN layers loop over the sequence in the graph (ONNX Loop/RNN), so the dynamic sequence "
          "axis stays dynamic")


class Uses:
    """How often a translation here ran during one export (``while_loop_decompositions``'
    decompositions, ``packed_sequences``' packed RNNs)."""

    def __init__(self) -> None:
        self.count = 0

    def wrap(self, impl: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return impl(*args, **kwargs)

        return counted


@contextlib.contextmanager
def while_loop_decompositions(elman_only: bool = False, uses: Uses | None = None) -> Iterator[None]:
    """While the block runs, ``aten::rnn_tanh``/``rnn_relu`` decompose into the Elman
    ``while_loop`` here and, unless ``elman_only`` (torch patches those itself),
    ``aten::lstm``/``gru`` into torch's own ``while_loop``s (then restored)."""
    import torch

    aten = torch.ops.aten
    impls = {aten.rnn_tanh.input: _elman(torch.tanh), aten.rnn_relu.input: _elman(torch.relu)}
    if not elman_only:
        loops = torch_internals.rnn_while_loop_impls()
        impls.update(loops)
        for name in ("lstm", "gru"):
            op = getattr(aten, name).input
            if dynamic_sequence_gap(name) is not None:
                impls[op] = _refused_on_a_dynamic_sequence(op, name)
    if uses is not None:
        impls = {op: uses.wrap(impl) for op, impl in impls.items()}
    with contextlib.ExitStack() as stack:
        for op, impl in impls.items():
            stack.enter_context(torch_internals.decomposition_kernel(op, impl))
        yield


#: the part of NO_LOOP the route's failure reason quotes (``route.classify``)
NO_LOOP_REASON = r"torch [\w.+]+ cannot keep aten::\w+ looping over a dynamic sequence \([^)]*\)"
#: why an LSTM/GRU with a dynamic sequence fails on torch 2.9 to 2.12
NO_LOOP = ("torch {version} cannot keep aten::{name} looping over a dynamic sequence ({why}): its "
           "ONNX model would bake the example's sequence length or fail ONNX shape inference, so "
           "the dynamic sequence axis cannot stay dynamic on the torch.export route; use "
           "route='legacy' (dynamo=False) or route='auto'")


def dynamic_sequence_gap(name: str) -> str | None:
    """Why this torch cannot export ``aten::<name>`` (lstm, gru) over a dynamic sequence on the
    torch.export route, None where it can: no while_loop body for it (torch 2.9, 2.10), or,
    for LSTM, an ONNX LSTM node that fails shape inference (torch 2.9 to 2.12)."""
    import torch

    from compat.installed import torch_caps

    if torch_internals.torch_patches_rnn_decompositions():
        return None
    if getattr(torch.ops.aten, name).input not in torch_internals.rnn_while_loop_impls():
        return f"no while_loop decomposition of aten::{name}"
    if name == "lstm" and torch_caps.onnx_lstm_node_misshaped():
        return "its ONNX LSTM node fails shape inference"
    return None


def _refused_on_a_dynamic_sequence(op: Any, name: str, uses: Uses | None = None) -> Any:
    """``op`` decomposed by torch's own composite kernel (one step per sequence element), but
    refused (CompatValueError naming the torch gap) when its input's sequence axis is symbolic:
    torch 2.9 and 2.10 would bake it."""
    import torch

    from compat.errors import CompatValueError
    from compat.installed import torch_caps

    key = torch_internals.composite_implicit_key()

    def kernel(input: Any, *args: Any, **kwargs: Any) -> Any:
        batch_first = bool(args[-1]) if args and isinstance(args[-1], bool) else False
        if input.dim() == 3 and isinstance(input.shape[1 if batch_first else 0], torch.SymInt) \
                and not input.shape[1 if batch_first else 0].node.expr.is_number:
            raise CompatValueError(NO_LOOP.format(version=torch_caps.torch_version_str(), name=name,
                                                  why=dynamic_sequence_gap(name)))
        if uses is not None:
            uses.count += 1
        return op._op_dk(key, input, *args, **kwargs)

    return kernel


def translation_table() -> dict[Any, Any]:
    """ONNX ``RNN`` translations of ``aten::rnn_tanh``/``rnn_relu`` (torchlib has none, so the
    exporter would decompose them again, one step per example element): with the decompositions
    above the op stays whole through capture, its output shapes follow the sequence length, and
    it becomes the ONNX ``RNN`` node the TorchScript exporter emitted."""
    import torch

    aten = torch.ops.aten
    return {aten.rnn_tanh.input: _onnx_rnn("Tanh"), aten.rnn_relu.input: _onnx_rnn("Relu")}


def _onnx_rnn(activation: str) -> Any:
    def rnn(input: Any, hx: Any, params: Any, has_biases: bool, num_layers: int, dropout: float,
            train: bool, bidirectional: bool, batch_first: bool) -> tuple[Any, Any]:
        from onnxscript import opset18 as op

        directions = 2 if bidirectional else 1
        hidden_size = hx.shape[2]
        if batch_first:
            input = op.Transpose(input, perm=[1, 0, 2])
        current = input
        finals = []
        for layer in range(num_layers):
            w, r, b = onnx_layer_weights(op, params, layer, directions, has_biases)
            y, y_h = op.RNN(
                current, w, r, b, None, onnx_layer_state(op, hx, layer, directions),
                activations=[activation] * directions,
                direction="bidirectional" if bidirectional else "forward",
                hidden_size=hidden_size,
            )
            current = onnx_merge_directions(op, y)
            if train and dropout > 0.0 and layer < num_layers - 1:
                current, _ = op.Dropout(current, op.Constant(value_float=dropout), op.Constant(value=True))
            finals.append(y_h)
        output = op.Transpose(current, perm=[1, 0, 2]) if batch_first else current
        return output, onnx_cat(op, finals)

    return rnn


def onnx_layer_weights(op: Any, params: Any, layer: int, directions: int, has_biases: bool,
                       reorder: Any = None) -> tuple[Any, Any, Any]:
    """ONNX ``W``, ``R`` and ``B`` (None without biases) of one layer from torch's flat RNN
    parameters (``w_ih, w_hh[, b_ih, b_hh]`` per direction), each gate block passed through
    ``reorder`` (torch's gate order to ONNX's) when given."""
    fix = reorder or (lambda value: value)
    per_direction = 4 if has_biases else 2
    w, r, b = [], [], []
    for d in range(directions):
        first = (layer * directions + d) * per_direction
        w.append(op.Unsqueeze(fix(params[first]), [0]))
        r.append(op.Unsqueeze(fix(params[first + 1]), [0]))
        if has_biases:
            b.append(op.Unsqueeze(op.Concat(fix(params[first + 2]), fix(params[first + 3]), axis=0), [0]))
    return onnx_cat(op, w), onnx_cat(op, r), (onnx_cat(op, b) if has_biases else None)


def onnx_layer_state(op: Any, state: Any, layer: int, directions: int) -> Any:
    """One layer's slice of a ``[layers * directions, batch, hidden]`` initial state."""
    return op.Slice(state, [layer * directions], [(layer + 1) * directions], [0])


def onnx_merge_directions(op: Any, y: Any) -> Any:
    """An ONNX RNN node's ``Y``, ``[seq, dirs, batch, hidden]``, as torch's ``[seq, batch, dirs * hidden]``."""
    return op.Reshape(op.Transpose(y, perm=[0, 2, 1, 3]), op.Constant(value_ints=[0, 0, -1]))


def onnx_cat(op: Any, values: list[Any]) -> Any:
    return values[0] if len(values) == 1 else op.Concat(*values, axis=0)


def _elman(nonlinearity: Any) -> Any:
    def rnn_input(input: Any, hx: Any, params: Any, has_biases: bool, num_layers: int, dropout: float,
                  train: bool, bidirectional: bool, batch_first: bool) -> tuple[Any, Any]:
        import torch

        rnn_helper, gather_params = torch_internals.rnn_decomposition_helpers()
        params = gather_params(params, has_biases, False)

        def layer(inp: Any, hidden: Any, layer_params: Any, biases: bool, reverse: bool = False) -> Any:
            return _elman_layer(inp, hidden, layer_params, biases, nonlinearity, reverse)

        out, final = rnn_helper(input, list(hx.unbind(0)), params, has_biases, num_layers, dropout,
                                train, bidirectional, batch_first, layer)
        return out, torch.stack(final, 0)

    return rnn_input


def _elman_layer(inp: Any, hidden: Any, params: Any, has_biases: bool, nonlinearity: Any,
                 reverse: bool) -> tuple[Any, Any]:
    """One Elman layer as a ``while_loop`` over the sequence: ``h = act(x W_ih + b_ih + h W_hh + b_hh)``."""
    import torch
    import torch.nn.functional as F

    while_loop = torch_internals.while_loop()
    ih_weight, hh_weight = params[0], params[1]
    ih_bias = params[2] if has_biases else None
    hh_bias = params[3] if has_biases else None
    steps = F.linear(inp, ih_weight, ih_bias)
    steps = steps.flip(0) if reverse else steps
    # the loop body may not alias its closure: copy weights that share storage
    hh_weight = hh_weight.clone()
    hh_bias = hh_bias.clone() if hh_bias is not None else None
    out = torch.empty(steps.size(0), *hidden.shape, dtype=hidden.dtype, device=hidden.device)

    def cond(i: Any, out: Any, h: Any) -> Any:
        return i < steps.size(0)

    def body(i: Any, out: Any, h: Any) -> tuple[Any, Any, Any]:
        t = i.item()
        torch._check_is_size(t)
        torch._check_is_size(t, max=steps.size(0) - 1)
        h = nonlinearity(F.linear(h, hh_weight, hh_bias) + steps[t])
        out = out.clone()
        out[t] = h
        return i + 1, out, h

    # a factory op, not torch.tensor(0): a tensor constant made while the exporter decomposes
    # would be lifted without a value
    start = torch.zeros((), dtype=torch.int64, device=steps.device)
    _, out, last = while_loop(cond, body, [start, out, hidden])
    return (out.flip(0) if reverse else out), last


#: the RNN attribute torch 2.9's export refuses to see reassigned
FLAT_WEIGHTS = "_flat_weights"
WEIGHTS_OPTION = "model"
WEIGHTS_ACTION = ("RNN weights read from the module while exporting (torch 2.9's export fails "
                  "on the RNN re-flattening them: 'self._flat_weights[0] ... were assigned during export')")


@contextlib.contextmanager
def flat_weights_read_live(uses: Uses) -> Iterator[None]:
    """While open, an RNN's ``_flat_weights`` is read from its current parameters and its
    re-flattening assigns nothing (a property on ``nn.RNNBase``; the module's ``__dict__`` is not
    touched): torch.export swaps the parameters for its own, so the forward re-flattens them, and
    torch 2.9 refuses that assignment (``torch_caps.export_refuses_tensor_attribute_assignment``).
    Reading them live is what the re-flattening computes."""
    import torch

    base = torch.nn.RNNBase
    if FLAT_WEIGHTS in vars(base):
        yield
        return

    def read(self: Any) -> list[Any]:
        uses.count += 1
        return [getattr(self, name) if hasattr(self, name) else None for name in self._flat_weights_names]

    def assign(self: Any, value: Any) -> None:
        pass  # the list is rebuilt on each read

    setattr(base, FLAT_WEIGHTS, property(read, assign))
    try:
        yield
    finally:
        delattr(base, FLAT_WEIGHTS)


#: the ledger's translation when an LSTM was decomposed by torch's composite kernel
UNROLLED_ACTION = ("LSTM layers decomposed into their cell operations (torch 2.9 to 2.12's ONNX LSTM "
                   "node fails ONNX shape inference: 'Inferred shape and existing shape differ in rank')")


def lstm_missing_loop() -> bool:
    """torch cannot export an LSTM as its ONNX LSTM node (``dynamic_sequence_gap``: torch 2.9 to
    2.12), so the shim decomposes LSTMs into their cells itself."""
    return dynamic_sequence_gap("lstm") is not None


@contextlib.contextmanager
def lstm_decomposed(uses: Uses) -> Iterator[None]:
    """While open, ``aten::lstm`` decomposes at capture (refused on a dynamic sequence)."""
    import torch

    op = torch.ops.aten.lstm.input
    with torch_internals.decomposition_kernel(op, _refused_on_a_dynamic_sequence(op, "lstm", uses)):
        yield
