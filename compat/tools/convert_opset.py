"""``compat.convert_opset(model_or_path, opset, out=None)`` and ``python -m compat convert-opset
IN.onnx --opset N [-o OUT.onnx]``: an ONNX model brought down to an older opset by the adapters
the torch.export route uses (``dynamo.downconvert``, the one pipeline; onnx's version converter
only for the steps they cannot take), checked by onnx's checker and strict shape inference at
the target. For any model that must run on an older runtime, whoever exported it.

* The target is an int from 11 (the lowest opset the adapters write) to the model's own opset.
  The model's own opset returns the model unchanged; a higher one is refused (this converts down
  only: ``onnx.version_converter.convert_version`` converts up).
* An operator with no form at the target raises ``OpsetNotConvertible`` naming it and the lowest
  opset the model reaches; nothing is written.
* ``out`` is written as ``compat.export`` writes ``f`` (``compat.records.saving``): atomically, a
  model whose weights were in an external data file (or over 2 GB) with ``<out>.data`` beside it,
  a self-contained model as one file.
* The model given is never changed; the result is a new ``onnx.ModelProto`` with its weights in
  memory (a model over 2 GB: its tensors refer to ``<out>.data``).

Needs onnx and onnx_ir (the runtime extra), not torch. Exit status of the command: 0 converted
(or already at the opset), 1 an operator cannot be taken down, 2 usage error (bad arguments, no
such file, not an ONNX model, a higher opset).
"""

from __future__ import annotations

import argparse
import numbers
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from compat import commands
from compat.errors import (
    CompatError,
    CompatFileNotFoundError,
    CompatTypeError,
    CompatValueError,
    OpsetNotConvertible,
    RuntimeExtraMissing,
)

if TYPE_CHECKING:
    import onnx
    import onnx_ir as ir

PROG = commands.CONVERT_OPSET
ROUTE = "convert-opset"  # what the saver's Outcome names as the producer


def convert_opset(
    model_or_path: onnx.ModelProto | ir.Model | str | os.PathLike[str],
    opset: int,
    out: str | os.PathLike[str] | None = None,
) -> onnx.ModelProto:
    """``model_or_path`` brought down to ONNX opset ``opset`` (11 up to the model's own opset),
    as a new ``onnx.ModelProto``; also written to ``out`` when given (atomically, external data as
    ``<out>.data`` when the model had external data or is over 2 GB).

    Uses the torch.export route's down-conversion; the result passes onnx's checker and strict
    shape inference at ``opset``. The model's own opset returns it unchanged.

    Raises ``CompatTypeError`` / ``CompatValueError`` for bad arguments (naming the argument,
    before any work), ``CompatFileNotFoundError`` for a missing input file or output folder, and
    ``OpsetNotConvertible`` (a ``ValueError``) naming the operators that have no form at
    ``opset`` and the lowest opset the model reaches.
    """
    converted, _ = convert(model_or_path, opset, out)
    return converted


