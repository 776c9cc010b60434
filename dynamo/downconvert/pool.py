"""AveragePool/MaxPool: the output size of ``ceil_mode`` and AveragePool's opset-19 ``dilations``.

torch (and onnxruntime, at every opset) drop a last pooling window that would start in the right
padding; the ONNX specification says so only from opset 22. Below it, onnx's shape inference
counts that window, so a torch model declaring torch's size fails the strict check (issue 17:
AvgPool2d(3, 3, padding=1, ceil_mode=True) on a 50-wide input is 17 wide for torch, 18 by the
opset-17 rule). Where the sizes disagree and the input's spatial sizes are known, the node is
written with a smaller right padding for which both rules give torch's size: every window keeps
its start, its input elements and (count_include_pad=1) its divisor, so the values are unchanged
(a kernel smaller than its stride may need ceil_mode=0 for that). Where no such padding exists,
the outputs are sliced to torch's size. With a dynamic spatial size the node is left as it is
(onnxruntime computes torch's size at every opset).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Outputs, Rewrite

#: the first opset whose specification drops a window that starts in the right padding
DROPS_PADDING_WINDOWS = 22


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Axis:
    """One spatial axis of a ceil_mode pool: input ``size``, ``kernel``, ``dilation``, ``stride``
    and the ``begin``/``end`` pads."""

    size: int
    kernel: int
    dilation: int
    stride: int
    begin: int
    end: int

    @property
    def extent(self) -> int:
        return (self.kernel - 1) * self.dilation + 1

    @property
    def spec_size(self) -> int:
        """The output size by the opset<22 rule: every window the ceil formula counts."""
        return _ceil_div(self.size + self.begin + self.end - self.extent, self.stride) + 1

    @property
    def torch_size(self) -> int:
        """torch's (and onnxruntime's) size: without a last window starting in the right padding."""
        spec = self.spec_size
        return spec - 1 if (spec - 1) * self.stride >= self.size + self.begin else spec

    @property
    def fitted_end(self) -> int:
        """The right padding at which the last kept window ends exactly where the padded input
        does: there the ceil and the floor rules both give ``torch_size`` (it may be negative)."""
        return (self.torch_size - 1) * self.stride + self.extent - self.size - self.begin


def _axes(rw: Rewrite) -> list[Axis | None] | None:
    """The spatial axes of a ceil_mode pool with explicit pads (None for a dynamic one)."""
    if not rw.attr("ceil_mode", 0) or rw.attr("auto_pad", "NOTSET") != "NOTSET":
        return None
    kernel = list(rw.attr("kernel_shape") or ())
    n = len(kernel)
    x = rw.input(0)
    shape = None if x is None else x.shape
    if not n or shape is None or len(shape) != n + 2:
        return None
    strides = list(rw.attr("strides") or [1] * n)
    pads = list(rw.attr("pads") or [0] * (2 * n))
    dilations = list(rw.attr("dilations") or [1] * n)
    return [Axis(size, kernel[i], dilations[i], strides[i], pads[i], pads[n + i])
            if isinstance(size, int) else None for i, size in enumerate(shape[2:])]


def _disagree(a: Axis | None) -> bool:
    return a is not None and a.spec_size != a.torch_size


def aligned(rw: Rewrite, axes: list[Axis | None]) -> dict[str, object] | None:
    """New ``pads`` (and ``ceil_mode``) for which both rules give torch's size with the same
    values, or None when no such attributes exist."""
    n = len(axes)
    pads = list(rw.attr("pads") or [0] * (2 * n))
    if all(not _disagree(a) or a.fitted_end >= 0 for a in axes):
        # ceil_mode stays: only the axes whose rules disagree get the fitted right padding
        return {"pads": pads[:n] + [a.fitted_end if _disagree(a) else pads[n + i] for i, a in enumerate(axes)]}
    # a kernel smaller than its stride: only the floor rule reaches torch's size. Every axis must
    # then be known, and (count_include_pad=1) no window may end beyond its old right padding,
    # or its divisor would change
    if any(a is None for a in axes):
        return None
    ends = [max(0, a.fitted_end) for a in axes]
    if rw.attr("count_include_pad", 0) and any(a.fitted_end > a.end for a in axes):
        return None
    if any(e >= a.kernel for e, a in zip(ends, axes)):
        return None  # runtimes take pads smaller than the kernel only
    return {"pads": pads[:n] + ends, "ceil_mode": 0}


def _trimmed(rw: Rewrite, axes: list[Axis | None], drop: list[str]) -> Outputs:
    """The node (less ``drop``), each output sliced to torch's size along the axes whose rules disagree
    (a no-op where the runtime drops the window, as onnxruntime does)."""
    cut = [(i + 2, a.torch_size) for i, a in enumerate(axes) if _disagree(a)]
    outs = rw.same(drop=drop)
    starts, ends, where = rw.ints([0] * len(cut)), rw.ints([e for _, e in cut]), rw.ints([i for i, _ in cut])
    return tuple(rw.op("Slice", y, starts, ends, where) for y in outs)


def pool(rw: Rewrite) -> Outputs | None:
    drop: list[str] = []
    if rw.node.op_type == "AveragePool" and rw.target < 19:
        if any(d != 1 for d in rw.attr("dilations", None) or ()):
            raise rw.no_form(19, "dilations other than 1")
        if "dilations" in rw.node.attributes:
            drop.append("dilations")
    axes = _axes(rw) if rw.target < DROPS_PADDING_WINDOWS else None
    if axes is None or not any(_disagree(a) for a in axes):
        return rw.same(drop=drop) if drop else None  # None: the node as it is is its target form
    changes = aligned(rw, axes)
    if changes is None:
        return _trimmed(rw, axes, drop)
    return rw.same(drop=drop, set_attrs=changes)


ADAPTERS = {"AveragePool": pool, "MaxPool": pool}
#: ops whose adapter runs at every conversion, also where their schema did not change (the
#: meaning of ceil_mode did, at opset 22)
EVERY_TARGET = frozenset(ADAPTERS)
