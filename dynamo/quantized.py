"""Eager-quantized models on the torch.export route (issue 19 item 4).

``torch.export`` cannot capture eager-quantized modules (``torch.ao.nn.quantized.Linear``, ...):
their packed weights and quantized tensors have no fake-tensor form ("quantized nyi in meta
tensors"). For the capture each such module is swapped, in place and restored after, for a float
stand-in computing what the quantized kernel computes in QDQ form: the int8 weight dequantized
(``DequantizeLinear`` on an int8 initializer, per tensor or per channel), the float op, and the
result quantized to the module's output scale and zero point and dequantized again
(``QuantizeLinear`` + ``DequantizeLinear``), through torch's ``quantized_decomposed`` operators.
``QuantStub`` (``Quantize``) becomes a QuantizeLinear/DequantizeLinear pair and ``DeQuantStub``
nothing, so a float-in/float-out model keeps its interface and onnxruntime runs it within one
quantization step of eager (integer accumulation and float accumulation round differently).
While the stand-ins run, a ``TorchFunctionMode`` gives float ops on tensors standing for quantized
ones eager's grid (pooling and ``cat`` requantize, ``flatten`` keeps it, ``sigmoid`` takes fixed
qparams) and turns ``torch.quantize_per_tensor`` with constant qparams into a QDQ pair.

Quantized tensors passed as inputs (``torch.quantize_per_tensor(x, ...)``) are fed as the
TorchScript exporter fed them: ``<name>_value`` (uint8/int8), ``<name>_scale`` (float64) and
``<name>_zero_point`` (int64); a quantized model output is returned as its value, scale and zero
point. A quantized module without a stand-in (dynamic quantization, quantized RNNs, embeddings,
PReLU, MultiheadAttention) fails the route before capture, naming the module and where it is.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from compat.errors import CompatValueError, RouteFailed

from . import torch_internals

ROUTE = "dynamo"
REASON = "eager-quantized module or operator without a torch.export form"
FALLBACK = "export it with the TorchScript exporter (route='auto' falls back to it, or route='legacy')"
#: the namespaces of torch's eager-quantized modules (``torch.nn.quantized`` is an alias)
_NAMESPACES = ("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized", "torch.nn.quantized",
               "torch.nn.intrinsic.quantized")
_QRANGE = {torch.quint8: (0, 255, torch.uint8), torch.qint8: (-128, 127, torch.int8),
           torch.qint32: (-(2**31), 2**31 - 1, torch.int32)}
#: the tensors standing for quantized ones during one capture: id -> (tensor, its qparams)
_GRID: contextvars.ContextVar[dict[int, tuple[torch.Tensor, QParams]] | None] = (
    contextvars.ContextVar("compat_quantized_grid", default=None))


@dataclass(frozen=True)
class QParams:
    """Per-tensor quantization parameters of an activation."""

    scale: float
    zero_point: int
    dtype: torch.dtype = torch.quint8

    def fake_quant(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` quantized and dequantized (QuantizeLinear + DequantizeLinear)."""
        ops = torch_internals.quantized_decomposed()
        low, high, storage = _QRANGE[self.dtype]
        q = ops.quantize_per_tensor(x, self.scale, self.zero_point, low, high, storage)
        out = ops.dequantize_per_tensor(q, self.scale, self.zero_point, low, high, storage)
        _mark(out, self)
        return out


def _mark(tensor: Any, qparams: QParams) -> None:
    table = _GRID.get()
    if table is not None and isinstance(tensor, torch.Tensor):
        table[id(tensor)] = (tensor, qparams)  # held: ids stay unique while the capture runs


def qparams_of(tensor: Any) -> QParams | None:
    """The qparams of a tensor standing for a quantized one in the current capture."""
    table = _GRID.get()
    entry = table.get(id(tensor)) if table is not None else None
    return entry[1] if entry is not None and entry[0] is tensor else None


def is_quantized_module(module: nn.Module) -> bool:
    """Whether ``module`` is one of torch's eager-quantized modules (not their float bases)."""
    return type(module).__module__.startswith(_NAMESPACES)


def _name(module: nn.Module) -> str:
    cls = type(module)
    return f"{cls.__module__.split('.modules', 1)[0]}.{cls.__qualname__}"


# ---------------------------------------------------------------- stand-ins


