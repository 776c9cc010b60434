"""Normalise every historical call form of ``torch.onnx.export`` into one ``ExportRequest``.

Nothing here exports: all validation happens before any export work, so bad input raises
a ``CompatError`` naming the argument and the target file is never touched.
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import os
import stat
from collections.abc import Mapping, Sequence
from typing import Any

from compat import catalog_facts as facts
from compat.errors import (
    CompatFileNotFoundError,
    CompatPermissionError,
    CompatTypeError,
    CompatValueError,
)
from compat.request import OPERATOR_EXPORT_TYPES, ROUTES, TRAINING_MODES, ExportRequest, Usage
from compat.request.binding import Param, split_legacy_args, try_bind
from compat.request.torchscript_only import legacy_only_reasons

#: compat.export's own keywords; torch's (current and removed) are the catalog's
COMPAT_KEYWORDS = ("route", "strict", "acceptance_check")
ALL_KEYWORDS = frozenset(facts.CURRENT_KEYWORDS + facts.REMOVED_KEYWORDS + COMPAT_KEYWORDS)

_BOOL_OPTIONS = (
    "export_params", "do_constant_folding", "autograd_inlining", "report", "optimize", "verify",
    "profile", "dump_exported_program", "enable_onnx_checker", "strip_doc_string",
    "_retain_param_name", "aten", "export_raw_ir", "use_external_data_format", "fallback",
)
_OPTIONAL_BOOL_OPTIONS = (
    "verbose", "keep_initializers_as_inputs", "dynamo", "external_data", "strict", "acceptance_check",
)


def pick_layout(positional: Sequence[Any]) -> tuple[str, tuple[str, ...]]:
    """(label, names) of the catalog's positional layout that ``positional`` (options after
    f) follows; values are known at run time, so it can always be told."""
    found = facts.positional_layout(len(positional), lambda i: isinstance(positional[i], bool))
    assert found is not None  # is_bool never answers None here
    return found


def normalize(
    model: Any,
    args: Any = (),
    f: Any = None,
    *positional: Any,
    _call_site: str = "<unknown>:0",
    _entry: str = "compat.export",
    **options: Any,
) -> ExportRequest:
    """Turn one call (any torch 1.3 - 2.14 form, plus ``route=``/``strict=``) into a request.

    ``_call_site`` is the user's ``file:line``; ``_entry`` the API the user called (a
    ``torch.onnx`` one under the patch, which makes a missing ``dynamo=`` a legacy usage)."""
    usages: list[Usage] = []
    opts: dict[str, Any] = {}
    if positional:
        label, layout = pick_layout(positional)
        if len(positional) > len(layout):
            raise CompatTypeError(
                f"export() takes at most {3 + len(layout)} positional arguments "
                f"({3 + len(positional)} given); pass options after f as keywords"
            )
        for name, value in zip(layout, positional):
            if name in options:
                raise CompatTypeError(f"export() got multiple values for argument {name!r}")
            opts[name] = value
        usages.append(Usage("ONX206", ", ".join(layout[: len(positional)]),
                            f"torch {label} positional layout"))
    for name, value in options.items():
        if name not in ALL_KEYWORDS:
            close = difflib.get_close_matches(name, sorted(ALL_KEYWORDS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise CompatTypeError(f"export() got an unexpected keyword argument {name!r}{hint}")
        opts[name] = value
    return _build(model, args, f, opts, usages, _call_site, _entry)


def _build(
    model: Any, args: Any, f: Any, opts: dict[str, Any], usages: list[Usage],
    call_site: str, entry: str,
) -> ExportRequest:
    _check_model(model)
    for name in _BOOL_OPTIONS:
        if name in opts and not isinstance(opts[name], bool):
            raise CompatTypeError(f"{name} must be a bool, got {type(opts[name]).__name__}")
    for name in _OPTIONAL_BOOL_OPTIONS:
        if opts.get(name) is not None and not isinstance(opts[name], bool):
            raise CompatTypeError(f"{name} must be a bool or None, got {type(opts[name]).__name__}")

    fields: dict[str, Any] = {}
    given = set(opts)
    for name, value in opts.items():
        code = facts.OPTION_CODES.get(name)
        if code and _is_legacy_usage(name, value):
            usages.append(Usage(code, name))
    if entry in facts.ENTRY_CODES:
        usages.insert(0, Usage(facts.ENTRY_CODES[entry], entry))
    if entry != "compat.export" and "dynamo" not in opts and "fallback" not in opts:
        usages.append(Usage("ONX001", "dynamo", f"{entry} without dynamo="))
    if entry == "compat.export":
        usages[:] = [dataclasses.replace(u, via_shim=True) for u in usages]

    # removed 1.x options
    opts.pop("example_outputs", None)
    opts.pop("_retain_param_name", None)
    opts.pop("export_raw_ir", None)
    opts.pop("export_type", None)
    if "use_external_data_format" in opts:
        ext = opts.pop("use_external_data_format")
        if "external_data" in opts and opts["external_data"] is not None and opts["external_data"] != ext:
            raise CompatValueError("use_external_data_format and external_data disagree")
        opts["external_data"] = ext
    aten = opts.pop("aten", False)
    if aten:
        if opts.get("operator_export_type") not in (None, "ONNX_ATEN") and _op_type_name(
            opts.get("operator_export_type")
        ) not in ("ONNX", "ONNX_ATEN"):
            raise CompatValueError("aten=True conflicts with operator_export_type")
        opts["operator_export_type"] = "ONNX_ATEN"
    fallback = opts.pop("fallback", None)

    route = opts.pop("route", None)
    if route is not None and not isinstance(route, str):
        raise CompatTypeError(f"route must be a str ({', '.join(ROUTES)}), got {type(route).__name__} {route!r}")
    if route is not None and route not in ROUTES:
        raise CompatValueError(f"route must be one of {', '.join(ROUTES)}, got {route!r}")
    # torch 2.5-2.10's meaning, on every torch: fallback=True lets a torch.export export fall back
    # to TorchScript; beside dynamo=False (TorchScript only) it has nothing to fall back from
    if route is None and fallback and opts.get("dynamo") is not False:
        route = "auto"

    fields["training"] = _training_name(opts.pop("training", None))
    fields["operator_export_type"] = _op_type_name(opts.pop("operator_export_type", None))
    args_t, kwargs = _split_args(args, opts.pop("kwargs", None))
    fields["input_names"] = _names("input_names", opts.pop("input_names", None))
    fields["output_names"] = _names("output_names", opts.pop("output_names", None))
    fields["opset_version"] = _opset_version(opts.pop("opset_version", None))
    fields["dynamic_axes"] = _dynamic_axes(opts.pop("dynamic_axes", None), args_t, fields["input_names"],
                                           fields["output_names"])
    fields["custom_opsets"] = _custom_opsets(opts.pop("custom_opsets", None))
    params, unbound = try_bind(model, args_t, kwargs)
    if "dynamic_shapes" in opts:
        _check_dynamic_shapes(opts["dynamic_shapes"], model, params)
    if "custom_translation_table" in opts:
        _check_translation_table(opts["custom_translation_table"])
    if "export_modules_as_functions" in opts:
        _check_modules_as_functions(opts["export_modules_as_functions"])
    _check_f(f, opts.get("external_data"))
    fields.update(opts)
    req = ExportRequest.bound(
        model=model, args=args_t, kwargs=kwargs, f=f, route=route, call_site=call_site,
        given=frozenset(given), usages=tuple(usages), params=params, unbound=unbound, **fields,
    )
    _check_exported_program(req)
    return req


def _is_legacy_usage(name: str, value: Any) -> bool:
    """Options given at their harmless default are still usages, except where noted."""
    if name == "dynamic_axes":
        return bool(value)
    return value is not None


def _check_model(model: Any) -> None:
    import torch

    ok = (torch.nn.Module, torch.jit.ScriptFunction, torch.export.ExportedProgram)
    if not isinstance(model, ok):
        raise CompatTypeError(
            f"model must be a torch.nn.Module, ScriptModule, ScriptFunction or ExportedProgram, "
            f"got {type(model).__name__}"
        )


def _training_name(value: Any) -> str:
    if value is None:
        return "EVAL"
    if isinstance(value, bool):  # torch 1.x: training=True/False
        return "TRAINING" if value else "EVAL"
    kind = "torch.onnx.TrainingMode"
    name = _enum_member_name("training", value, "TrainingMode", kind, TRAINING_MODES)
    if name.upper() in TRAINING_MODES:
        return name.upper()
    raise CompatValueError(f"training must be a {kind} ({', '.join(TRAINING_MODES)}), got {value!r}")


def _op_type_name(value: Any) -> str:
    if value is None:
        return "ONNX"
    kind = "torch.onnx.OperatorExportTypes"
    name = _enum_member_name("operator_export_type", value, "OperatorExportTypes", kind,
                             OPERATOR_EXPORT_TYPES)
    if name.upper() in OPERATOR_EXPORT_TYPES:
        return name.upper()
    raise CompatValueError(
        f"operator_export_type must be a {kind} ({', '.join(OPERATOR_EXPORT_TYPES)}), got {value!r}"
    )


def _enum_member_name(arg: str, value: Any, enum_name: str, kind: str, names: tuple[str, ...]) -> str:
    """The member name of a torch enum value (``torch.onnx.TrainingMode.EVAL`` -> ``"EVAL"``) or
    the str given; anything else (an int, another enum) is the wrong type."""
    if isinstance(value, str):
        return value
    if type(value).__name__ == enum_name and isinstance(getattr(value, "name", None), str):
        return value.name
    raise CompatTypeError(
        f"{arg} must be a {kind} ({', '.join(names)}) or its name, got {type(value).__name__} {value!r}"
    )


def _split_args(args: Any, kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    """``args`` as a tuple, with a legacy trailing dict (keyword inputs, or the empty marker
    after a positional dict) moved out of it."""
    import torch

    if isinstance(args, torch.Tensor):
        args = (args,)
    elif isinstance(args, list):
        args = tuple(args)
    elif not isinstance(args, tuple):
        raise CompatTypeError(f"args must be a tuple of inputs or a Tensor, got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise CompatTypeError(f"kwargs must be a dict, got {type(kwargs).__name__}")
    return split_legacy_args(args, kwargs)


def _names(arg: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise CompatTypeError(f"{arg} must be a list of str, got {type(value).__name__}")
    for v in value:
        if not isinstance(v, str):
            raise CompatTypeError(f"{arg} must be a list of str, got an item {v!r}")
    if len(set(value)) != len(value):
        raise CompatValueError(f"{arg} has duplicate names: {list(value)}")
    return tuple(value)


def flat_tensors(args: Any) -> list[Any]:
    """Tensors of ``args`` (nested tuples, lists, dicts) in the order the legacy exporter numbers
    graph inputs."""
    import torch

    out: list[Any] = []

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)

    walk(args)
    return out


def _dynamic_axes(
    value: Any, args: tuple[Any, ...], input_names: tuple[str, ...] | None,
    output_names: tuple[str, ...] | None,
) -> dict[str, Any] | None:
    """Validate types, and axis ranges where the example input is known."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise CompatTypeError(f"dynamic_axes must be a dict, got {type(value).__name__}")
    tensors = flat_tensors(args)
    ranks = {name: t.dim() for name, t in zip(input_names or (), tensors)}
    out: dict[str, Any] = {}
    for key, axes in value.items():
        if not isinstance(key, str):
            raise CompatTypeError(f"dynamic_axes keys must be input/output names (str), got {key!r}")
        if isinstance(axes, Mapping):
            items = list(axes.items())
            for ax, nm in items:
                if not isinstance(nm, str):
                    raise CompatTypeError(f"dynamic_axes[{key!r}][{ax!r}] must be a non-empty str name, "
                                          f"got {type(nm).__name__} {nm!r}")
                if not nm:
                    raise CompatValueError(f"dynamic_axes[{key!r}][{ax!r}]: the axis name must not be empty")
        elif isinstance(axes, (list, tuple)):
            items = [(ax, None) for ax in axes]
        else:
            raise CompatTypeError(
                f"dynamic_axes[{key!r}] must be a dict {{axis: name}} or a list of axes, "
                f"got {type(axes).__name__}"
            )
        for ax, _ in items:
            if isinstance(ax, bool) or not isinstance(ax, int):
                raise CompatTypeError(f"dynamic_axes[{key!r}]: axis {ax!r} is not an int")
            rank = ranks.get(key)
            if rank is not None and not -rank <= ax < rank:
                raise CompatValueError(
                    f"dynamic_axes[{key!r}]: axis {ax} is out of range for input {key!r} of rank {rank}"
                )
        out[key] = dict(axes) if isinstance(axes, Mapping) else list(axes)
    return out


