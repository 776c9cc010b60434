"""ONX401-404: removed or private export entry points."""

from __future__ import annotations

import ast

from ..analysis import Context, literal, member
from ..model import Edit
from ..registry import register
from ..resolve import Scope, dotted

DYNAMO_EXPORT = "torch.onnx.dynamo_export"
UTILS_EXPORT = {"torch.onnx.utils.export", "torch.onnx._export"}
SELECT_MODE = {"torch.onnx.select_model_mode_for_export",
               "torch.onnx.utils.select_model_mode_for_export"}
EXPORT_OPTIONS = "torch.onnx.ExportOptions"


def _sibling(ctx: Context, node: ast.Call, scope: list[Scope], strip: int) -> str | None:
    """``X.<...>.export`` for a dotted func, dropping its last ``strip`` parts; else the import."""
    parts = dotted(node.func) or []
    if len(parts) > strip:
        return ".".join(parts[:-strip] + ["export"])
    ref = ctx.module_ref("torch.onnx", scope)
    return f"{ref}.export" if ref else None


@register("call", order=20)
def check_call(ctx: Context, node: ast.Call, scope: list[Scope], quals: set[str]) -> bool:
    """ONX401/403/404 on a call; True when the call is an export call to analyse further."""
    if UTILS_EXPORT & quals:
        if isinstance(node.func, ast.Attribute):
            parts = dotted(node.func) or []
            strip = 2 if parts[-2:-1] == ["utils"] else 1
            new = ".".join(parts[:-strip] + ["export"])
            ctx.emit("ONX403", node, "safe", (Edit("func", ctx.key(node), (new,)),), note=new)
        return True
    if DYNAMO_EXPORT in quals:
        new = _sibling(ctx, node, scope, 1)
        if any(kw.arg == "export_options" for kw in node.keywords):
            ctx.emit("ONX401", node, note="export_options= (ONX402) needs a hand-written "
                                          "dynamic_shapes")
        elif new is None:
            ctx.emit("ONX401", node, note="no torch.onnx import to spell torch.onnx.export")
        elif ctx.before_dynamo_keyword():
            ctx.emit("ONX401", node, note=f"--target-torch {ctx.before_dynamo_keyword()}: "
                                          "torch.onnx.export(..., dynamo=True) needs torch >= 2.5")
        else:
            ctx.emit("ONX401", node, "safe", (Edit("dynamo_export", ctx.key(node), (new,)),))
        return False
    if SELECT_MODE & quals:
        ctx.emit("ONX404", node, note="only `with select_model_mode_for_export(...):` is rewritten")
    return False


@register("with")
def check_with(ctx: Context, node: ast.With, scope: list[Scope]) -> bool:
    """ONX404: ``with select_model_mode_for_export(model, mode):`` becomes explicit mode handling."""
    if len(node.items) != 1 or not isinstance(node.items[0].context_expr, ast.Call):
        return False
    call = node.items[0].context_expr
    if not isinstance(call.func, (ast.Name, ast.Attribute)):
        return False
    if not SELECT_MODE & ctx.qualnames(call.func, scope):
        return False
    args = list(call.args) + [kw.value for kw in call.keywords]
    mode = member(args[1]) if len(args) == 2 else None
    if literal(args[1] if len(args) == 2 else None) is False:
        mode = "EVAL"
    pre = {"EVAL": ".eval()", "TRAINING": ".train()", "PRESERVE": ""}.get(mode or "")
    if node.items[0].optional_vars is not None or pre is None or len(args) != 2:
        ctx.emit("ONX404", call, note="mode is not a literal TrainingMode")
        return False
    stmt = f"{ctx.src(args[0])}{pre}" if pre else ""
    ctx.emit("ONX404", call, "unsafe", (Edit("with_unwrap", ctx.key(node), (stmt,)),),
             note="the previous mode is not restored after the block")
    return True


@register("import", order=20)
def check_import(ctx: Context, node: ast.Import | ast.ImportFrom, scope: list[Scope]) -> None:
    """ONX403: ``from torch.onnx.utils import export`` becomes ``from torch.onnx import export``."""
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "torch.onnx.utils":
        if all(a.name == "export" for a in node.names):
            ctx.emit("ONX403", node, "safe",
                     (Edit("importfrom_module", ctx.key(node), ("torch.onnx",)),))
        elif any(a.name in ("export", "select_model_mode_for_export") for a in node.names):
            ctx.emit("ONX403", node, note="import export from torch.onnx")


@register("reference")
def check_reference(ctx: Context, node: ast.expr, scope: list[Scope]) -> None:
    """ONX402: ``torch.onnx.ExportOptions`` (no rewrite: its options have no 1:1 mapping)."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
    if name == "ExportOptions" and EXPORT_OPTIONS in ctx.qualnames(node, scope):
        ctx.emit("ONX402", node)