def convert(model_or_path: Any, opset: Any, out: Any = None) -> tuple[onnx.ModelProto, str]:
    """``convert_opset``, and one line saying what was done (for the command)."""
    opset = _check_arguments(opset, out)
    downconvert = _downconvert()
    import onnx_ir as ir

    if opset < downconvert.LOWEST:
        raise CompatValueError(f"opset={opset}: the down-conversion writes opset {downconvert.LOWEST} and up")
    model, external = _load(model_or_path)
    source = downconvert.onnx_opset(model.opset_imports)
    if source is None:
        raise CompatValueError("model_or_path: the model imports no default-domain (ai.onnx) opset: "
                               "nothing to convert")
    if opset > source:
        raise CompatValueError(f"opset={opset}: the model is at opset {source}; convert_opset converts down "
                               "only (onnx.version_converter.convert_version converts up)")
    large = _nbytes(model) > _saving().PROTOBUF_LIMIT
    if large and out is None:
        raise CompatValueError("out: the model is over 2 GB, which a ModelProto cannot hold in memory; "
                               "pass out= (the result then refers to <out>.data)")
    if opset == source:
        converted, done = model, f"already at opset {source}, not converted"
    else:
        result = downconvert.downconvert(model, opset)
        if not result.complete:
            ops = tuple(dict.fromkeys(g.op for g in result.gaps if g.op != "the model"))
            raise OpsetNotConvertible(
                f"cannot convert {_name(model_or_path)} from opset {source} to {opset}: {result.reason()}; "
                f"the lowest opset this model reaches is {result.reached}",
                wanted=opset, reached=result.reached, source=source, ops=ops)
        converted, done = result.model, f"opset {source}, {result.steps()}"
    if external and not large:
        # the weights in memory before out is written: out may replace the data file they are read from
        if converted is model_or_path:  # the caller's own ir.Model, unchanged: load into a copy
            converted = converted.clone()
        ir.external_data.load_to_model(converted)
    if out is not None:
        _save(converted, out, external)
        observing = sys.modules.get("compat.tools.observe")
        if observing is not None:  # ``compat run --observe``: the step is part of the call site
            observing.post_step(out, f"convert_opset(opset={opset})")
    import onnx

    if large:
        return onnx.load(os.fspath(out), load_external_data=False), done
    if converted is model and isinstance(model_or_path, onnx.ModelProto):
        unchanged = onnx.ModelProto()
        unchanged.CopyFrom(model_or_path)
        return unchanged, done
    return ir.to_proto(converted), done


def _check_arguments(opset: Any, out: Any) -> int:
    """``opset`` as an int; raises for an argument of the wrong type or an impossible ``out``."""
    if isinstance(opset, bool) or not isinstance(opset, numbers.Integral):
        raise CompatTypeError(f"opset must be an int (an ONNX opset version), got {type(opset).__name__} {opset!r}")
    if out is None:
        return int(opset)
    if not isinstance(out, (str, os.PathLike)):
        raise CompatTypeError(f"out must be a path (str or os.PathLike) or None, got {type(out).__name__}")
    path = os.path.abspath(os.fspath(out))
    if os.path.isdir(path):
        raise CompatValueError(f"out: {path} is a folder; give the model file's path")
    if not os.path.isdir(os.path.dirname(path)):
        raise CompatFileNotFoundError(f"out: the folder {os.path.dirname(path)} does not exist")
    return int(opset)


def _downconvert() -> Any:
    """The torch.export route's down-conversion package (onnx and onnx_ir, not torch)."""
    from compat.installed.runtime_extra import EXTRA_HINT

    try:
        import onnx  # noqa: F401
        import onnx_ir  # noqa: F401
    except ImportError as exc:
        raise RuntimeExtraMissing(f"{PROG} needs {exc.name or 'onnx'}, not installed: {EXTRA_HINT}") from exc
    from compat.routing.route_packages import route_module

    return route_module("dynamo.downconvert")


def _saving() -> Any:
    from compat.records import saving

    return saving


def _load(model_or_path: Any) -> tuple[ir.Model, bool]:
    """The model as onnx_ir reads it (the caller's own ir.Model as it is: the conversion works on
    copies), and whether its weights live in external data files."""
    import onnx
    import onnx_ir as ir

    if isinstance(model_or_path, (str, os.PathLike)):
        path = os.fspath(model_or_path)
        if not os.path.isfile(path):
            raise CompatFileNotFoundError(f"model_or_path: no such file: {path}")
        try:
            model = ir.load(path)
        except Exception as exc:  # DecodeError and friends: not an ONNX protobuf
            raise CompatValueError(f"model_or_path: {path} is not an ONNX model "
                                   f"({type(exc).__name__}: {' '.join(str(exc).split())})") from exc
    elif isinstance(model_or_path, onnx.ModelProto):
        model = ir.from_proto(model_or_path)
        if _external(model):
            raise CompatValueError("model_or_path: the ModelProto refers to external data it does not hold "
                                   "(loaded with load_external_data=False?); pass the model's path instead")
    elif isinstance(model_or_path, ir.Model):
        model = model_or_path
    else:
        raise CompatTypeError("model_or_path must be an onnx.ModelProto, an onnx_ir Model or the path of an "
                              f".onnx file, got {type(model_or_path).__name__}")
    return model, _external(model)