def _custom_opsets(value: Any) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise CompatTypeError(f"custom_opsets must be a dict {{domain: version}}, got {type(value).__name__}")
    for dom, ver in value.items():
        if not isinstance(dom, str) or isinstance(ver, bool) or not isinstance(ver, int):
            raise CompatTypeError(f"custom_opsets must map str domains to int versions, got {dom!r}: {ver!r}")
        if ver < 0:
            raise CompatValueError(f"custom_opsets[{dom!r}]: the version must not be negative, got {ver}")
    return dict(value)


def _opset_version(value: Any) -> int | None:
    """An int between 1 and the highest opset the installed torch knows."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        hint = f" (did you mean {value.strip()}?)" if isinstance(value, str) and value.strip().isdigit() else ""
        raise CompatTypeError(f"opset_version must be an int, got {type(value).__name__} {value!r}{hint}")
    from compat.installed.torch_caps import max_opset

    highest = max_opset()
    if not 1 <= value <= highest:
        raise CompatValueError(
            f"opset_version must be between 1 and {highest} (the highest opset torch "
            f"{_torch_version()} supports), got {value}"
        )
    return value


def _torch_version() -> str:
    from compat.installed.torch_caps import torch_version_str

    return torch_version_str()


def _check_translation_table(value: Any) -> None:
    """``{torch op or callable: onnxscript function or a list of them}``."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise CompatTypeError(
            f"custom_translation_table must be a dict {{torch op: ONNX function}}, got {type(value).__name__}"
        )
    for op, fn in value.items():
        if not callable(op):
            raise CompatTypeError(
                f"custom_translation_table: key {op!r} is not a torch operator (e.g. torch.ops.aten.add.Tensor)"
            )
        fns = list(fn) if isinstance(fn, (list, tuple)) else [fn]
        if not fns:
            raise CompatValueError(f"custom_translation_table[{op!r}] is an empty list of ONNX functions")
        if not all(callable(x) for x in fns):
            raise CompatTypeError(
                f"custom_translation_table[{op!r}] must be an ONNX function or a non-empty list of "
                f"them, got {fn!r}"
            )


