"""ONX101-107: options the torch.export exporter ignores or translates differently."""

from __future__ import annotations

import ast
import json
import re
from typing import TYPE_CHECKING

from compat.catalog import OPTION_CODES

from ..analysis import Context, ExportCall, Option, literal, member
from ..model import Edit
from ..resolve import Scope

if TYPE_CHECKING:
    from .onx0 import Route

# Keywords distinctive enough to report on calls of project-local wrappers (not `training=`).
WRAPPER_KEYWORDS = (
    "dynamic_axes", "operator_export_type", "do_constant_folding", "custom_opsets",
    "export_modules_as_functions", "autograd_inlining", "example_outputs",
    "use_external_data_format", "enable_onnx_checker", "strip_doc_string", "_retain_param_name",
)


def _training(node: ast.expr) -> str | None:
    value = literal(node)
    if value is False:
        return "EVAL"
    if value is True:
        return "TRAINING"
    return member(node) if member(node) in {"EVAL", "TRAINING", "PRESERVE"} else None


def _bool_training_fix(ctx: Context, ec: ExportCall, opt: Option) -> Edit | None:
    """``training=False/True`` (torch 1.x) is a TypeError on torch >= 2.x: drop False (EVAL is
    the default), spell True as ``TrainingMode.TRAINING``."""
    value = literal(opt.value)
    if value is False:
        return Edit("drop", ec.key, ("training",))
    ref = ctx.module_ref("torch.onnx", ec.scope) if value is True else None
    return Edit("set", ec.key, ("training", f"{ref}.TrainingMode.TRAINING")) if ref else None


def harmless(ctx: Context, ec: ExportCall, opt: Option) -> bool:
    """True when the option's value is what the torch.export exporter does anyway."""
    value = literal(opt.value)
    name = opt.name
    if name == "training":
        return _training(opt.value) == "EVAL"
    if name == "operator_export_type":
        return member(opt.value) == "ONNX" or value is None
    if name in ("do_constant_folding", "autograd_inlining"):
        return value is True
    if name == "export_modules_as_functions":
        return value is False
    if name == "custom_opsets":
        return value is None or value == {}
    if name == "dynamic_axes":
        return dynamic_shapes_code(ctx, ec) is not None
    return False


def pin_reason(ctx: Context, ec: ExportCall) -> list[tuple[str, str]]:
    """ONX1 options whose meaning only the TorchScript exporter keeps: (code, reason)."""
    out = []
    for name, opt in ec.options.items():
        code = OPTION_CODES.get(name)
        if code and code.startswith("ONX1") and not harmless(ctx, ec, opt):
            if name == "dynamic_axes":
                why = "dynamic_axes is not a literal this tool can convert; write dynamic_shapes"
            else:
                why = f"{name}={ctx.src(opt.value)} needs the TorchScript exporter"
            out.append((code, why))
    return out


def dynamic_shapes_code(ctx: Context, ec: ExportCall) -> str | None:
    """``dynamic_shapes`` for literal ``dynamic_axes``: a tuple matching ``args``, names kept.

    Keys are positions, not forward() parameter names, so it is right without knowing the model.
    Output axes are dropped (torch.export infers them); str dims keep the axis names.
    """
    axes = literal(ec.options["dynamic_axes"].value)
    names = literal(ec.options["input_names"].value) if "input_names" in ec.options else ...
    if not isinstance(axes, dict) or not isinstance(names, (list, tuple)) or "kwargs" in ec.options:
        return None
    outputs = literal(ec.options["output_names"].value) if "output_names" in ec.options else []
    if isinstance(ec.args, (ast.Tuple, ast.List)) and isinstance(ec.args, ast.Tuple):
        elts = ec.args.elts
        if any(isinstance(e, ast.Starred) for e in elts) or (elts and isinstance(elts[-1], ast.Dict)):
            return None
        count = len(elts)
    elif ec.args is not None and not isinstance(ec.args, (ast.Dict, ast.List)):
        count = max(len(names), 1)
    else:
        return None
    entries: list[str] = []
    for i in range(count):
        name = names[i] if i < len(names) else None
        spec = axes.get(name) if name is not None else None
        if spec is None:
            entries.append("None")
        elif isinstance(spec, dict) and all(isinstance(a, int) and isinstance(n, str)
                                            for a, n in spec.items()):
            entries.append("{" + ", ".join(f"{a}: {json.dumps(n)}" for a, n in spec.items()) + "}")
        elif isinstance(spec, (list, tuple)) and all(isinstance(a, int) for a in spec):
            entries.append("{" + ", ".join(
                f"{a}: {json.dumps(f'{name}_dynamic_axes_{j + 1}')}" for j, a in enumerate(spec)
            ) + "}")
        else:
            return None
    known = set(names[:count]) | (set(outputs) if isinstance(outputs, (list, tuple)) else set())
    if any(k in names[count:] for k in axes) or not all(isinstance(k, str) for k in axes):
        return None
    if not any(k in known for k in axes):
        return "None"
    return "(" + ", ".join(entries) + ("," if count == 1 else "") + ")"