def _initializers(model: ir.Model) -> list[Any]:
    """The initializer tensors of the main graph and its subgraphs."""
    return [v.const_value for g in model.graphs() for v in g.initializers.values() if v.const_value is not None]


def _external(model: ir.Model) -> bool:
    import onnx_ir as ir

    return any(isinstance(t, ir.ExternalTensor) for t in _initializers(model))


def _nbytes(model: ir.Model) -> int:
    return sum(int(t.nbytes) for t in _initializers(model))


def _name(model_or_path: Any) -> str:
    return os.fspath(model_or_path) if isinstance(model_or_path, (str, os.PathLike)) else "the model"


class _Program:
    """What the saver reads of a route's ONNXProgram: the model, its proto, and ``save``."""

    def __init__(self, model: ir.Model) -> None:
        self.model = model

    @property
    def model_proto(self) -> onnx.ModelProto:
        import onnx_ir as ir

        return ir.to_proto(self.model)

    def save(self, path: str, external_data: bool = True) -> None:
        import onnx_ir as ir

        ir.save(self.model, path, external_data=os.path.basename(path) + ".data" if external_data else None)


def _save(model: ir.Model, out: str | os.PathLike[str], external: bool) -> None:
    """Write ``model`` to ``out`` as ``compat.export`` writes ``f`` (the project's saver)."""
    from compat.request import ExportRequest, Outcome

    outcome = Outcome(route=ROUTE, program=_Program(model))
    _saving().save(outcome, ExportRequest(model=None, args=(), f=out, external_data=True if external else None))


def default_output(path: str, opset: int) -> str:
    """``IN.opsetN.onnx`` beside ``IN.onnx``: the command never overwrites its input unasked."""
    stem, ext = os.path.splitext(path)
    return f"{stem}.opset{opset}{ext or '.onnx'}"


#: the API's argument names as the command's user typed them
_TYPED = (("model_or_path: ", "IN.onnx: "), ("opset=", "--opset "), ("out: ", "-o: "), ("pass out=", "pass -o"))


def _as_typed(message: str) -> str:
    for api, typed in _TYPED:
        message = message.replace(api, typed)
    return message


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Bring an ONNX model down to an older opset with the down-conversion of compat's "
                    "torch.export route, checked by onnx's checker and strict shape inference.",
        epilog="Exit status: 0 converted (or already at the opset), 1 an operator cannot be taken down "
               "(named, with the lowest opset the model reaches), 2 usage error.")
    p.add_argument("model", metavar="IN.onnx", help="the model (its external data beside it, as saved)")
    p.add_argument("--opset", type=int, required=True, metavar="N",
                   help="the target opset: 11 up to the model's own")
    p.add_argument("-o", "--output", metavar="OUT.onnx",
                   help="where to write it (default: IN.opsetN.onnx beside IN); external data as OUT.onnx.data")
    commands.add_version(p)
    ns = commands.parse_args(p, argv)
    if isinstance(ns, int):
        return ns
    out = ns.output or default_output(ns.model, ns.opset)
    try:
        _, done = convert(ns.model, ns.opset, out)
    except OpsetNotConvertible as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        print(f"{PROG}: the lowest opset it converts to: {PROG} {ns.model} --opset {exc.reached}", file=sys.stderr)
        return 1
    except (CompatError, OSError) as exc:
        print(f"{PROG}: error: {_as_typed(str(exc))}", file=sys.stderr)
        return 2
    print(f"{out}: {done}")
    return 0
