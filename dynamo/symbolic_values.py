"""Values, nodes and types a legacy symbolic sees through our graph context (no TorchScript).

They answer what symbolics ask of TorchScript values: ``x.type().sizes()/dim()/scalarType()/
dtype()``, ``x.node().kind()``, ``x.node()["value"]`` of a constant, ``mustBeNone()``,
``x.setType(...)``. A graph input wraps an ONNX IR value of the exporter's graph; every other
value is produced by a ``SymbolicNode`` that ``symbolic_graph`` later turns into ONNX IR.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch

_IDS = itertools.count()

#: torch dtype, TorchScript scalar-type name, ScalarType code, ONNX IR DataType name
DTYPES: tuple[tuple[torch.dtype, str, int, str], ...] = (
    (torch.uint8, "Byte", 0, "UINT8"),
    (torch.int8, "Char", 1, "INT8"),
    (torch.int16, "Short", 2, "INT16"),
    (torch.int32, "Int", 3, "INT32"),
    (torch.int64, "Long", 4, "INT64"),
    (torch.float16, "Half", 5, "FLOAT16"),
    (torch.float32, "Float", 6, "FLOAT"),
    (torch.float64, "Double", 7, "DOUBLE"),
    (torch.complex64, "ComplexFloat", 9, "COMPLEX64"),
    (torch.complex128, "ComplexDouble", 10, "COMPLEX128"),
    (torch.bool, "Bool", 11, "BOOL"),
    (torch.bfloat16, "BFloat16", 15, "BFLOAT16"),
)
#: ONNX TensorProto data type number of each torch dtype
ONNX_CODES = {torch.uint8: 2, torch.int8: 3, torch.int16: 5, torch.int32: 6, torch.int64: 7,
              torch.float16: 10, torch.float32: 1, torch.float64: 11, torch.bool: 9,
              torch.bfloat16: 16, torch.complex64: 14, torch.complex128: 15}


def dtype_from_scalar_code(code: int) -> torch.dtype:
    for dtype, _, c, _ in DTYPES:
        if c == code:
            return dtype
    raise ValueError(f"unknown scalar type code {code}")


def scalar_code(dtype: torch.dtype) -> int:
    """The ScalarType number symbolics receive for a ``dtype=`` argument."""
    for d, _, c, _ in DTYPES:
        if d == dtype:
            return c
    raise ValueError(f"no scalar type code for {dtype}")


def dtype_from_onnx(code: int) -> torch.dtype | None:
    return next((d for d, c in ONNX_CODES.items() if c == code), None)


def dtype_from_ir(dtype: Any) -> torch.dtype | None:
    if dtype is None:
        return None
    return next((d for d, _, _, name in DTYPES if name == dtype.name), None)


def ir_dtype(dtype: torch.dtype | None) -> Any:
    import onnx_ir as ir

    name = next((n for d, _, _, n in DTYPES if d == dtype), None)
    return getattr(ir.DataType, name) if name else None


class SymbolicType:
    """``value.type()``: a tensor type (dtype, sizes with None for unknown), a list or None type."""

    def __init__(self, dtype: torch.dtype | None = None, sizes: Sequence[int | None] | None = None,
                 kind: str = "TensorType") -> None:
        self._dtype = dtype
        self._sizes = None if sizes is None else list(sizes)
        self._kind = kind

    def kind(self) -> str:
        return self._kind

    def dtype(self) -> torch.dtype | None:
        return self._dtype

    def scalarType(self) -> str | None:
        return next((n for d, n, _, _ in DTYPES if d == self._dtype), None)

    def dim(self) -> int | None:
        return None if self._sizes is None else len(self._sizes)

    def sizes(self) -> list[int]:
        if self._sizes is None or any(s is None for s in self._sizes):
            raise RuntimeError("sizes() of a tensor whose shape is not fully known (use varyingSizes())")
        return list(self._sizes)  # type: ignore[arg-type]

    def varyingSizes(self) -> list[int | None] | None:
        return None if self._sizes is None else list(self._sizes)

    symbolic_sizes = varyingSizes

    def isCompleteTensor(self) -> bool:
        return self._dtype is not None and self._sizes is not None and None not in self._sizes

    def with_sizes(self, sizes: Sequence[int | None] | None) -> SymbolicType:
        return SymbolicType(self._dtype, sizes, self._kind)

    def with_dtype(self, dtype: torch.dtype) -> SymbolicType:
        return SymbolicType(dtype, self._sizes, self._kind)

    def isSubtypeOf(self, other: Any) -> bool:
        other_kind = other.kind() if callable(getattr(other, "kind", None)) else type(other).__name__
        return self._kind == other_kind or (self._kind == "TensorType" and "Tensor" in str(other_kind))

    def __repr__(self) -> str:
        if self._kind != "TensorType":
            return self._kind
        dims = "?" if self._sizes is None else ", ".join("*" if s is None else str(s) for s in self._sizes)
        return f"{self.scalarType() or 'Tensor'}({dims})"

    __str__ = __repr__


def as_symbolic_type(t: Any) -> SymbolicType:
    """``setType``'s argument: ours, or a TorchScript TensorType a symbolic built with torch."""
    if isinstance(t, SymbolicType):
        return t
    dtype = t.dtype() if callable(getattr(t, "dtype", None)) else None
    sizes = t.varyingSizes() if callable(getattr(t, "varyingSizes", None)) else None
    return SymbolicType(dtype, sizes)