def _check_modules_as_functions(value: Any) -> None:
    """``export_modules_as_functions``: a bool, or a collection of ``nn.Module`` subclasses."""
    import torch

    if isinstance(value, bool):
        return
    if isinstance(value, (str, bytes)) or not isinstance(value, (set, frozenset, list, tuple)):
        raise CompatTypeError(
            "export_modules_as_functions must be a bool or a set of nn.Module classes, "
            f"got {type(value).__name__} {value!r}"
        )
    for cls in value:
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            raise CompatTypeError(
                f"export_modules_as_functions: {cls!r} is not an nn.Module class"
            )


# --- dynamic_shapes -----------------------------------------------------------------------------

def _check_dynamic_shapes(value: Any, model: Any, params: tuple[Param, ...] | None) -> None:
    """The spec's shape follows the call's inputs (``params``, None when the call does not bind),
    axes are in range and every dim is a Dim, a Dim hint, a str name, an int (static) or None;
    raised before any export, since a malformed spec would otherwise make the auto route fall
    back to a silently static model."""
    if value is None:
        return
    if not isinstance(value, (Mapping, list, tuple)):
        raise CompatTypeError(
            "dynamic_shapes must be a dict keyed by forward() parameter names, or a tuple/list in "
            f"argument order, got {type(value).__name__}"
        )
    import torch

    if isinstance(model, torch.export.ExportedProgram):
        return  # refused whole by _check_exported_program
    if isinstance(value, Mapping):
        for k in value:
            if not isinstance(k, str):
                raise CompatTypeError(
                    f"dynamic_shapes keys must be forward() parameter names (str), got {k!r}"
                )
        if params is None:
            return
        by_name = {p.name: p.value for p in params}
        unknown = [k for k in value if k not in by_name]
        if unknown:
            raise CompatValueError(
                f"dynamic_shapes names {unknown[0]!r}, which is not an input of this call "
                f"(inputs: {', '.join(by_name) or 'none'})"
            )
        pairs = [(by_name[k], spec, f"dynamic_shapes[{k!r}]") for k, spec in value.items()]
    else:
        if params is None:
            return
        values = [p.value for p in params]
        if len(value) != len(values):
            raise CompatValueError(
                f"dynamic_shapes has {len(value)} entries for a call with {len(values)} inputs"
            )
        pairs = [(v, spec, f"dynamic_shapes[{i}]") for i, (v, spec) in enumerate(zip(values, value))]
    for v, spec, where in pairs:
        _check_spec(v, spec, where)


