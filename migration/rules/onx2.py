"""ONX2xx: options removed from ``torch.onnx.export`` (they raise TypeError on current torch)."""

from __future__ import annotations

import ast
import json

from compat import catalog_facts as facts
from compat import torch_apis

from ..analysis import Context, ExportCall, Option, disposition, literal
from ..model import Edit
from ..registry import register
from .route import Route

#: removed options with a fix of their own; the others are dropped where the catalog says so
_OWN_FIX = ("use_external_data_format", "enable_onnx_checker", "fallback", "aten")


@register("export")
def check_export(ctx: Context, ec: ExportCall) -> None:
    """ONX206 and ONX201-208 on one export call."""
    node = ec.node
    if len(node.args) > 3:
        if ec.star_args or ec.ambiguous:
            note = "cannot tell the torch 1.x from the 1.11+ positional layout"
            ctx.emit("ONX206", node.args[3], note=note, anchor=node)
        else:
            ctx.emit("ONX206", node.args[3], "safe", ec.keywordize,
                     note=f"torch {ec.layout} layout", anchor=node)
    k = ec.key
    for name in facts.REMOVED_KEYWORDS:
        opt = ec.options.get(name)
        found = disposition(opt) if opt is not None and name not in _OWN_FIX else None
        if found is None:
            continue
        if found.kind == "dropped":
            ctx.emit(found.code, opt.value, "safe", ec.edits_for(opt, Edit("drop", k, (name,))),
                     anchor=node)
        else:  # no exporter of current torch honours it
            ctx.emit(found.code, opt.value, note=f"{name}= has no modern equivalent", anchor=node)
    opt = ec.options.get("enable_onnx_checker")
    if opt:
        _checker(ctx, ec, opt)
    opt = ec.options.get("fallback")
    if opt and _target_keeps_fallback(ctx, opt.value):
        api = torch_apis.BY_KEYWORD["fallback"]
        ctx.emit("ONX207", opt.value, note=f"kept: torch {torch_apis.shown(ctx.facts['target_torch'])} "
                 f"(--target-torch) still takes fallback= and tries TorchScript when torch.export "
                 f"fails; it was removed in torch {torch_apis.shown(api.removed)}", anchor=node)
    elif opt:
        evidence = ctx.evidence_for(node)
        evidence = evidence if evidence and evidence.get("route_taken") else None
        ctx.emit("ONX207", opt.value, "safe" if evidence else "unsafe",
                 ec.edits_for(opt, Edit("drop", k, ("fallback",))),
                 note="route chosen from the ledger" if evidence else "route chosen statically",
                 anchor=node)
    opt = ec.options.get("aten")
    if opt:
        _aten(ctx, ec, opt)


@register("routed_export", order=10)
def check_external_data(ctx: Context, ec: ExportCall, route: Route) -> None:
    """ONX202 once the route is known: ``external_data=`` is what the torch.export route reads;
    the TorchScript route ignores it (it writes one file below 2 GB), so there the weights are
    moved to ``<f>.data`` after the export, as the shim does."""
    opt = ec.options.get("use_external_data_format")
    if opt is None:
        return
    k, value = ec.key, literal(opt.value)
    if "external_data" in ec.options or value is False or value is None:
        edit = Edit("drop", k, (opt.name,)) if "external_data" in ec.options or \
            route.dynamo is False or route.old_torch else \
            Edit("rename", k, (opt.name, "external_data"))
        ctx.emit("ONX202", opt.value, "safe", ec.edits_for(opt, edit), anchor=ec.node)
    elif (route.dynamo or route.via_compat) and not route.old_torch:
        edit = Edit("rename", k, (opt.name, "external_data"))
        ctx.emit("ONX202", opt.value, "safe", ec.edits_for(opt, edit), anchor=ec.node)
    elif (route.dynamo is False or route.old_torch) and value is True and ec.f is not None \
            and _pure(ec.f) and ctx.block_statement(ec.node):
        pins = () if route.explicit else route.pin_edits
        onnx_ref, imports = ctx.import_module("onnx", ec.scope)
        f = ctx.src(ec.f)
        if isinstance(ec.f, ast.Constant) and isinstance(ec.f.value, str):
            location = json.dumps(ec.f.value.replace("\\", "/").rsplit("/", 1)[-1] + ".data")
            applicability = "safe"
        else:
            os_ref, os_import = ctx.import_module("os", ec.scope)
            imports = (*imports, *os_import)
            location = f'{os_ref}.path.basename({f}) + ".data"'
            applicability = "unsafe"  # f may be a file object
        save = (f"{onnx_ref}.save_model({onnx_ref}.load({f}), {f}, save_as_external_data=True, "
                f"all_tensors_to_one_file=True, location={location}, size_threshold=0)")
        edits = (Edit("drop", k, (opt.name,)), Edit("after", k, (save,)), *imports, *pins)
        ctx.emit("ONX202", opt.value, applicability, ec.edits_for(opt, *edits),
                 note="the TorchScript route ignores external_data: the weights are moved to an "
                      "external data file after the export", anchor=ec.node)
    else:
        ctx.emit("ONX202", opt.value, anchor=ec.node,
                 note="external_data= is ignored on the TorchScript route; save the weights "
                      "separately with onnx.save_model(..., save_as_external_data=True)")


