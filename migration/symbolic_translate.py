"""A legacy symbolic's source -> an onnxscript translation for ``custom_translation_table``.

Reads the ``def`` (stdlib ``ast``: the user's code is never run) and writes a plain Python
function torch's new exporter traces with onnxscript's tracer:

* ``g.op("X", a, b, foo_i=1)`` -> ``op.X(a, b, foo=1)`` (``op`` is onnxscript's opset 18); an
  attribute that became an input by opset 18 (``Unsqueeze``'s ``axes_i``...) becomes a constant
  input; ``value_t=`` tensors go through ``ir.tensor``; ``_f`` given an int becomes a float;
* ``g.op("dom::X", ...)`` -> a custom op of domain ``dom`` version 1 (what the TorchScript
  exporter writes without ``custom_opsets``), declared once in the generated module with the
  schema torch's recorder needs (:data:`CUSTOM_OP_HELPER`); ``outputs=N`` is its output count;
* ``@parse_args`` arguments and ``_get_const`` / ``_maybe_get_const`` / ``_maybe_get_scalar``
  values are plain Python values (the exporter passes non-tensor arguments as Python values);
  ``_is_none(x)`` is ``x is None``;
* whatever has no meaning there is a :class:`Blocker` naming its line: Python branching on a
  graph value, TorchScript types (``.type()``, ``setType``), ``g.at``, other ``g`` methods,
  calls to the TorchScript exporter's own symbolics or helpers.

The facts about ``g.op`` (attribute suffixes, domains, attributes now inputs) are
``compat.symbolic_ops``'s, shared with the torch.export route's graph context.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from compat import symbolic_ops, torch_apis

from .astwalk import clone, walk_in_order
from .generated import Entry

OPSET_IMPORT = "from onnxscript import opset18 as op"
IR_IMPORT = "import onnx_ir as ir"
TORCH_IMPORT = "import torch"
CUSTOM_OP = "custom_op"
#: the generated module's declaration of custom-domain ops (an Entry of its own)
CUSTOM_OP_HELPER = '''def custom_op(domain: str, name: str, outputs: int | None = 1,
              attributes: dict | None = None, version: int = 1) -> Callable:
    """An op of a custom ONNX domain with the schema torch's exporter records it by: any
    number of inputs of any tensor type, ``outputs`` outputs (None: each call says how many,
    ``outputs=``), ``attributes`` (name -> kind). A Python number given as an input becomes a
    0-d constant of its own type (int64, float, bool), as the TorchScript exporter wrote it."""
    types = [f"tensor({t})" for t in ("float", "double", "float16", "bfloat16", "int8", "int16",
                                      "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                      "bool", "string")]
    param = onnx.defs.OpSchema.FormalParameter
    nodes = {}

    def node_of(count: int) -> onnxscript.values.Op:
        if count not in nodes:
            schema = onnx.defs.OpSchema(
                name, domain, version,
                inputs=[param("inputs", "T", is_homogeneous=False, min_arity=0,
                              param_option=onnx.defs.OpSchema.FormalParameterOption.Variadic)],
                outputs=[param(f"output{i}", f"O{i}") for i in range(count)],
                type_constraints=[("T", types, ""), *((f"O{i}", types, "") for i in range(count))],
                attributes=[onnx.defs.OpSchema.Attribute(
                    key, getattr(onnx.defs.OpSchema.AttrType, kind), "", required=False)
                    for key, kind in (attributes or {}).items()],
            )
            nodes[count] = onnxscript.values.Op(onnxscript.values.Opset(domain, version), name,
                                                schema)
        return nodes[count]

    def call(*inputs, outputs=outputs, **attrs):
        return node_of(outputs)(*(op.Constant(value=ir.tensor(v))
                                  if isinstance(v, (bool, int, float)) else v for v in inputs),
                                **attrs)

    return call'''
#: the generated module's readers of a traced value's type (Entries of their own), for what
#: TorchScript's ``value.type().dtype()`` / ``.scalarType()`` gave
TYPE_HELPERS = {
    "torch_dtype": '''def torch_dtype(value: ir.Value) -> torch.dtype:
    """A traced value's torch dtype (TorchScript's ``value.type().dtype()``)."""
    return {ir.DataType.FLOAT: torch.float32, ir.DataType.DOUBLE: torch.float64,
            ir.DataType.FLOAT16: torch.float16, ir.DataType.BFLOAT16: torch.bfloat16,
            ir.DataType.INT8: torch.int8, ir.DataType.INT16: torch.int16,
            ir.DataType.INT32: torch.int32, ir.DataType.INT64: torch.int64,
            ir.DataType.UINT8: torch.uint8, ir.DataType.BOOL: torch.bool,
            ir.DataType.COMPLEX64: torch.complex64,
            ir.DataType.COMPLEX128: torch.complex128}[value.dtype]''',
    "scalar_type": '''def scalar_type(value: ir.Value) -> str:
    """A traced value's torch scalar type name (TorchScript's ``value.type().scalarType()``)."""
    return {ir.DataType.FLOAT: "Float", ir.DataType.DOUBLE: "Double",
            ir.DataType.FLOAT16: "Half", ir.DataType.BFLOAT16: "BFloat16",
            ir.DataType.INT8: "Char", ir.DataType.INT16: "Short", ir.DataType.INT32: "Int",
            ir.DataType.INT64: "Long", ir.DataType.UINT8: "Byte", ir.DataType.BOOL: "Bool",
            ir.DataType.COMPLEX64: "ComplexFloat",
            ir.DataType.COMPLEX128: "ComplexDouble"}[value.dtype]''',
}
TYPE_HELPER_IMPORTS = ("import onnx_ir as ir", "import torch")
MATCHES_EVERY_NODE = "matches_every_node"
#: the decorator of an aten op's translation for a target torch before 2.11
#: (``torch_apis.ATEN_OVERRIDE_ANY_SIGNATURE``; the shim's own is ``dynamo/translation_fit.py``)
MATCHES_EVERY_NODE_HELPER = '''def matches_every_node(op_name: str) -> Callable:
    """A translation of the aten op ``op_name`` declaring no parameters, given every argument of
    the op: torch 2.9-2.10 match a translation's parameter names against the op's arguments and
    silently use their own translation when one differs (pytorch/pytorch#165083 removed that in
    torch 2.11); with none declared it matches every node of its op. Those torches also leave
    an argument at its default out of the node (2.11 writes it): the op's defaults fill it."""

    def decorate(translation: Callable) -> Callable:
        def every_node(*args, **kwargs):
            namespace, _, name = op_name.partition("::")
            overload = getattr(getattr(torch.ops, namespace), name).default
            for signature in get_signature_for_torch_op(overload) or ():
                try:
                    bound = signature.bind(*args, **kwargs)
                except TypeError:
                    continue
                bound.apply_defaults()
                return translation(*bound.args, **bound.kwargs)
            return translation(*args, **kwargs)

        every_node.__name__ = translation.__name__
        every_node.__qualname__ = translation.__qualname__
        every_node.__doc__ = translation.__doc__
        every_node.__signature__ = inspect.Signature()
        return every_node

    return decorate'''
MATCHES_EVERY_NODE_IMPORTS = ("import inspect", "import torch",
                              "from collections.abc import Callable",
                              "from torch.fx.operator_schemas import get_signature_for_torch_op")
_TYPE_READS = {"dtype": "torch_dtype", "scalarType": "scalar_type"}
CUSTOM_OP_IMPORTS = ("import onnx", "import onnxscript", "from collections.abc import Callable",
                     "import onnx_ir as ir", "from onnxscript import opset18 as op")

#: symbolic_helper functions whose value is their first argument in a translation
_PYTHON_VALUE = frozenset({"_get_const", "_maybe_get_const", "_maybe_get_scalar", "_parse_arg",
                           "_get_const_or_none"})
_PARSE_ARGS = "parse_args"
_UNSUPPORTED = frozenset({"_unimplemented", "_onnx_unsupported", "_onnx_opset_unsupported"})
_TS_TYPE_METHODS = frozenset({"type", "setType", "node", "debugName", "sizes", "scalarType",
                              "isCompleteTensor", "unique", "inputs", "outputs", "dim",
                              "varyingSizes", "uses", "setDebugName", "copyMetadata"})
#: symbolic_helper's shape readers -> their argument count (the traced value's ``shape`` then)
_SHAPE_HELPERS = {"_get_tensor_sizes": 1, "_get_tensor_rank": 1, "_get_tensor_dim_size": 2}
_TS_HELPERS = frozenset({"_get_tensor_sizes", "_get_tensor_rank", "_get_tensor_dim_size",
                         "_unimplemented", "_onnx_unsupported", "_onnx_opset_unsupported",
                         "_type_promote_from_values", "_is_tensor", "_is_list", "_is_value",
                         "_is_packed_list", "_try_get_scalar_type", "_is_fp", "_is_bool",
                         "_maybe_cast_reduce_op_input", "_size_helper"}) - set(_SHAPE_HELPERS)
_CONSTANT_KEYS = {"INTS": "value_ints", "FLOAT": "value_float"}
#: symbolic_helper.cast_pytorch_to_onnx's keys (torch's scalar type names) -> ir.DataType names
_ONNX_TYPES = {"Byte": "UINT8", "Char": "INT8", "Double": "DOUBLE", "Float": "FLOAT",
               "Half": "FLOAT16", "Int": "INT32", "Long": "INT64", "Short": "INT16",
               "Bool": "BOOL", "ComplexFloat": "COMPLEX64", "ComplexDouble": "COMPLEX128",
               "BFloat16": "BFLOAT16", "Undefined": "UNDEFINED"}


@dataclass(frozen=True)
class Blocker:
    """Why a symbolic has no translation: the construct and its line in the user's file."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass(frozen=True)
class CustomOp:
    """A custom-domain op a translation calls: its variable in the generated module."""

    domain: str
    name: str
    outputs: int | None  # None: each call gives its count (``outputs=``)
    attributes: tuple[tuple[str, str], ...]  # (name, ONNX attribute kind)
    version: int = 1

    @property
    def var(self) -> str:
        suffix = "_n" if self.outputs is None else f"_{self.outputs}" if self.outputs != 1 else ""
        return f"{_ident(self.domain)}_{self.name}{suffix}"

    def declaration(self) -> str:
        attrs = ", ".join(f'"{k}": "{v}"' for k, v in self.attributes)
        extra = (f", outputs={self.outputs}" if self.outputs != 1 else "") + \
            (f", attributes={{{attrs}}}" if attrs else "") + \
            (f", version={self.version}" if self.version != 1 else "")
        return f'{self.var} = {CUSTOM_OP}("{self.domain}", "{self.name}"{extra})'


@dataclass
class Translation:
    """The translation of one symbolic: ``code`` (a ``def name(...)``) and what it needs."""

    name: str
    code: str = ""
    imports: set[str] = field(default_factory=set)
    custom_ops: dict[str, CustomOp] = field(default_factory=dict)
    blockers: list[Blocker] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)  # same-module functions it calls with g
    type_helpers: set[str] = field(default_factory=set)  # TYPE_HELPERS it calls

    @property
    def ok(self) -> bool:
        return not self.blockers


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text)


def _callee(node: ast.expr) -> str:
    """``a.b.c`` -> ``c``; ``f`` -> ``f``; anything else ''."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in walk_in_order(node) if isinstance(n, ast.Name)}


def _parse_args(func: ast.FunctionDef) -> list[str] | None:
    for dec in func.decorator_list:
        if isinstance(dec, ast.Call) and _callee(dec.func) == _PARSE_ARGS \
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in dec.args):
            return [a.value for a in dec.args]
    return None


class _Translator(ast.NodeTransformer):
    def __init__(self, g: str, graph: set[str], local_functions: set[str], line0: int,
                 torch_names: frozenset[str] = frozenset(), vararg: bool = False,
                 strings: dict[str, str] | None = None,
                 sequences: frozenset[str] = frozenset(), opset: int | None = None) -> None:
        self.g = g
        self.opset = opset  # the opset the symbolic was written for, if known
        self.vararg = vararg  # g arrives inside *g: the symbolic forwards it to another one
        self.strings = strings or {}  # names bound once to a string literal
        self.sequences = sequences  # names that only ever hold a list or tuple
        self.torch_names = torch_names  # names bound to torch's own symbolics
        self.graph = graph  # names holding graph values (tensors)
        self.local = local_functions
        self.out = Translation("")
        self.line0 = line0

    def block(self, node: ast.AST, reason: str) -> None:
        line = getattr(node, "lineno", self.line0)
        if all(b.line != line or b.reason != reason for b in self.out.blockers):
            self.out.blockers.append(Blocker(line, reason))

    # -- control flow on graph values ------------------------------------------------------
    def _check_test(self, node: ast.AST, test: ast.expr) -> None:
        if _is_none_test(test):
            return
        used = sorted(_data_names(test) & self.graph)
        if used:
            self.block(node, f"Python branching on a graph value ({', '.join(used)}): the "
                             "translation is traced once, the branch would be baked")

    def visit_If(self, node: ast.If) -> ast.AST:
        self._check_test(node, node.test)
        return self.generic_visit(node)

    def visit_While(self, node: ast.While) -> ast.AST:
        self._check_test(node, node.test)
        return self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        """``x is None or _is_none(x)`` -> ``x is None`` (both tests read the same there)."""
        self.generic_visit(node)
        kept: dict[str, ast.expr] = {}
        for v in node.values:
            kept.setdefault(ast.unparse(v), v)
        node.values = list(kept.values())
        return node.values[0] if len(node.values) == 1 else node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self._check_test(node, node.test)
        return self.generic_visit(node)

    # -- calls --------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == self.g:
            if func.attr == "op":
                return self._op(node)
            if func.attr == "at":
                self.block(node, "g.at(...) writes an ATen node: its schema is unknown to "
                                 "torch's new exporter")
            else:
                self.block(node, f"g.{func.attr}(...) is a TorchScript graph method")
            return node
        name = _callee(func)
        if self.vararg and any(isinstance(a, ast.Starred) and isinstance(a.value, ast.Name)
                               and a.value.id == self.g for a in node.args):
            return self._vararg_call(node)
        shape = self._shape_read(node)
        if shape is not None:
            return shape
        if name == "_is_value" and len(node.args) == 1:
            # a graph value is an ir.Value in a translation too; the test runs at trace time
            self.out.imports.add(IR_IMPORT)
            return ast.Call(ast.Name("isinstance"), [self.visit(node.args[0]),
                                                     ast.Attribute(ast.Name("ir"), "Value")], [])
        if isinstance(func, ast.Attribute) and func.attr == "setType" and len(node.args) == 1:
            return self.visit(func.value)  # the exporter types outputs from the captured graph
        if name in _PYTHON_VALUE and node.args:
            return self.visit(node.args[0])
        if name == "_generate_wrapped_number" and len(node.args) == 2:
            # a Python number: the tracer makes it a constant of its operand's dtype, as the
            # TorchScript exporter's scalar type analysis does for a wrapped number
            return self.visit(node.args[1])
        if name == "_slice_helper":  # (g, input, axes, starts, ends, steps=None): opset 10's Slice
            given = dict(zip(("input", "axes", "starts", "ends", "steps"), node.args[1:]))
            given.update({k.arg: k.value for k in node.keywords if k.arg})
            if {"input", "axes", "starts", "ends"} <= set(given) and len(given) == len(
                    node.args) - 1 + len(node.keywords):
                self.out.imports.add(OPSET_IMPORT)
                names = ["starts", "ends", "axes", *(["steps"] if "steps" in given else [])]
                inputs = [self.visit(given["input"]),
                          *(self._constant(self.visit(given[n]), "INTS") for n in names)]
                return ast.Call(ast.Attribute(ast.Name("op"), "Slice"), inputs, [])
        if name == "_is_none" and len(node.args) == 1:
            return ast.Compare(self.visit(node.args[0]), [ast.Is()], [ast.Constant(None)])
        if isinstance(func, ast.Attribute) and func.attr in _TS_TYPE_METHODS \
                and not (func.attr == "type" and node.args):  # Tensor.type(dtype): torch's
            self.block(node, f".{func.attr}() reads TorchScript type information")
            return node
        if name in _TS_HELPERS or (name.startswith("_") and isinstance(func, ast.Attribute)
                                   and _callee(func.value) in ("symbolic_helper", "sym_help")):
            self.block(node, f"calls the TorchScript exporter's helper {name}")
            return node
        passes_g = any(isinstance(a, ast.Name) and a.id == self.g for a in node.args)
        torch_symbolic = name if (isinstance(func, ast.Name) and name in self.torch_names) or (
            isinstance(func, ast.Attribute) and "opset" in ast.unparse(func.value)) else ""
        g_first = passes_g and isinstance(node.args[0], ast.Name) and node.args[0].id == self.g
        if g_first and torch_symbolic.startswith("_cast_") and len(node.args) >= 2 \
                and torch_symbolic[len("_cast_"):] in _ONNX_TYPES:
            # torch's _cast_Long(g, x, non_blocking) & co.: one Cast
            self.out.imports |= {OPSET_IMPORT, IR_IMPORT}
            to = ast.Attribute(ast.Attribute(ast.Name("ir"), "DataType"),
                               _ONNX_TYPES[torch_symbolic[len("_cast_"):]])
            return ast.Call(ast.Attribute(ast.Name("op"), "Cast"), [self.visit(node.args[1])],
                            [ast.keyword("to", to)])
        if g_first and torch_symbolic in symbolic_ops.TORCHLIB_MODULES:
            # torch's own symbolic of an aten op -> the new exporter's function for that op
            module = symbolic_ops.TORCHLIB_MODULES[torch_symbolic]
            if torch_symbolic == "softmax" and not node.keywords and (len(node.args) == 3 or (
                    len(node.args) == 4 and isinstance(node.args[3], ast.Constant)
                    and node.args[3].value is None)):
                # softmax(g, x, dim[, None]): one Softmax on that axis (torchlib's needs x's
                # rank, unknown inside a translation)
                self.out.imports.add(OPSET_IMPORT)
                return ast.Call(ast.Attribute(ast.Name("op"), "Softmax"), [
                    self.visit(node.args[1])], [ast.keyword("axis", self.visit(node.args[2]))])
            if torch_symbolic == "squeeze" and len(node.args) == 3 and not node.keywords:
                # squeeze(g, x, dim): the Squeeze it writes where x's size there is 1 or
                # unknown (torchlib's squeeze.dim needs x's rank, unknown after custom ops)
                return ast.Call(ast.Attribute(ast.Name("op"), "Squeeze"), [
                    self.visit(node.args[1]), self._constant(self.visit(node.args[2]), "INTS")], [])
            self.out.imports.add(f"from onnxscript.function_libs.torch_lib.ops.{module} "
                                 f"import aten_{torch_symbolic}")
            return ast.Call(ast.Name(f"aten_{torch_symbolic}"),
                            [self.visit(a) for a in node.args[1:]],
                            [self.visit(k) for k in node.keywords])
        if passes_g:
            if isinstance(func, ast.Name) and func.id in self.local:
                if func.id not in self.out.helpers:
                    self.out.helpers.append(func.id)
                node.args = [a for a in node.args if not (isinstance(a, ast.Name)
                                                          and a.id == self.g)]
                return self.generic_visit(node)
            self.block(node, f"calls {ast.unparse(func)}(g, ...), a TorchScript symbolic")
            return node
        return self.generic_visit(node)

    def _vararg_call(self, node: ast.Call) -> ast.AST:
        """``f(*args)`` in a symbolic taking ``(*args)``: a same-module symbolic gets the
        arguments as they are (the exporter passes no graph context)."""
        func = node.func
        if not (isinstance(func, ast.Name) and func.id in self.local):
            self.block(node, f"calls {ast.unparse(func)}(*{self.g}), a TorchScript symbolic")
            return node
        if func.id not in self.out.helpers:
            self.out.helpers.append(func.id)
        node.args = [a if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name)
                     and a.value.id == self.g else self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        return node

    def _shape_read(self, node: ast.Call) -> ast.expr | None:
        """A read of a value's static shape -> the traced value's ``shape`` (an ``ir.Shape``:
        ints, symbolic dims where the axis is dynamic), None if ``node`` is no such read."""
        func = node.func
        name = _callee(func)
        if isinstance(func, ast.Attribute) and name in ("sizes", "dim") and not node.args \
                and isinstance(func.value, ast.Call) and _callee(func.value.func) == "type" \
                and isinstance(func.value.func, ast.Attribute) and not func.value.args:
            value = self.visit(func.value.func.value)
            wrap = "list" if name == "sizes" else "len"
            return ast.Call(ast.Name(wrap), [ast.Attribute(value, "shape")], [])
        if isinstance(func, ast.Attribute) and name in _TYPE_READS and not node.args \
                and isinstance(func.value, ast.Call) and _callee(func.value.func) == "type" \
                and isinstance(func.value.func, ast.Attribute) and not func.value.args:
            helper = _TYPE_READS[name]
            self.out.type_helpers.add(helper)
            return ast.Call(ast.Name(helper), [self.visit(func.value.func.value)], [])
        if isinstance(func, ast.Attribute) and name == "mustBeNone" and not node.args \
                and isinstance(func.value, ast.Call) and _callee(func.value.func) == "node" \
                and isinstance(func.value.func, ast.Attribute) and not func.value.args:
            # an optional input given as None arrives as None in a translation
            return ast.Compare(self.visit(func.value.func.value), [ast.Is()], [ast.Constant(None)])
        if name == "_unsqueeze_helper" and len(node.args) == 3 and not node.keywords:
            self.out.imports.add(OPSET_IMPORT)
            return ast.Call(ast.Attribute(ast.Name("op"), "Unsqueeze"), [
                self.visit(node.args[1]), self._constant(self.visit(node.args[2]), "INTS")], [])
        if name in _SHAPE_HELPERS and len(node.args) == _SHAPE_HELPERS[name]:
            shape = ast.Attribute(self.visit(node.args[0]), "shape")
            if name == "_get_tensor_dim_size":
                return ast.Subscript(shape, self.visit(node.args[1]))
            return ast.Call(ast.Name("list" if name == "_get_tensor_sizes" else "len"),
                            [shape], [])
        return None

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and value.func.attr == "setDebugName":
            return None  # a value's debug name: the new exporter names values itself
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if _callee(node.value) == "TensorProtoDataType":
            self.out.imports.add(IR_IMPORT)
            return ast.Attribute(ast.Attribute(ast.Name("ir"), "DataType"), node.attr)
        return self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if _callee(node.value) in ("cast_pytorch_to_onnx", "scalar_name_to_onnx") \
                and isinstance(node.slice, ast.Constant) and node.slice.value in _ONNX_TYPES:
            self.out.imports.add(IR_IMPORT)
            return ast.Attribute(ast.Attribute(ast.Name("ir"), "DataType"),
                                 _ONNX_TYPES[node.slice.value])
        return self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> ast.AST:
        if all(_TS_MODULES.match(a.name) for a in node.names):
            return ast.Pass()  # its names, if used, are blockers where they are called
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        if isinstance(node.value, ast.Call) and _callee(node.value.func) in _UNSUPPORTED \
                and not node.value.keywords:
            # the TorchScript exporter refuses the op there: so does the translation
            parts = [a if isinstance(a, ast.Constant) and isinstance(a.value, str)
                     else ast.FormattedValue(self.visit(a), -1) for a in node.value.args]
            message = ast.JoinedStr([v for p in parts for v in (p, ast.Constant(", "))][:-1])
            if all(isinstance(p, ast.Constant) for p in parts):
                message = ast.Constant(", ".join(p.value for p in parts))
            return ast.Raise(ast.Call(ast.Name("NotImplementedError"), [message], []))
        if isinstance(node.value, ast.Tuple) and any(
                isinstance(e, ast.Constant) and e.value is None for e in node.value.elts):
            self.block(node, "returns None for an output: torch's exporter needs a value for "
                             "each output of the op")
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        """A helper defined inside the symbolic taking ``g`` first: its ``g`` goes too."""
        params = node.args.posonlyargs or node.args.args
        if params and params[0].arg == self.g:
            params.pop(0)
            self.local.add(node.name)
        return self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        if node.module and re.match(r"torch\.onnx\.(symbolic_|_internal)", node.module):
            return ast.Pass()  # its names, if used, are blockers where they are called
        if node.module == "torch.onnx":  # TensorProtoDataType reads become ir.DataType; torch's
            # symbolic modules' names are translated or blockers where they are called
            node.names = [a for a in node.names if a.name != "TensorProtoDataType"
                          and not a.name.startswith("symbolic_")]
            if not node.names:
                return ast.Pass()
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.g:
            self.block(node, f"reads *{self.g}, which holds the graph context, other than to "
                             "forward it" if self.vararg
                       else "uses the graph context g other than through g.op")
        return node

    def _op(self, node: ast.Call) -> ast.AST:
        full = _static_str(node.args[0], self.strings) if node.args else None
        if full is None:
            self.block(node, "g.op with an op name that is not a string known before export")
            return node
        domain, opname = symbolic_ops.split_op_name(full)
        if domain in symbolic_ops.NON_ONNX_NAMESPACES:
            self.block(node, f"g.op('{full}') writes a TorchScript node")
            return node
        inputs = [self.visit(a) for a in node.args[1:]]
        attrs: list[tuple[str, str, ast.expr]] = []
        outputs: int | None = 1
        count: ast.expr | None = None  # a count known at trace time only
        for kw in node.keywords:
            if kw.arg is None:
                self.block(node, "g.op(**kwargs): its attributes are not known")
                return node
            if kw.arg == "outputs":
                if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int):
                    outputs = kw.value.value
                elif domain != symbolic_ops.ONNX_DOMAIN and not _names(kw.value) & self.graph:
                    outputs, count = None, self.visit(kw.value)
                else:
                    self.block(node, "g.op(outputs=...) with a count that is not a literal")
                    return node
                continue
            sample = [0] if isinstance(kw.value, (ast.List, ast.Tuple, ast.ListComp)) else 0
            try:
                name, suffix = symbolic_ops.split_attribute(kw.arg, sample)
            except ValueError as exc:
                self.block(node, str(exc))
                return node
            attrs.append((name, suffix, self.visit(kw.value)))
        keywords = [ast.keyword(name, self._attribute_value(suffix, value))
                    for name, suffix, value in attrs]
        if domain == symbolic_ops.ONNX_DOMAIN:
            moved = dict(symbolic_ops.ATTRIBUTES_NOW_INPUTS.get(opname, ()))
            if any(k.arg in moved for k in keywords):
                inputs = list(inputs)
                order = [n for n, _ in symbolic_ops.ATTRIBUTES_NOW_INPUTS[opname]]
                given = {k.arg: k.value for k in keywords if k.arg in moved}
                keywords = [k for k in keywords if k.arg not in moved]
                last = max(order.index(n) for n in given)
                for n in order[: last + 1]:
                    inputs.append(self._constant(given[n], moved[n]) if n in given
                                  else ast.Constant(None))
            if outputs != 1 and opname not in symbolic_ops.MULTI_OUTPUT_OPS:
                self.block(node, f"g.op('{opname}', outputs={outputs}): a variable output count")
                return node
            changed, before = symbolic_ops.DEFAULTS_BEFORE.get(opname, (0, {}))
            if self.opset is not None and self.opset < changed:  # opset 18 means otherwise
                given = {k.arg for k in keywords}
                keywords += [ast.keyword(k, ast.Constant(v)) for k, v in before.items()
                             if k not in given]
            self.out.imports.add(OPSET_IMPORT)
            return ast.Call(ast.Attribute(ast.Name("op"), opname), inputs, keywords)
        kinds = tuple((k, symbolic_ops.ATTRIBUTE_SUFFIXES[s]) for k, s, _ in attrs)
        custom = CustomOp(domain, opname, outputs, kinds)
        prev = self.out.custom_ops.get(custom.var)
        if prev is not None:
            merged = dict(prev.attributes) | dict(kinds)
            custom = CustomOp(domain, opname, outputs, tuple(sorted(merged.items())))
        else:
            custom = CustomOp(domain, opname, outputs, tuple(sorted(kinds)))
        self.out.custom_ops[custom.var] = custom
        if count is not None:
            keywords.append(ast.keyword("outputs", count))
        return ast.Call(ast.Name(custom.var), inputs, keywords)

    def _attribute_value(self, suffix: str, value: ast.expr) -> ast.expr:
        if suffix == "f" and isinstance(value, ast.Constant) and type(value.value) is int:
            return ast.Constant(float(value.value))
        if suffix == "f" and not isinstance(value, ast.Constant):
            return ast.Call(ast.Name("float"), [value], [])
        if suffix == "fs" and isinstance(value, (ast.List, ast.Tuple)):
            return ast.List([ast.Constant(float(e.value)) if isinstance(e, ast.Constant)
                             and type(e.value) is int else e for e in value.elts], ast.Load())
        if suffix == "t":
            self.out.imports.add(IR_IMPORT)
            if "torch" in _names(value):
                self.out.imports.add(TORCH_IMPORT)
            return ast.Call(ast.Attribute(ast.Name("ir"), "tensor"), [value], [])
        if suffix in ("g", "gs", "ts"):
            self.block(value, f"a graph or tensor-list attribute (_{suffix})")
        return value

    def _constant(self, value: ast.expr, onnx_type: str) -> ast.expr:
        self.out.imports.add(OPSET_IMPORT)
        key = _CONSTANT_KEYS[onnx_type]
        if onnx_type == "INTS" and not _is_sequence(value) \
                and not (isinstance(value, ast.Name) and value.id in self.sequences):
            value = ast.List([value], ast.Load())
        return ast.Call(ast.Attribute(ast.Name("op"), "Constant"), [],
                        [ast.keyword(key, value)])


def _data_names(test: ast.expr) -> set[str]:
    """The names whose data ``test`` reads: not those it only asks the kind of (``_is_value``,
    ``_is_none``, ``isinstance``, ``is None``) or the static shape of."""
    if isinstance(test, ast.Call) and _callee(test.func) in (
            "_is_value", "_is_none", "isinstance", "mustBeNone", *_SHAPE_HELPERS):
        return set()
    if isinstance(test, ast.Call) and _callee(test.func) in ("sizes", "dim") \
            and isinstance(test.func, ast.Attribute) and isinstance(test.func.value, ast.Call) \
            and _callee(test.func.value.func) == "type":
        return set()
    if isinstance(test, ast.Compare) and all(isinstance(o, (ast.Is, ast.IsNot)) for o in test.ops) \
            and all(isinstance(c, ast.Constant) and c.value is None for c in test.comparators):
        return set()
    if isinstance(test, ast.Name):
        return {test.id}
    return set().union(*(_data_names(c) for c in ast.iter_child_nodes(test)
                         if isinstance(c, ast.expr)))


def _static_str(node: ast.expr, strings: dict[str, str]) -> str | None:
    """The text of a string literal, of a name bound once to one, or of an f-string or ``+``
    of those; None if it is known only when the symbolic runs."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return strings.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = [_static_str(v.value if isinstance(v, ast.FormattedValue) and v.conversion == -1
                             and v.format_spec is None else v, strings) for v in node.values]
        return None if None in parts else "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _static_str(node.left, strings), _static_str(node.right, strings)
        return None if left is None or right is None else left + right
    return None


def _bindings(func: ast.FunctionDef) -> dict[str, list[ast.expr | None]]:
    """Each name ``func`` binds -> the values bound (None: bound otherwise than ``name =``)."""
    out: dict[str, list[ast.expr | None]] = {}
    for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs):
        out.setdefault(a.arg, []).append(None)
    for node in walk_in_order(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            out.setdefault(node.targets[0].id, []).append(node.value)
            continue
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension)):
            targets = [node.target]
        else:
            continue
        for t in targets:
            for n in walk_in_order(t):
                if isinstance(n, ast.Name):
                    out.setdefault(n.id, []).append(None)
    return out


def _static_strings(func: ast.FunctionDef) -> dict[str, str]:
    """Names ``func`` binds once, to a string literal."""
    return {k: v[0].value for k, v in _bindings(func).items() if len(v) == 1
            and isinstance(v[0], ast.Constant) and isinstance(v[0].value, str)}


def _sequence_names(func: ast.FunctionDef, descriptors: list[str] | None) -> frozenset[str]:
    """Names that only ever hold a list or tuple: bound only to list/tuple displays or
    comprehensions, or ``@parse_args`` ``"is"`` / ``"fs"`` parameters."""
    params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)][1:]
    out = {p for p, d in zip(params, descriptors or ()) if d in ("is", "fs")}
    out |= {k for k, v in _bindings(func).items() if all(map(_is_sequence, v))}
    return frozenset(out)


def _is_sequence(value: ast.expr | None) -> bool:
    """A list or tuple display or comprehension, or ``list(...)`` / ``tuple(...)`` /
    ``sorted(...)``."""
    return isinstance(value, (ast.List, ast.Tuple, ast.ListComp)) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
        and value.func.id in ("list", "tuple", "sorted"))


def _is_none_test(test: ast.expr) -> bool:
    """``x is None`` / ``x is not None`` / ``_is_none(x)`` (and ``not`` of them): optional
    inputs arrive as None in a translation too, so the branch stays a Python branch."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _is_none_test(test.operand)
    if isinstance(test, ast.BoolOp):
        return all(_is_none_test(v) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 \
            and isinstance(test.ops[0], (ast.Is, ast.IsNot)) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        return True
    return isinstance(test, ast.Call) and _callee(test.func) == "_is_none"


def _op_inputs(func: ast.FunctionDef, g: str) -> set[str]:
    """Names passed as inputs (positional arguments) of ``g.op`` or of calls passing ``g``."""
    out: set[str] = set()
    for node in walk_in_order(func):
        if not isinstance(node, ast.Call):
            continue
        is_op = isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == g
        passes_g = any(isinstance(a, ast.Name) and a.id == g for a in node.args)
        if is_op or passes_g:
            for a in node.args[1:] if is_op else node.args:
                out |= _names(a)
    return out


def _graph_names(func: ast.FunctionDef, g: str, descriptors: list[str] | None) -> set[str]:
    """The names holding graph values: tensor parameters and what is computed from them.

    With ``@parse_args`` its ``"v"`` parameters; without, the parameters the symbolic passes
    as node inputs (a Function's symbolic receives its non-tensor arguments as Python values,
    and an aten symbolic reads constants through ``_get_const`` first)."""
    params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)][1:]
    if descriptors is not None:
        graph = {p for p, d in zip(params, descriptors) if d == "v"}
    else:
        graph = set(params) & _op_inputs(func, g)
    # a name re-bound to a _get_const(...) value is a Python value
    for node in walk_in_order(func):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and _callee(node.value.func) in _PYTHON_VALUE:
            graph -= {t.id for t in node.targets if isinstance(t, ast.Name)}
    changed = True
    while changed:
        changed = False
        for node in walk_in_order(func):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value:
                value = node.value
                if isinstance(value, ast.Call) and _callee(value.func) in _PYTHON_VALUE:
                    continue
                from_graph = bool(_names(value) & graph) or any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and isinstance(c.func.value, ast.Name) and c.func.value.id == g
                    for c in walk_in_order(value))
                if from_graph:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        new = {n.id for n in walk_in_order(t) if isinstance(n, ast.Name)} - graph
                        if new:
                            graph |= new
                            changed = True
    return graph


def torch_symbolic_names(tree: ast.AST, nodes: Sequence[ast.AST] | None = None) -> frozenset[str]:
    """Names ``tree`` imports from torch's own symbolic modules (``from torch.onnx.symbolic_opset9
    import sub``); ``nodes``: every node of ``tree``, when the caller has walked it already."""
    return frozenset(a.asname or a.name for n in (walk_in_order(tree) if nodes is None else nodes)
                     if isinstance(n, ast.ImportFrom)
                     and n.module and re.match(r"torch\.onnx\.(_internal\.torchscript_exporter\.)?"
                                               r"symbolic_opset\d+$", n.module)
                     for a in n.names)


@dataclass(frozen=True)
class OwnModule:
    """The symbolic's module as the generated one can import it: its dotted name and the names
    its top level defines."""

    name: str
    names: frozenset[str]
    level: int = 0  # 1: ``name`` is relative to the generated module's package

    @classmethod
    def of(cls, tree: ast.Module, name: str, level: int = 0) -> OwnModule:
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {t.id for t in targets if isinstance(t, ast.Name)}
        return cls(name, frozenset(names), level)


def _docstring_end(func: ast.FunctionDef) -> int:
    first = func.body[0] if func.body else None
    return int(isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
               and isinstance(first.value.value, str))


def module_imports(tree: ast.Module) -> dict[str, str]:
    """The module's top-level imports, by the name each binds (``{"np": "import numpy as np"}``);
    a translation reading one carries its import into the generated module."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                bound = a.asname or a.name.split(".")[0]
                out[bound] = f"import {a.name} as {a.asname}" if a.asname else f"import {a.name}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                text = f"from {node.module} import {a.name}"
                out[a.asname or a.name] = f"{text} as {a.asname}" if a.asname else text
    return out


_KNOWN = frozenset({"op", "ir"}) | frozenset(dir(builtins))
_TS_MODULES = re.compile(r"torch\.onnx\.(symbolic_|_internal|utils)|torch\.onnx import symbolic_")


def _free_names(func: ast.FunctionDef) -> dict[str, int]:
    """Names ``func`` reads that it does not bind (first line of each)."""
    bound = {a.arg for n in walk_in_order(func) if isinstance(n, ast.arguments)
             for a in (*n.posonlyargs, *n.args, *n.kwonlyargs, *(x for x in (n.vararg, n.kwarg) if x))}
    bound |= {n.id for n in walk_in_order(func) if isinstance(n, ast.Name) and isinstance(getattr(n, "ctx", None), ast.Store)}
    bound |= {n.name for n in walk_in_order(func) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    bound |= {a.asname or a.name.split(".")[0] for n in walk_in_order(func)
              if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    bound |= {n.name for n in walk_in_order(func) if isinstance(n, ast.ExceptHandler) and n.name}
    out: dict[str, int] = {}
    for n in walk_in_order(func):
        if isinstance(n, ast.Name) and not isinstance(getattr(n, "ctx", None), ast.Store) \
                and n.id not in bound:
            out.setdefault(n.id, getattr(n, "lineno", func.lineno))
    return out


def translate(func: ast.FunctionDef, name: str | None = None,
              local_functions: frozenset[str] = frozenset(),
              torch_names: frozenset[str] = frozenset(),
              imports: dict[str, str] | None = None, opset: int | None = None,
              module: OwnModule | None = None) -> Translation:
    """The translation of the symbolic ``func`` (``def sym(g, ...)``), named ``name``;
    ``torch_names``: the module's names of torch's own symbolics (the function's own imports
    count too); ``opset``: the opset the symbolic writes for (its registration's), whose
    attribute defaults the opset-18 ops then spell out where they changed; ``module``: the
    symbolic's module when it is importable (a package's), whose own names the translation
    then imports."""
    func = clone(func)
    out_name = name or func.name
    params = func.args.posonlyargs + func.args.args
    vararg = not params and func.args.vararg is not None
    if not params and not vararg:
        return Translation(out_name, blockers=[Blocker(func.lineno, "no graph-context parameter")])
    g = func.args.vararg.arg if vararg else params[0].arg
    descriptors = _parse_args(func)
    nested = {n.name for n in walk_in_order(func) if isinstance(n, ast.FunctionDef) and n is not func
              and (n.args.posonlyargs or n.args.args)
              and (n.args.posonlyargs or n.args.args)[0].arg == g}
    tr = _Translator(g, _graph_names(func, g, descriptors), set(local_functions) | nested,
                     func.lineno, torch_names | torch_symbolic_names(func), vararg,
                     _static_strings(func), _sequence_names(func, descriptors), opset)
    tr.out.name = out_name
    for dec in func.decorator_list:
        callee = _callee(dec.func) if isinstance(dec, ast.Call) else _callee(dec)
        if callee not in (_PARSE_ARGS, "staticmethod") and "register" not in callee.lower():
            tr.block(dec, f"decorator {ast.unparse(dec)} has no translation")
    func.decorator_list = []
    if func.args.posonlyargs:
        func.args.posonlyargs = func.args.posonlyargs[1:]
    elif not vararg:
        func.args.args = func.args.args[1:]
    func.name = out_name
    func.returns = None
    for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs):
        a.annotation = None
    func.body = [s for s in (tr.visit(s) for s in func.body) if s is not None]
    _drop_passes(func)
    if not vararg and func.args.vararg and func.args.vararg.arg == g:
        tr.block(func, "g taken through *args")
    out = tr.out
    generated_names = {"op", "ir", "torch", g, out_name, *out.custom_ops, *out.helpers,
                       *tr.local, *out.type_helpers}
    own: list[str] = []  # names of the symbolic's own module it reads
    for free, line in _free_names(func).items():
        if free in generated_names or free in _KNOWN or free.startswith("aten_"):
            if free == "torch":
                out.imports.add(TORCH_IMPORT)
            continue
        if imports and free in imports and not _TS_MODULES.search(imports[free]):
            out.imports.add(imports[free])
        elif module and free in module.names:
            own.append(free)
        else:
            tr.block(ast.Pass(lineno=line), f"reads {free}, a name of its module")
    if out.blockers:
        out.blockers.sort(key=lambda b: b.line)
        return out
    if own:  # imported when the translation runs: the module imports the generated one
        func.body.insert(_docstring_end(func), ast.ImportFrom(
            module.name, [ast.alias(n) for n in sorted(own)], module.level))
    ast.fix_missing_locations(func)
    out.code = ast.unparse(func)
    if out.custom_ops:
        out.imports.update(CUSTOM_OP_IMPORTS)
    return out


def _drop_passes(tree: ast.AST) -> None:
    """The ``pass`` left where a TorchScript-only import or statement was, unless alone."""
    for node in walk_in_order(tree):
        for key in ("body", "orelse", "finalbody"):
            body = getattr(node, key, None)
            if isinstance(body, list) and body:
                kept = [s for s in body if not isinstance(s, ast.Pass)]
                setattr(node, key, kept or [ast.Pass()])


def entries(tr: Translation, origin: str, line: int, table_key: str | None,
            doc: str = "", target: torch_apis.Version | None = None) -> list[Entry]:
    """The generated module's entries for the translation ``tr`` of the symbolic at
    ``origin:line``: the custom-op helper and declarations it calls, then the function. For
    an aten op and a ``target`` torch that would not use it whatever its parameter names
    (2.9-2.10), the function is decorated with :data:`MATCHES_EVERY_NODE_HELPER`."""
    out = []
    code = tr.code
    api = torch_apis.ATEN_OVERRIDE_ANY_SIGNATURE
    if table_key and table_key.startswith("aten::") and target is not None \
            and not api.available(target):
        out.append(Entry(MATCHES_EVERY_NODE, origin, line, MATCHES_EVERY_NODE_HELPER,
                         MATCHES_EVERY_NODE_IMPORTS))
        code = re.sub(rf"^def {re.escape(tr.name)}\(", f'@{MATCHES_EVERY_NODE}("{table_key}")\n\\g<0>', code,
                      count=1, flags=re.MULTILINE)
    if tr.custom_ops:
        out.append(Entry(CUSTOM_OP, origin, line, CUSTOM_OP_HELPER, CUSTOM_OP_IMPORTS))
        out += [Entry(c.var, origin, line, c.declaration()) for c in tr.custom_ops.values()]
    out += [Entry(h, origin, line, TYPE_HELPERS[h], TYPE_HELPER_IMPORTS)
            for h in sorted(tr.type_helpers)]
    out.append(Entry(tr.name, origin, line, code, tuple(sorted(tr.imports)), table_key,
                     doc=doc))
    return out
