"""What every adapter works with: the ``NoForm`` failure and the ``Rewrite`` context.

An adapter takes one node in its source-opset form (18 on the torch.export route) and returns the
values that replace its outputs, built with ``Rewrite``, or None when the node as it is is its
target form (then only relabelled). Nodes it builds in their opset-18 form are converted again (so a decomposition can
use ``ReduceMean`` with an axes input and let the Reduce adapter lower it); nodes it builds in the
target form are marked ``final``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

#: what an adapter returns: the values replacing the node's outputs, in order
Outputs = Sequence[ir.Value]

#: the lowest opset the adapters write (the input forms of Pad, Clip, Resize, Slice start at 11)
LOWEST = 11


class NoForm(Exception):
    """``op`` cannot be written at opset ``target``; ``needs`` is the lowest opset that can."""

    def __init__(self, op: str, target: int, needs: int, why: str = "") -> None:
        self.op, self.target, self.needs, self.why = op, target, needs, why
        super().__init__(f"{op} has no opset-{target} form" + (f" ({why})" if why else "")
                         + f"; the lowest opset it converts to is {needs}")


class Rewrite:
    """Builds the nodes that replace one node (or are inserted before it) at ``target``."""

    def __init__(self, node: ir.Node, target: int, source: int) -> None:
        self.node = node
        self.target = target
        self.source = source  # the opset of the node's form (its graph's import)
        self.nodes: list[ir.Node] = []

    # --- building ----------------------------------------------------------------------------
    def op(self, op_type: str, *inputs: ir.Value | None, outputs: int = 1, final: bool = False,
           **attrs: Any) -> Any:
        """A new node; returns its output (or the tuple of outputs when ``outputs > 1``).

        ``final`` marks a node written in the target form (it is not converted again)."""
        attributes = {k: v for k, v in attrs.items() if v is not None}
        node = ir.node(op_type, list(inputs), attributes, num_outputs=outputs)
        return self._add(node, final)

    def same(self, inputs: Sequence[ir.Value | None] | None = None, *, drop: Iterable[str] = (),
             set_attrs: Mapping[str, Any] | None = None, op_type: str | None = None) -> Any:
        """The node itself in its target form: same op and attributes except ``drop``/``set_attrs``."""
        src = self.node
        dropped = set(drop) | set(set_attrs or {})
        attrs = [a for name, a in src.attributes.items() if name not in dropped]
        attrs += list(ir.convenience.convert_attributes(dict(set_attrs or {})))
        node = ir.Node("", op_type or src.op_type, list(src.inputs if inputs is None else inputs),
                       attrs, num_outputs=len(src.outputs))
        return self._add(node, final=True, always_tuple=True)

    def _add(self, node: ir.Node, final: bool, always_tuple: bool = False) -> Any:
        if final:
            node.version = self.target
        self.nodes.append(node)
        outs = tuple(node.outputs)
        return outs if always_tuple or len(outs) > 1 else outs[0]

    def const(self, array: Any, dtype: Any = None) -> ir.Value:
        """A Constant node holding ``array`` (its ``value`` form exists at every opset)."""
        tensor = ir.tensor(np.asarray(array, dtype=dtype))
        return self.op("Constant", value=tensor, final=True)

    def ints(self, values: Iterable[int]) -> ir.Value:
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1))

    # --- reading -----------------------------------------------------------------------------
    def input(self, index: int) -> ir.Value | None:
        ins = self.node.inputs
        return ins[index] if index < len(ins) else None

    def attr(self, name: str, default: Any = None) -> Any:
        a = self.node.attributes.get(name)
        return default if a is None or a.is_ref() else a.value

    def no_form(self, needs: int, why: str = "") -> NoForm:
        return NoForm(self.node.op_type, self.target, needs, why)

    def const_ints(self, index: int, needs: int, what: str) -> list[int] | None:
        """The constant int list at input ``index`` (None when the input is absent); raises
        ``NoForm`` when it is computed at run time, since the target form wants an attribute."""
        value = self.input(index)
        if value is None:
            return None
        tensor = ir.convenience.get_const_tensor(value)
        if tensor is None:
            raise self.no_form(needs, f"its {what} input is computed at run time; opset {self.target} "
                                      "takes it as an attribute")
        return [int(v) for v in np.asarray(tensor.numpy()).reshape(-1)]

    def rank(self, value: ir.Value | None) -> int | None:
        shape = None if value is None else value.shape
        return None if shape is None else len(shape)

    def dtype(self, value: ir.Value | None) -> ir.DataType | None:
        return None if value is None else value.dtype