def _check_spec(value: Any, spec: Any, where: str) -> None:
    import torch

    if spec is None:
        return
    if isinstance(value, torch.Tensor):
        rank = value.dim()
        if isinstance(spec, Mapping):
            for axis, dim in spec.items():
                if isinstance(axis, bool) or not isinstance(axis, int):
                    raise CompatTypeError(f"{where}: axis {axis!r} is not an int")
                if not -rank <= axis < rank:
                    raise CompatValueError(f"{where}: axis {axis} is out of range for a tensor of rank {rank}")
                _check_dim(dim, int(value.shape[axis]), f"{where}[{axis}]")
        elif isinstance(spec, (list, tuple)):
            if len(spec) != rank:
                raise CompatValueError(
                    f"{where} has {len(spec)} dims for a tensor of rank {rank} (one entry per axis)"
                )
            for axis, dim in enumerate(spec):
                _check_dim(dim, int(value.shape[axis]), f"{where}[{axis}]")
        else:
            raise CompatTypeError(
                f"{where} must be a dict {{axis: Dim}} or a list of one Dim per axis for a tensor input, "
                f"got {type(spec).__name__} {spec!r}"
            )
    elif isinstance(value, (list, tuple)):
        if not isinstance(spec, (list, tuple)) or len(spec) != len(value):
            raise CompatValueError(
                f"{where} must be a list/tuple of {len(value)} specs, like the input, got {spec!r}"
            )
        for i, (v, s) in enumerate(zip(value, spec)):
            _check_spec(v, s, f"{where}[{i}]")
    elif isinstance(value, Mapping):
        if not isinstance(spec, Mapping):
            raise CompatValueError(f"{where} must be a dict of specs, like the input, got {spec!r}")
        unknown = [k for k in spec if k not in value]
        if unknown:
            raise CompatValueError(f"{where} names {unknown[0]!r}, which is not a key of the input")
        for k, s in spec.items():
            _check_spec(value[k], s, f"{where}[{k!r}]")
    elif isinstance(value, (bool, int, float, str)) and not _is_dim(spec):
        raise CompatTypeError(f"{where}: a {type(value).__name__} input takes None or a Dim, got {spec!r}")


