"""Normalise every historical call form of ``torch.onnx.export`` into one ``ExportRequest``.

Nothing here exports: all validation happens before any export work, so bad input raises
a ``CompatError`` naming the argument and the target file is never touched.
"""

from __future__ import annotations

import difflib
import io
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import CompatFileNotFoundError, CompatTypeError, CompatValueError
from .request import OPERATOR_EXPORT_TYPES, ROUTES, TRAINING_MODES, ExportRequest, Usage

# Positional layouts after (model, args, f); see shared/LEGACY_PATTERNS.md.
LAYOUT_1_3 = (
    "export_params", "verbose", "training", "input_names", "output_names", "aten",
    "export_raw_ir", "operator_export_type", "opset_version", "_retain_param_name",
    "do_constant_folding", "example_outputs", "strip_doc_string", "dynamic_axes",
    "keep_initializers_as_inputs", "custom_opsets", "enable_onnx_checker",
    "use_external_data_format",
)
LAYOUT_1_10 = tuple(n for n in LAYOUT_1_3 if n != "export_raw_ir")
LAYOUT_1_11 = (
    "export_params", "verbose", "training", "input_names", "output_names",
    "operator_export_type", "opset_version", "do_constant_folding", "dynamic_axes",
    "keep_initializers_as_inputs", "custom_opsets", "export_modules_as_functions",
    "autograd_inlining",
)

MODERN_KEYWORDS = (
    "kwargs", "verbose", "input_names", "output_names", "opset_version", "dynamo",
    "external_data", "dynamic_shapes", "custom_translation_table", "report", "optimize",
    "verify", "profile", "dump_exported_program", "artifacts_dir", "export_params",
    "keep_initializers_as_inputs", "dynamic_axes", "training", "operator_export_type",
    "do_constant_folding", "custom_opsets", "export_modules_as_functions", "autograd_inlining",
)
REMOVED_KEYWORDS = (
    "example_outputs", "use_external_data_format", "enable_onnx_checker", "strip_doc_string",
    "_retain_param_name", "aten", "export_raw_ir", "export_type", "fallback",
)
COMPAT_KEYWORDS = ("route", "strict")
#: legacy export entry points (reached through compat.patch()) and their catalog codes
ENTRY_CODES = {
    "torch.onnx.utils.export": "ONX403",
    "torch.onnx._export": "ONX403",
    "torch.onnx.dynamo_export": "ONX401",
}
ALL_KEYWORDS = frozenset(MODERN_KEYWORDS + REMOVED_KEYWORDS + COMPAT_KEYWORDS)

_BOOL_OPTIONS = (
    "export_params", "do_constant_folding", "autograd_inlining", "report", "optimize", "verify",
    "profile", "dump_exported_program", "enable_onnx_checker", "strip_doc_string",
    "_retain_param_name", "aten", "export_raw_ir", "use_external_data_format", "fallback",
)
_OPTIONAL_BOOL_OPTIONS = ("verbose", "keep_initializers_as_inputs", "dynamo", "external_data", "strict")