_EVAL_RE = r"(?:\.eval\(\s*\)|\.train\(\s*(?:False|mode\s*=\s*False)\s*\))"


def evidently_eval(ctx: Context, ec: ExportCall) -> bool:
    """The model was put in eval mode earlier in the same scope (``m.eval()``, ``m = M().eval()``)."""
    if ec.model is None:
        return False
    model = re.escape(ctx.src(ec.model))
    first = getattr(ec.scope[-1], "lineno", 1)
    region = "\n".join(ctx.lines[first - 1: ec.node.lineno - 1])
    return bool(re.search(rf"(?<![\w.]){model}\s*{_EVAL_RE}", region)
                or re.search(rf"(?m)^\s*{model}\s*=.*{_EVAL_RE}\s*$", region))


def check_export(ctx: Context, ec: ExportCall, route: Route) -> None:
    """ONX101-107 on an export call whose route is known."""
    if route.dynamo is None:
        return
    k = ec.key
    pinned = {c for c, _ in route.pins}
    for name, opt in list(ec.options.items()):
        code = OPTION_CODES.get(name)
        if not code or not code.startswith("ONX1"):
            continue
        if not route.dynamo:
            pins = route.pin_edits if not route.explicit and code in pinned else ()
            bool_fix = _bool_training_fix(ctx, ec, opt) if name == "training" else None
            if bool_fix is not None:
                ctx.emit(code, opt.value, "safe", ec.edits_for(opt, bool_fix, *pins),
                         note="torch 1.x bool: the TorchScript exporter now takes a TrainingMode",
                         anchor=ec.node)
            elif pins:
                ctx.emit(code, opt.value, "safe", ec.edits_for(opt, *pins),
                         note="kept, with dynamo=False", anchor=ec.node)
            continue
        add_route = () if route.explicit else route.pin_edits
        if not harmless(ctx, ec, opt) and route.from_ledger and name != "dynamic_axes":
            ctx.emit(code, opt.value, "safe", ec.edits_for(opt, Edit("drop", k, (name,)),
                                                           *add_route),
                     note="dropped: the ledger shows this call exported on the torch.export route",
                     anchor=ec.node)
        elif not harmless(ctx, ec, opt):
            ctx.emit(code, opt.value, note="ignored with dynamo=True", anchor=ec.node)
        elif name == "dynamic_axes":
            shapes = dynamic_shapes_code(ctx, ec)
            edits = ((Edit("drop", k, (name,)),) if shapes == "None" else
                     (Edit("rename", k, (name, "dynamic_shapes")),
                      Edit("set", k, ("dynamic_shapes", shapes))))
            ctx.emit(code, opt.value, "safe", ec.edits_for(opt, *edits, *add_route),
                     anchor=ec.node)
        elif name == "training":
            drop = Edit("drop", k, (name,))
            if evidently_eval(ctx, ec):
                ctx.emit(code, opt.value, "safe", ec.edits_for(opt, drop, *add_route),
                         note="the model is in eval mode", anchor=ec.node)
            elif ec.model is not None and isinstance(ec.model, (ast.Name, ast.Attribute)):
                edits = ec.edits_for(opt, drop, Edit("before", k, (f"{ctx.src(ec.model)}.eval()",)),
                                     *add_route)
                ctx.emit(code, opt.value, "unsafe", edits, note="adds model.eval()",
                         anchor=ec.node)
            else:
                ctx.emit(code, opt.value, anchor=ec.node)
        else:
            ctx.emit(code, opt.value, "safe", ec.edits_for(opt, Edit("drop", k, (name,)),
                                                           *add_route), anchor=ec.node)


def check_wrapper_call(ctx: Context, node: ast.Call, scope: list[Scope]) -> None:
    """A project-local wrapper called with legacy export options (it may forward them)."""
    for kw in node.keywords:
        if kw.arg in WRAPPER_KEYWORDS:
            name = ctx.src(node.func)
            ctx.emit(OPTION_CODES[kw.arg], kw.value,
                     note=f"passed to {name}(), which may forward it to torch.onnx.export",
                     anchor=node)