class _Requantized(nn.Module):
    """A quantized module's float computation, its result requantized to the module's output
    quantization parameters (None: the input's, as for ReLU6 and Dropout)."""

    def __init__(self, compute: Callable[..., torch.Tensor], out: QParams | None,
                 tensors: dict[str, torch.Tensor] | None = None, keeps_grid: bool = True) -> None:
        super().__init__()
        for name, value in (tensors or {}).items():
            self.register_buffer(name, value)
        self._compute = compute
        self._out = out
        self._keeps_grid = keeps_grid  # False: the result is a float tensor (DeQuantize)

    def forward(self, *args: Any) -> torch.Tensor:
        y = self._compute(self, *args)
        if self._out is not None:
            return self._out.fake_quant(y)
        source = qparams_of(args[0]) if args else None
        if source is not None and self._keeps_grid:
            _mark(y, source)
        return y


class _Functional(nn.Module):
    """``QFunctional`` (a converted ``FloatFunctional``): each op requantized to its qparams."""

    def __init__(self, out: QParams) -> None:
        super().__init__()
        self._out = out

    def add(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._out.fake_quant(x + y)

    def add_relu(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._out.fake_quant(torch.relu(x + y))

    def mul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._out.fake_quant(x * y)

    def cat(self, x: Sequence[torch.Tensor], dim: int = 0) -> torch.Tensor:
        return self._out.fake_quant(torch.cat(list(x), dim=dim))

    def matmul(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self._out.fake_quant(torch.matmul(x, y))

    def add_scalar(self, x: torch.Tensor, y: float) -> torch.Tensor:
        return x + y  # torch derives the output qparams from the input's: kept on its grid

    def mul_scalar(self, x: torch.Tensor, y: float) -> torch.Tensor:
        return x * y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("QFunctional is called through its methods (add, cat, ...)")


def _weight_tensors(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """The int weight and its quantization parameters, as buffers of the stand-in."""
    tensors = {"weight_int": weight.int_repr()}
    if weight.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        pass  # scale and zero point are constants of the stand-in
    elif weight.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
        tensors["weight_scale"] = weight.q_per_channel_scales().to(torch.float64)
        tensors["weight_zero_point"] = weight.q_per_channel_zero_points().to(torch.int64)
    else:
        raise _Unsupported(f"weights quantized {weight.qscheme()}")
    return tensors


def _dequantized_weight(weight: torch.Tensor) -> Callable[[nn.Module], torch.Tensor]:
    """The stand-in's weight: its int buffer dequantized (DequantizeLinear) as ``weight`` was."""
    ops = torch_internals.quantized_decomposed()
    low, high, storage = _QRANGE[weight.dtype]
    if weight.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        scale, zero_point = float(weight.q_scale()), int(weight.q_zero_point())
        return lambda m: ops.dequantize_per_tensor(m.weight_int, scale, zero_point, low, high, storage)
    axis = weight.q_per_channel_axis()
    return lambda m: ops.dequantize_per_channel(m.weight_int, m.weight_scale, m.weight_zero_point,
                                                axis, low, high, storage)


def _weighted(module: nn.Module, op: Callable[..., torch.Tensor],
              after: Callable[[torch.Tensor], torch.Tensor] | None) -> nn.Module:
    weight, bias = module._weight_bias()  # type: ignore[operator]
    tensors = _weight_tensors(weight)
    if bias is not None:
        tensors["bias"] = bias.detach().float()
    dequantized = _dequantized_weight(weight)
    has_bias = bias is not None

    def compute(m: nn.Module, x: torch.Tensor, *extra: torch.Tensor) -> torch.Tensor:
        y = op(x, dequantized(m), m.bias if has_bias else None)
        if extra:  # ConvAdd2d, ConvAddReLU2d: the other summand, before the relu
            y = y + extra[0]
        return after(y) if after is not None else y

    return _Requantized(compute, QParams(float(module.scale), int(module.zero_point)), tensors)


def _conv(module: nn.Module, nd: int, after: Callable[[torch.Tensor], torch.Tensor] | None) -> nn.Module:
    conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    stride, padding = module.stride, module.padding
    dilation, groups, mode = module.dilation, module.groups, module.padding_mode

    def op(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        if mode != "zeros":
            pads = [p for p in reversed(padding) for _ in range(2)]
            return conv(F.pad(x, pads, mode=mode), w, b, stride, 0, dilation, groups)
        return conv(x, w, b, stride, padding, dilation, groups)

    return _weighted(module, op, after)


def _conv_transpose(module: nn.Module, nd: int) -> nn.Module:
    conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    stride, padding, output_padding = module.stride, module.padding, module.output_padding
    dilation, groups = module.dilation, module.groups

    def op(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        return conv(x, w, b, stride, padding, output_padding, groups, dilation)

    return _weighted(module, op, None)


def _leaky(slope: float) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda y: F.leaky_relu(y, slope)


class _Unsupported(Exception):
    """A quantized module (or weight) without a stand-in."""


def _stand_in(module: nn.Module) -> nn.Module:
    """The float stand-in of one eager-quantized module; ``_Unsupported`` when there is none."""
    from torch.ao.nn import intrinsic as nni  # noqa: F401  (loads the quantized submodules)
    from torch.ao.nn import quantized as nnq
    from torch.ao.nn.intrinsic import quantized as nniq

    kind = type(module)
    out = (QParams(float(module.scale), int(module.zero_point))
           if hasattr(module, "scale") and hasattr(module, "zero_point") else None)
    relu = torch.relu
    if kind is nnq.Quantize:
        return _Requantized(lambda m, x: x, QParams(float(module.scale), int(module.zero_point),
                                                      module.dtype))
    if kind is nnq.Dropout:
        return _Requantized(lambda m, x: x, None)
    if kind is nnq.DeQuantize:  # a new tensor object: the float value leaves the grid
        return _Requantized(lambda m, x: x.view_as(x), None, keeps_grid=False)
    weighted: dict[type, tuple[int, Callable[[torch.Tensor], torch.Tensor] | None]] = {
        nnq.Conv1d: (1, None), nnq.Conv2d: (2, None), nnq.Conv3d: (3, None),
        nniq.ConvReLU1d: (1, relu), nniq.ConvReLU2d: (2, relu), nniq.ConvReLU3d: (3, relu),
        nniq.ConvAdd2d: (2, None), nniq.ConvAddReLU2d: (2, relu),
    }
    if kind in weighted:
        nd, after = weighted[kind]
        return _conv(module, nd, after)
    transposed = {nnq.ConvTranspose1d: 1, nnq.ConvTranspose2d: 2, nnq.ConvTranspose3d: 3}
    if kind in transposed:
        return _conv_transpose(module, transposed[kind])
    linear: dict[type, Callable[[torch.Tensor], torch.Tensor] | None] = {
        nnq.Linear: None, nniq.LinearReLU: relu, nniq.LinearTanh: torch.tanh,
    }
    if kind in linear:
        return _weighted(module, F.linear, linear[kind])
    if kind is nniq.LinearLeakyReLU:
        return _weighted(module, F.linear, _leaky(module.negative_slope))
    if kind is nnq.ReLU6:  # clamped on the input's grid (6 requantized)
        return _Requantized(lambda m, x: _requantize_like(x, F.relu6(x)), None)
    if kind is nnq.Hardswish:
        return _Requantized(lambda m, x: F.hardswish(x), out)
    if kind is nnq.ELU:
        alpha = module.alpha
        return _Requantized(lambda m, x: F.elu(x, alpha), out)
    if kind is nnq.LeakyReLU:
        slope = module.negative_slope
        return _Requantized(lambda m, x: F.leaky_relu(x, slope), out)
    if kind is nnq.Sigmoid:
        return _Requantized(lambda m, x: torch.sigmoid(x),
                            QParams(float(module.output_scale), int(module.output_zero_point)))
    if kind is nnq.Softmax:
        dim = module.dim
        return _Requantized(lambda m, x: F.softmax(x, dim if dim is not None else -1), out)
    if kind is nnq.QFunctional:
        return _Functional(out)  # type: ignore[arg-type]
    if kind in (nnq.BatchNorm2d, nnq.BatchNorm3d, nniq.BNReLU2d, nniq.BNReLU3d):
        return _norm(module, out, "batch", kind in (nniq.BNReLU2d, nniq.BNReLU3d))
    if kind is nnq.LayerNorm:
        return _norm(module, out, "layer", False)
    if kind is nnq.GroupNorm:
        return _norm(module, out, "group", False)
    if kind in (nnq.InstanceNorm1d, nnq.InstanceNorm2d, nnq.InstanceNorm3d):
        return _norm(module, out, "instance", False)
    raise _Unsupported("has no stand-in here")


def _requantize_like(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    source = qparams_of(x)
    return source.fake_quant(y) if source is not None else y


def _norm(module: nn.Module, out: QParams | None, kind: str, relu: bool) -> nn.Module:
    tensors = {k: getattr(module, k).detach().float() for k in
               ("weight", "bias", "running_mean", "running_var")
               if isinstance(getattr(module, k, None), torch.Tensor)}
    eps = module.eps

    def compute(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
        w, b = getattr(m, "weight", None), getattr(m, "bias", None)
        if kind == "batch":
            y = F.batch_norm(x, m.running_mean, m.running_var, w, b, False, 0.0, eps)
        elif kind == "layer":
            y = F.layer_norm(x, module.normalized_shape, w, b, eps)
        elif kind == "group":
            y = F.group_norm(x, module.num_groups, w, b, eps)
        else:
            y = F.instance_norm(x, None, None, w, b, True, 0.0, eps)
        return torch.relu(y) if relu else y

    return _Requantized(compute, out, tensors)


# ---------------------------------------------------------------- float ops on quantized tensors


def _op_sets() -> tuple[frozenset[Any], frozenset[Any], dict[Any, QParams]]:
    """Torch functions eager runs on quantized tensors, by what they do to the grid: (kept on
    the input's grid, requantized to the input's qparams, requantized to fixed qparams)."""
    T = torch.Tensor
    kept = frozenset({
        torch.flatten, T.flatten, T.view, T.view_as, T.reshape, T.reshape_as, torch.reshape,
        T.permute, torch.permute, T.transpose, torch.transpose, T.contiguous, T.squeeze,
        torch.squeeze, T.unsqueeze, torch.unsqueeze, T.__getitem__, T.chunk, torch.chunk,
        T.split, torch.split, T.expand, T.expand_as, T.clone, T.detach, F.relu, torch.relu,
        T.relu, F.max_pool1d, F.max_pool2d, F.max_pool3d, torch.max_pool1d, torch.max_pool2d,
        torch.max_pool3d, F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.dropout,
        F.pixel_shuffle, F.pixel_unshuffle, F.pad, T.repeat, T.narrow, torch.narrow,
    })
    requantized = frozenset({
        F.avg_pool1d, F.avg_pool2d, F.avg_pool3d, F.adaptive_avg_pool1d, F.adaptive_avg_pool2d,
        F.adaptive_avg_pool3d, F.interpolate, F.upsample, T.mean, torch.mean, F.hardtanh,
        F.relu6, torch.clamp, T.clamp, torch.cat, torch.concat, torch.stack,
    })
    fixed = {f: QParams(1 / 256, 0) for f in (torch.sigmoid, T.sigmoid, F.sigmoid, F.hardsigmoid)}
    fixed.update({f: QParams(2 / 256, 128) for f in (torch.tanh, T.tanh, F.tanh)})
    return kept, requantized, fixed


def _grid_ops_mode() -> Any:
    from torch.overrides import TorchFunctionMode

    kept, requantized, fixed = _op_sets()
    dequantize = frozenset({torch.Tensor.dequantize, torch.dequantize})

    class GridOps(TorchFunctionMode):
        """While a stand-in model runs: a float op on a tensor standing for a quantized one
        does what eager did on the quantized tensor (keeps its grid, requantizes to the
        input's qparams, or to the op's fixed ones); other ops leave the grid."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in dequantize and qparams_of(args[0]) is not None:
                return args[0].view_as(args[0])  # already its float value: leaves the grid
            if func is torch.quantize_per_tensor:  # in an FX-converted model's forward
                return _quantize_per_tensor(*args, **kwargs)
            if _op_namespace(func) == "quantized":
                raise RouteFailed(ROUTE, REASON, CompatValueError(
                    f"quantized operator {func} called in forward (an FX-converted model's "
                    f"functional ops) has no stand-in here; {FALLBACK}"))
            out = func(*args, **kwargs)
            source = _source_qparams(args)
            if source is None:
                return out
            if func in requantized:
                return source.fake_quant(out)
            if func in fixed:
                return fixed[func].fake_quant(out)
            if func in kept:
                for leaf in torch_internals.tree_leaves(out):
                    _mark(leaf, source)
            return out

    return GridOps()


def _quantize_per_tensor(x: Any, scale: Any, zero_point: Any, dtype: torch.dtype) -> torch.Tensor:
    """``torch.quantize_per_tensor`` on a float tensor, in QDQ form on the tensor's grid."""
    if (not isinstance(x, torch.Tensor) or dtype not in _QRANGE
            or isinstance(scale, torch.Tensor) or isinstance(zero_point, torch.Tensor)):
        kinds = ", ".join("Tensor" if isinstance(a, torch.Tensor) else type(a).__name__
                          for a in (x, scale, zero_point))
        raise RouteFailed(ROUTE, REASON, CompatValueError(
            f"torch.quantize_per_tensor({kinds}, {dtype}) in forward has no stand-in here (a "
            f"float tensor and constant scale and zero point have; an FX-converted model keeps "
            f"them as tensors); {FALLBACK}"))
    return QParams(float(scale), int(zero_point), dtype).fake_quant(x)


def _op_namespace(func: Any) -> str | None:
    """The namespace of a ``torch.ops`` operator (``quantized`` for ``torch.ops.quantized.add``)."""
    if type(func).__module__ != "torch._ops":
        return None
    return getattr(func, "namespace", None) or str(func).partition(".")[0]


def _source_qparams(args: Sequence[Any]) -> QParams | None:
    first = args[0] if args else None
    if isinstance(first, (list, tuple)) and first:
        first = first[0]
    return qparams_of(first)


# ---------------------------------------------------------------- the model


def quantized_modules(model: Any) -> list[tuple[str, nn.Module]]:
    """(path, module) of every eager-quantized module, outermost only (``""``: the model)."""
    if not isinstance(model, nn.Module):
        return []
    found: list[tuple[str, nn.Module]] = []

    def walk(prefix: str, module: nn.Module) -> None:
        if is_quantized_module(module):
            found.append((prefix, module))
            return
        for name, child in module.named_children():
            walk(f"{prefix}.{name}" if prefix else name, child)

    walk("", model)
    return found


def has_quantized_inputs(args: Any, kwargs: Any) -> bool:
    leaves = torch_internals.tree_leaves((args, kwargs or {}))
    return any(isinstance(t, torch.Tensor) and t.is_quantized for t in leaves)


@dataclass
class Swap:
    """The stand-ins of one model's quantized modules, put in place while open."""

    model: nn.Module
    stand_ins: dict[str, nn.Module] = field(default_factory=dict)

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """The stand-ins in place of the quantized modules (the top-level model excepted:
        ``top`` stands in for it); the originals are put back whatever happens."""
        saved: list[tuple[nn.Module, str, nn.Module]] = []
        token = _GRID.set({})
        try:
            for path, stand_in in self.stand_ins.items():
                if not path:
                    continue
                parent_path, _, name = path.rpartition(".")
                parent = self.model.get_submodule(parent_path)
                saved.append((parent, name, parent._modules[name]))
                parent._modules[name] = stand_in
            with _grid_ops_mode():
                yield
        except Exception as exc:
            ours = _route_failure_in(exc)
            if ours is None:
                raise
            raise ours from None  # torch.export wraps what the stand-ins raise
        finally:
            for parent, name, original in reversed(saved):
                parent._modules[name] = original
            _GRID.reset(token)

    @property
    def top(self) -> nn.Module:
        return self.stand_ins.get("", self.model)


def _route_failure_in(exc: BaseException) -> RouteFailed | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, RouteFailed):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def swap_for(model: nn.Module, where: str = "model") -> Swap:
    """The stand-ins for ``model``'s quantized modules; ``RouteFailed`` naming the first one
    without a stand-in (before any capture)."""
    swap = Swap(model)
    for path, module in quantized_modules(model):
        try:
            swap.stand_ins[path] = _stand_in(module)
        except _Unsupported as exc:
            at = f"{where}.{path}" if path else where
            raise RouteFailed(ROUTE, REASON, CompatValueError(
                f"{_name(module)} at {at} {exc}: eager-quantized modules of this kind have no "
                f"torch.export capture; {FALLBACK}")) from None
    return swap


# ---------------------------------------------------------------- quantized inputs and outputs


class Unpacked(nn.Module):
    """The model with each quantized input fed as (value, scale, zero_point) and each quantized
    output returned so, as the TorchScript exporter wrote them."""

    def __init__(self, model: nn.Module, layout: list[QParams | None]) -> None:
        super().__init__()
        self.model = model
        self._layout = layout  # per flat input: its dtype's qparams when it is quantized

    def forward(self, *flat: torch.Tensor) -> Any:
        inputs, it = [], iter(flat)
        for quantized in self._layout:
            value = next(it)
            if quantized is None:
                inputs.append(value)
                continue
            scale, zero_point = next(it), next(it)
            inputs.append((value.to(torch.float32) - zero_point.to(torch.float32))
                          * scale.to(torch.float32))
        for x, quantized in zip(inputs, self._layout):
            if quantized is not None:
                _mark(x, quantized)
        out = self.model(*inputs)
        leaves, spec = torch_internals.tree_flatten(out)
        packed: list[Any] = []
        for leaf in leaves:
            qp = qparams_of(leaf)
            if qp is None:
                packed.append(leaf)
                continue
            ops = torch_internals.quantized_decomposed()
            low, high, storage = _QRANGE[qp.dtype]
            packed.append((ops.quantize_per_tensor(leaf, qp.scale, qp.zero_point, low, high, storage),
                           torch.tensor(qp.scale, dtype=torch.float32),
                           torch.tensor(qp.zero_point, dtype=storage)))
        return torch_internals.tree_unflatten(packed, spec)


def unpack_inputs(args: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[QParams | None]]:
    """Positional ``args`` with each quantized tensor split into (value, scale, zero_point)."""
    flat: list[Any] = []
    layout: list[QParams | None] = []
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.is_quantized:
            if arg.qscheme() not in (torch.per_tensor_affine, torch.per_tensor_symmetric):
                raise CompatValueError(f"a quantized input quantized {arg.qscheme()}: the torch.export "
                                       f"route feeds per-tensor quantized inputs only; {FALLBACK}")
            flat += [arg.int_repr(), torch.tensor(arg.q_scale(), dtype=torch.float64),
                     torch.tensor(arg.q_zero_point(), dtype=torch.int64)]
            layout.append(QParams(arg.q_scale(), arg.q_zero_point(), arg.dtype))
        else:
            flat.append(arg)
            layout.append(None)
    return tuple(flat), layout


def input_names(names: Sequence[str] | None, params: Sequence[str], layout: list[QParams | None]
                ) -> list[str]:
    """Graph input names: the given ones in order, a quantized input's parts named
    ``<name>_value/_scale/_zero_point`` after its forward() parameter where none is given."""
    given = list(names or [])
    out: list[str] = []
    for i, quantized in enumerate(layout):
        base = params[i] if i < len(params) else f"input_{i}"
        parts = [base] if quantized is None else [f"{base}_value", f"{base}_scale", f"{base}_zero_point"]
        for part in parts:
            out.append(given.pop(0) if given else part)
    return out


# ---------------------------------------------------------------- the route's plan

#: the ledger's code and option for what this module does (the model, not a legacy option)
CODE = "ONX001"
OPTION = "model"


def plan(req: Any, out: Any) -> None:
    """Give the route's ``Plan`` the stand-ins (swapped in around the export) and, for quantized
    inputs or a quantized top-level module, the ``Unpacked`` model and its flat inputs."""
    found = quantized_modules(req.model)
    quantized_inputs = has_quantized_inputs(out.args, out.kwargs)
    if not found and not quantized_inputs:
        return
    swap = swap_for(req.model)
    # torch's ONNX registry resolves the operators it translates when the export starts
    torch_internals.quantized_decomposed()
    out.contexts.append(swap.applied)
    if found:
        kinds: dict[str, int] = {}
        for _, module in found:
            kinds[type(module).__name__] = kinds.get(type(module).__name__, 0) + 1
        shown = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(kinds.items()))
        out.record(CODE, OPTION, f"eager-quantized modules ({shown}) exported in QDQ form: int8 "
                   "weights through DequantizeLinear, each output quantized to the module's scale "
                   "and zero point (QuantizeLinear + DequantizeLinear) around the float op")
    if not quantized_inputs and "" not in swap.stand_ins:
        return
    if out.kwargs or out.export_kwargs.get("dynamic_shapes") is not None:
        raise RouteFailed(ROUTE, REASON, CompatValueError(
            "quantized inputs with keyword inputs or dynamic shapes: the torch.export route feeds "
            f"a quantized input as (value, scale, zero_point) only for positional, static inputs; {FALLBACK}"))
    try:
        flat, layout = unpack_inputs(tuple(out.args))
    except CompatValueError as exc:
        raise RouteFailed(ROUTE, REASON, exc) from None
    out.model = Unpacked(swap.top, layout)
    out.args = flat
    params = [p.name for p in (req.params or ()) if p.kind == "pos"]
    out.export_kwargs["input_names"] = input_names(req.input_names, params, layout)
    if quantized_inputs:
        names = [n for n, q in zip(params, layout) if q is not None]
        out.record(CODE, OPTION, f"quantized inputs {names} fed as <name>_value, <name>_scale, "
                   "<name>_zero_point, and a quantized output returned as value, scale, zero "
                   "point, as the TorchScript exporter did")
