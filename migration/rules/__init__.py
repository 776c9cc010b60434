"""The rule families, registered in one place. One module per catalog family (ONX0..ONX4).

The walker in ``analysis.py`` calls the hooks below; each hook hands the node to the families.
Export calls go through the families in a fixed order: ONX4 (call-form rewrites feed the export
call), ONX2 (removed options), ONX0 (the route decision), ONX1 (options of the chosen route).
"""

from __future__ import annotations

import ast

from ..analysis import EXPORT, Context, build_export_call
from ..resolve import Scope
from . import onx0, onx1, onx2, onx3, onx4, onx5

FAMILIES = {"ONX0": onx0, "ONX1": onx1, "ONX2": onx2, "ONX3": onx3, "ONX4": onx4, "ONX5": onx5}


def prepare(ctx: Context) -> None:
    """Module-level facts the call rules need before the walk."""
    onx3.prepare(ctx)


def on_call(ctx: Context, node: ast.Call, scope: list[Scope]) -> None:
    if not isinstance(node.func, (ast.Name, ast.Attribute)):
        return
    quals = ctx.qualnames(node.func, scope)
    if not any(q.startswith("torch.onnx.") for q in quals):
        onx1.check_wrapper_call(ctx, node, scope)
        onx3.check_call(ctx, node, scope, quals)
        return
    is_export = onx4.check_call(ctx, node, scope, quals) or EXPORT in quals
    onx3.check_call(ctx, node, scope, quals)
    if not is_export:
        return
    ec = build_export_call(ctx, node, scope)
    ec.custom_symbolics = bool(ctx.facts.get("custom_symbolics"))
    onx2.check_export(ctx, ec)
    route = onx0.check_export(ctx, ec)
    onx2.check_external_data(ctx, ec, route)
    onx1.check_export(ctx, ec, route)


def on_if(ctx: Context, node: ast.If, scope: list[Scope]) -> list[ast.stmt] | None:
    """The statements of ``node`` to analyse when one branch is dead (old torch only)."""
    return onx5.check_if(ctx, node, scope)


def on_with(ctx: Context, node: ast.With, scope: list[Scope]) -> bool:
    """True when the With statement's item was handled (its call is not visited again)."""
    return onx4.check_with(ctx, node, scope)


def on_import(ctx: Context, node: ast.Import | ast.ImportFrom, scope: list[Scope]) -> None:
    onx3.check_import(ctx, node, scope)
    onx4.check_import(ctx, node, scope)


def on_class(ctx: Context, node: ast.ClassDef, scope: list[Scope]) -> None:
    onx3.check_class(ctx, node, scope)


def on_reference(ctx: Context, node: ast.expr, scope: list[Scope]) -> None:
    onx4.check_reference(ctx, node, scope)