def _pure(expr: ast.expr) -> bool:
    """A name, attribute, subscript or constant: evaluating it twice reads the same value."""
    return all(isinstance(n, (ast.Name, ast.Attribute, ast.Subscript, ast.Constant,
                              ast.expr_context)) for n in ast.walk(expr))


def _checker(ctx: Context, ec: ExportCall, opt: Option) -> None:
    value = literal(opt.value)
    drop = Edit("drop", ec.key, (opt.name,))
    found = disposition(opt)
    if found is not None and found.kind == "dropped":
        ctx.emit("ONX203", opt.value, "safe", ec.edits_for(opt, drop), anchor=ec.node)
    elif value is True and ec.f is not None and literal(ec.f) is not None \
            and ctx.block_statement(ec.node) is not None:
        onnx_ref, imports = ctx.import_module("onnx", ec.scope)
        check = f"{onnx_ref}.checker.check_model({ctx.src(ec.f)})"
        edits = [drop, Edit("after", ec.key, (check,)), *imports]
        ctx.emit("ONX203", opt.value, "unsafe", ec.edits_for(opt, *edits),
                 note="adds onnx.checker.check_model after the export", anchor=ec.node)
    else:
        ctx.emit("ONX203", opt.value, anchor=ec.node)


def _aten(ctx: Context, ec: ExportCall, opt: Option) -> None:
    """``aten=True`` is ``operator_export_type=ONNX_ATEN`` (the TorchScript exporter's; the
    route pin says so), ``aten=False`` means nothing."""
    k = ec.key
    found = disposition(opt)
    if found is not None and found.kind == "dropped":
        ctx.emit("ONX208", opt.value, "safe", ec.edits_for(opt, Edit("drop", k, (opt.name,))),
                 anchor=ec.node)
        return
    if literal(opt.value) is True and "operator_export_type" not in ec.options:
        ref = ctx.module_ref("torch.onnx", ec.scope)
        if ref:
            edits = ec.edits_for(opt, Edit("rename", k, ("aten", "operator_export_type")),
                                 Edit("set", k, ("operator_export_type",
                                                 f"{ref}.OperatorExportTypes.ONNX_ATEN")))
            ctx.emit("ONX208", opt.value, "safe", edits, note="aten=True is ONNX_ATEN",
                     anchor=ec.node)
            return
    ctx.emit("ONX208", opt.value, note="aten= has no other modern spelling", anchor=ec.node)


def _target_keeps_fallback(ctx: Context, value: ast.expr) -> bool:
    """``fallback=`` other than a literal False on a ``--target-torch`` that still takes it
    (2.9-2.10): torch itself honours it there, so dropping it would lose its TorchScript retry."""
    target = ctx.facts.get("target_torch")
    return (target is not None and torch_apis.BY_KEYWORD["fallback"].available(tuple(target))
            and literal(value) is not False)