def _is_dim(dim: Any) -> bool:
    from torch.export import dynamic_shapes as tds

    kinds = tuple(k for k in (getattr(tds, "Dim", None), getattr(tds, "_Dim", None),
                              getattr(tds, "_DerivedDim", None), getattr(tds, "_DimHint", None))
                  if isinstance(k, type))
    return isinstance(dim, kinds)


def _check_dim(dim: Any, size: int, where: str) -> None:
    if dim is None or _is_dim(dim):
        return
    if isinstance(dim, str):
        if not dim:
            raise CompatValueError(f"{where}: a dim name must not be empty")
        return
    if isinstance(dim, int) and not isinstance(dim, bool):
        if dim != size:
            raise CompatValueError(f"{where}: static size {dim} differs from the example input's {size}")
        return
    raise CompatTypeError(
        f"{where} must be a torch.export.Dim, Dim.AUTO/DYNAMIC/STATIC, a str name, an int or None, "
        f"got {type(dim).__name__} {dim!r}"
    )


# --- ExportedProgram ----------------------------------------------------------------------------

def _check_exported_program(req: ExportRequest) -> None:
    """An ExportedProgram is exported as captured, on the torch.export route only."""
    import torch

    if not isinstance(req.model, torch.export.ExportedProgram):
        return
    if req.route == "legacy" or req.dynamo is False:
        option = "route='legacy'" if req.route == "legacy" else "dynamo=False"
        raise CompatValueError(
            f"{option}: an ExportedProgram can only be exported on the torch.export route "
            "(pass the nn.Module to use the TorchScript exporter)"
        )
    if req.dynamic_shapes is not None:
        raise CompatValueError(
            "dynamic_shapes cannot change an ExportedProgram's shapes: pass them to "
            "torch.export.export when capturing it, or pass the nn.Module"
        )
    reasons = legacy_only_reasons(req)
    if reasons:
        raise CompatValueError(
            "an ExportedProgram is exported on the torch.export route, which cannot honour: "
            + "; ".join(r for _, r in reasons)
        )
    if req.args or req.kwargs:
        _check_program_inputs(req.model, req.args, req.kwargs)