def pick_layout(positional: Sequence[Any]) -> tuple[str, ...]:
    """The torch version's positional layout that ``positional`` (options after f) follows."""
    if len(positional) > 5 and isinstance(positional[5], bool):
        if len(positional) > 6 and isinstance(positional[6], bool):
            return LAYOUT_1_3
        return LAYOUT_1_10
    return LAYOUT_1_11


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
        layout = pick_layout(positional)
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
                            f"torch {_layout_label(layout)} positional layout"))
    for name, value in options.items():
        if name not in ALL_KEYWORDS:
            close = difflib.get_close_matches(name, sorted(ALL_KEYWORDS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise CompatTypeError(f"export() got an unexpected keyword argument {name!r}{hint}")
        opts[name] = value
    return _build(model, args, f, opts, usages, _call_site, _entry)


def _layout_label(layout: tuple[str, ...]) -> str:
    return {LAYOUT_1_3: "1.3-1.9", LAYOUT_1_10: "1.10"}.get(layout, "1.11-2.4")


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

    from .catalog import OPTION_CODES

    fields: dict[str, Any] = {}
    given = set(opts)
    for name, value in opts.items():
        code = OPTION_CODES.get(name)
        if code and _is_legacy_usage(name, value):
            usages.append(Usage(code, name))
    if entry in ENTRY_CODES:
        usages.insert(0, Usage(ENTRY_CODES[entry], entry))
    if entry != "compat.export" and "dynamo" not in opts and "fallback" not in opts:
        usages.append(Usage("ONX001", "dynamo", f"{entry} without dynamo="))

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
    if route is not None and route not in ROUTES:
        raise CompatValueError(f"route must be one of {', '.join(ROUTES)}, got {route!r}")
    if route is None and fallback:
        route = "auto"

    fields["training"] = _training_name(opts.pop("training", None))
    fields["operator_export_type"] = _op_type_name(opts.pop("operator_export_type", None))
    args_t, kwargs = _split_args(args, opts.pop("kwargs", None))
    fields["input_names"] = _names("input_names", opts.pop("input_names", None))
    fields["output_names"] = _names("output_names", opts.pop("output_names", None))
    opset = opts.pop("opset_version", None)
    if opset is not None and (isinstance(opset, bool) or not isinstance(opset, int) or opset < 1):
        raise CompatValueError(f"opset_version must be a positive int, got {opset!r}")
    fields["opset_version"] = opset
    fields["dynamic_axes"] = _dynamic_axes(opts.pop("dynamic_axes", None), args_t, fields["input_names"],
                                           fields["output_names"])
    fields["custom_opsets"] = _custom_opsets(opts.pop("custom_opsets", None))
    _check_f(f)
    fields.update(opts)
    return ExportRequest(
        model=model, args=args_t, kwargs=kwargs, f=f, route=route, call_site=call_site,
        given=frozenset(given), usages=tuple(usages), **fields,
    )


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
    name = getattr(value, "name", value)
    if isinstance(name, str) and name.upper() in TRAINING_MODES:
        return name.upper()
    raise CompatValueError(
        f"training must be a torch.onnx.TrainingMode ({', '.join(TRAINING_MODES)}), got {value!r}"
    )


def _op_type_name(value: Any) -> str:
    if value is None:
        return "ONNX"
    name = getattr(value, "name", value)
    if isinstance(name, str) and name.upper() in OPERATOR_EXPORT_TYPES:
        return name.upper()
    raise CompatValueError(
        f"operator_export_type must be a torch.onnx.OperatorExportTypes "
        f"({', '.join(OPERATOR_EXPORT_TYPES)}), got {value!r}"
    )


def _split_args(args: Any, kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    """``args`` as a tuple; a trailing dict in args means keyword inputs (legacy form), and an
    empty trailing dict means the dict before it is positional (kept so in the result)."""
    import torch

    if isinstance(args, torch.Tensor):
        args = (args,)
    elif isinstance(args, list):
        args = tuple(args)
    elif not isinstance(args, tuple):
        raise CompatTypeError(f"args must be a tuple of inputs or a Tensor, got {type(args).__name__}")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise CompatTypeError(f"kwargs must be a dict, got {type(kwargs).__name__}")
    if args and isinstance(args[-1], dict):
        trailing = dict(args[-1])
        args = args[:-1]
        overlap = set(trailing) & set(kwargs or {})
        if overlap:
            raise CompatValueError(f"args' trailing dict and kwargs both give {sorted(overlap)}")
        kwargs = {**trailing, **(kwargs or {})}
    if not kwargs and args and isinstance(args[-1], dict):
        # a dict that is a real positional input: both exporters would take a trailing dict for
        # keyword inputs, so the legacy convention's empty dict goes after it
        args = (*args, {})
    return args, (dict(kwargs) if kwargs else None)


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
                if not isinstance(nm, str) or not nm:
                    raise CompatTypeError(f"dynamic_axes[{key!r}][{ax!r}] must be a non-empty str name")
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
    return dict(value)


def _check_f(f: Any) -> None:
    if f is None:
        return
    if isinstance(f, io.IOBase) or (hasattr(f, "write") and hasattr(f, "seek")):
        return
    if not isinstance(f, (str, os.PathLike)):
        raise CompatTypeError(f"f must be a path, os.PathLike or io.BytesIO, got {type(f).__name__}")
    path = os.fspath(f)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not path:
        raise CompatValueError("f must not be empty")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CompatFileNotFoundError(f"f: the output folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise CompatValueError(f"f: {path!r} is a directory, not a file path")
