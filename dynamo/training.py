"""Legacy ``training=`` semantics on the torch.export route.

torch's exporter captures a train-mode model faithfully (``batch_norm(..., training=True)``), but
its ONNX translation forces BatchNorm to inference mode (running statistics). The translations here
compute batch statistics with plain ONNX ops, so any runtime reproduces eager train-mode output.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from . import torch_internals

#: ``ExportRequest.training`` values.
EVAL, PRESERVE, TRAINING = "EVAL", "PRESERVE", "TRAINING"


def exports_train_mode(model: Any, training: str) -> bool:
    """Whether the graph is captured with modules in train mode (TRAINING, or PRESERVE of a
    train-mode model)."""
    if isinstance(model, torch.export.ExportedProgram):
        # its mode was fixed at capture (TRAINING on one is refused before export)
        return captured_in_train_mode(model)
    if training == TRAINING:
        return True
    if training == PRESERVE and isinstance(model, torch.nn.Module):
        return any(m.training for m in model.modules())
    return False


def captured_in_train_mode(program: torch.export.ExportedProgram) -> bool:
    """Whether ``program`` was captured with train-mode BatchNorm/Dropout (an op of its graph has
    a true ``training``/``train`` argument)."""
    for node in program.graph.nodes:
        schema = torch_internals.schema_of(node.target)
        if node.op != "call_function" or schema is None:
            continue
        for i, arg in enumerate(schema.arguments):
            if arg.name in ("training", "train") and str(arg.type) == "bool":
                value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name, False)
                if value is True:
                    return True
    return False


@contextlib.contextmanager
def model_mode(model: Any, training: str) -> Iterator[None]:
    """Put ``model`` in the mode ``training`` asks for while exporting; afterwards restore every
    submodule's own flag and every buffer (a train-mode capture may update BatchNorm statistics)."""
    if not isinstance(model, torch.nn.Module):
        yield
        return
    flags = [(m, m.training) for m in model.modules()]
    saved = _snapshot_buffers(model) if exports_train_mode(model, training) else None
    hook = None
    try:
        if training == EVAL:
            model.eval()
        elif training == TRAINING:
            model.train()
        if model.training and saved is not None:
            # A train-mode capture the caller asked for: torch's exporter checks the top-level
            # flag on entry and warns "Exporting a model while it is in training mode" (at this
            # package's line). Clear the flag for that check; set it again as the capture calls
            # the model (no warnings.catch_warnings: it would reset once-per-site registries).
            model.training = False
            hook = model.register_forward_pre_hook(_train_on_call, prepend=True)
        yield
    finally:
        if hook is not None:
            hook.remove()
        for m, flag in flags:
            m.training = flag
        if saved is not None:
            _restore_buffers(model, saved)


def _train_on_call(module: torch.nn.Module, args: Any) -> None:
    if not module.training:
        module.training = True


def _snapshot_buffers(model: torch.nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(b, b.detach().clone()) for b in model.buffers()]


def _restore_buffers(model: torch.nn.Module, saved: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    with torch.no_grad():
        for buf, copy in saved:
            if buf.shape != copy.shape or not torch.equal(buf, copy):
                buf.copy_(copy)


def translation_table() -> dict[Any, Callable[..., Any]]:
    """Custom translations making BatchNorm use batch statistics when captured in train mode."""
    aten = torch.ops.aten
    table: dict[Any, Callable[..., Any]] = {
        aten._native_batch_norm_legit_functional.default: _bn_functional,
        aten.native_batch_norm.default: _bn_three,
        aten._native_batch_norm_legit.default: _bn_three,
    }
    return table


def _batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """(out, save_mean[C], save_rstd[C], new_running_mean, new_running_var) in plain ONNX ops."""
    from onnxscript import opset18 as op

    rank = len(x.shape)
    axes = op.Constant(value_ints=[a for a in range(rank) if a != 1])
    bshape = op.Constant(value_ints=[1, -1] + [1] * (rank - 2))
    if training or running_mean is None:
        mean = op.ReduceMean(x, axes, keepdims=1)
        centered = op.Sub(x, mean)
        var = op.ReduceMean(op.Mul(centered, centered), axes, keepdims=1)
    else:
        mean = op.Reshape(running_mean, bshape)
        centered = op.Sub(x, mean)
        var = op.Reshape(running_var, bshape)
    rstd = op.Reciprocal(op.Sqrt(op.Add(var, op.CastLike(op.Constant(value_float=eps), x))))
    out = op.Mul(centered, rstd)
    if weight is not None:
        out = op.Mul(out, op.Reshape(weight, bshape))
    if bias is not None:
        out = op.Add(out, op.Reshape(bias, bshape))
    flat = op.Constant(value_ints=[-1])
    save_mean, save_rstd = op.Reshape(mean, flat), op.Reshape(rstd, flat)
    new_mean, new_var = running_mean, running_var
    if training and running_mean is not None:
        # torch updates the running variance with the unbiased batch variance
        n = op.CastLike(op.Div(op.Size(x), op.Shape(x, start=1, end=2)), x)
        unbiased = op.Mul(op.Reshape(var, flat), op.Div(n, op.Sub(n, op.CastLike(op.Constant(value_float=1.0), x))))
        m = op.CastLike(op.Constant(value_float=momentum), x)
        keep = op.CastLike(op.Constant(value_float=1.0 - momentum), x)
        new_mean = op.Add(op.Mul(keep, running_mean), op.Mul(m, save_mean))
        new_var = op.Add(op.Mul(keep, running_var), op.Mul(m, unbiased))
    return out, save_mean, save_rstd, new_mean, new_var


def _bn_functional(
    input, weight=None, bias=None, running_mean=None, running_var=None,
    training: bool = False, momentum: float = 0.1, eps: float = 1e-5,
):
    return _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)


def _bn_three(
    input, weight=None, bias=None, running_mean=None, running_var=None,
    training: bool = False, momentum: float = 0.1, eps: float = 1e-5,
):
    out, mean, rstd, _, _ = _batch_norm(
        input, weight, bias, running_mean, running_var, training, momentum, eps)
    return out, mean, rstd