def _check_program_inputs(program: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None) -> None:
    """Inputs given with an ExportedProgram must be the ones it was captured with (torch ignores
    them: a caller passing other shapes would get a model of the captured ones)."""
    example = getattr(program, "example_inputs", None)
    if example is None:
        return
    ex_args, ex_kwargs = example
    given = flat_tensors((args, kwargs or {}))
    captured = flat_tensors((ex_args, ex_kwargs or {}))
    sig = [(tuple(t.shape), t.dtype) for t in given]
    want = [(tuple(t.shape), t.dtype) for t in captured]
    if sig != want:
        raise CompatValueError(
            "args: an ExportedProgram is exported as captured, and these inputs differ from the "
            f"ones it was captured with ({_describe(sig)} vs {_describe(want)}); pass no args, or "
            "capture it again (with dynamic_shapes for other sizes)"
        )


def _describe(sig: list[tuple[tuple[int, ...], Any]]) -> str:
    return ", ".join(f"{str(d).replace('torch.', '')}{list(s)}" for s, d in sig) or "no tensors"


def _check_f(f: Any, external_data: Any = None) -> None:
    if f is None:
        return
    if isinstance(f, io.IOBase) or (hasattr(f, "write") and hasattr(f, "seek")):
        _check_file_object(f)
        return
    if not isinstance(f, (str, os.PathLike)):
        raise CompatTypeError(f"f must be a path, os.PathLike or io.BytesIO, got {type(f).__name__}")
    path = os.fspath(f)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not path:
        raise CompatValueError("f must not be empty")
    try:
        st: os.stat_result | None = os.stat(path)  # what f resolves to (one stat, the common case)
    except OSError:
        st = None
    if st is None:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise CompatFileNotFoundError(f"f: the output folder {folder!r} does not exist")
    elif stat.S_ISDIR(st.st_mode):
        raise CompatValueError(f"f: {path!r} is a directory, not a file path")
    elif external_data and not stat.S_ISREG(st.st_mode):
        raise CompatValueError(
            f"f: {path!r} is not a regular file (a device or FIFO), so the external data file "
            "cannot be written beside it; pass external_data=False or a file path"
        )
    _check_writable(path, st is not None, bool(external_data))


def _check_writable(path: str, exists: bool, external_data: bool) -> None:
    """Refuse before any work what ``open(f, "wb")`` would refuse: an existing f this user may not
    write, or a new f (or external data files) in a folder this user may not write. A writable f
    in a read-only folder is fine: saving writes it in place."""
    if exists:  # access() follows links as realpath does: the path is resolved for messages only
        if not os.access(path, os.W_OK):
            raise CompatPermissionError(f"f: {os.path.realpath(path)!r} is not writable by this user")
        if external_data:
            folder = os.path.dirname(os.path.realpath(path))
            if not os.access(folder, os.W_OK | os.X_OK):
                raise CompatPermissionError(
                    f"f: the folder {folder!r} is not writable, so the external data file cannot be written"
                )
        return
    real = os.path.realpath(path)
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        raise CompatFileNotFoundError(f"f: {path!r} resolves to {real!r}, whose folder does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CompatPermissionError(f"f: cannot create {real!r}: its folder is not writable by this user")


def _check_file_object(f: Any) -> None:
    """A file object must be open, binary and writable (torch writes bytes into it)."""
    if isinstance(f, io.TextIOBase):
        raise CompatTypeError(
            f"f is a text-mode file ({type(f).__name__}); the model is bytes: open it with 'wb' "
            "or pass an io.BytesIO"
        )
    if getattr(f, "closed", False):
        raise CompatValueError("f is a closed file object")
    writable = getattr(f, "writable", None)
    if callable(writable):
        try:
            ok = writable()
        except ValueError as exc:  # raised by some wrappers once closed
            raise CompatValueError(f"f is not usable: {exc}") from exc
        if not ok:
            mode = getattr(f, "mode", None)
            raise CompatValueError(
                f"f is not opened for writing{f' (mode {mode!r})' if mode else ''}: open it with 'wb'"
            )