class SymbolicNode:
    """A node the symbolic built (or a graph input's ``prim::Param``)."""

    def __init__(self, kind: str, inputs: Sequence[Any], attrs: dict[str, tuple[str, Any]],
                 n_outputs: int, graph: Any = None) -> None:
        self._kind = kind
        self._inputs = list(inputs)
        self.attrs = attrs  # name -> (kind suffix, value)
        self._outputs = [SymbolicValue(self) for _ in range(n_outputs)]
        self.graph = graph
        self.order = next(_IDS)

    def kind(self) -> str:
        return self._kind

    def inputs(self) -> list[Any]:
        return list(self._inputs)

    def outputs(self) -> list[SymbolicValue]:
        return list(self._outputs)

    def output(self) -> SymbolicValue:
        if len(self._outputs) != 1:
            raise RuntimeError(f"{self._kind} has {len(self._outputs)} outputs, not one")
        return self._outputs[0]

    def outputsSize(self) -> int:
        return len(self._outputs)

    def mustBeNone(self) -> bool:
        return self._kind == "prim::Constant" and not self.attrs

    def attributeNames(self) -> list[str]:
        return list(self.attrs)

    def hasAttribute(self, name: str) -> bool:
        return name in self.attrs

    hasAttributeS = hasAttribute

    def kindOf(self, name: str) -> str:
        return self.attrs[name][0]

    def __getitem__(self, name: str) -> Any:
        return self.attrs[name][1]

    def _get(self, name: str) -> Any:
        return self.attrs[name][1]

    t = i = f = s = ss = fs = ts = _get

    def is_(self, name: str) -> Any:
        return self.attrs[name][1]

    def blocks(self) -> list[Any]:
        return []

    def addBlock(self) -> Any:
        from .symbolic_limits import REASON_BLOCKS, LegacyOnly

        raise LegacyOnly(REASON_BLOCKS, f"blocks (node.addBlock on {self._kind}: If/Loop built in the symbolic)")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        from .symbolic_limits import REASON_RAW_GRAPH, LegacyOnly

        raise LegacyOnly(REASON_RAW_GRAPH, f"the TorchScript node method node.{name}")

    def scopeName(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"<{self._kind} node>"


class SymbolicValue:
    """A value of our graph context. ``ir`` is the exporter's ONNX IR value once known."""

    def __init__(self, node: SymbolicNode, type_: SymbolicType | None = None, ir: Any = None,
                 python: Any = None) -> None:
        self._node = node
        self._type = type_ or SymbolicType()
        self.ir = ir
        self.python = python  # the Python list a ListConstruct stands for
        self._name = f"v{next(_IDS)}"

    def node(self) -> SymbolicNode:
        return self._node

    def type(self) -> SymbolicType:
        return self._type

    def setType(self, t: Any) -> SymbolicValue:
        self._type = as_symbolic_type(t)
        return self

    def debugName(self) -> str:
        return self._name

    def setDebugName(self, name: str) -> SymbolicValue:
        self._name = name
        return self

    def isCompleteTensor(self) -> bool:
        return self._type.isCompleteTensor()

    def uses(self) -> list[Any]:
        return []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        from .symbolic_limits import REASON_RAW_GRAPH, LegacyOnly

        raise LegacyOnly(REASON_RAW_GRAPH, f"the TorchScript value method value.{name}")

    def __repr__(self) -> str:
        return f"%{self._name} : {self._type!r} ({self._node.kind()})"


def is_symbolic_value(x: Any) -> bool:
    return isinstance(x, SymbolicValue)


def type_of_ir(value: Any) -> SymbolicType:
    """The type of an exporter (ONNX IR) value: dtype and sizes, symbolic dims as None."""
    shape = getattr(value, "shape", None)
    sizes = None if shape is None else [d if isinstance(d, int) else None for d in shape]
    return SymbolicType(dtype_from_ir(getattr(value, "dtype", None)), sizes)


def type_of_tensor(t: torch.Tensor) -> SymbolicType:
    return SymbolicType(t.dtype, list(t.shape))
