"""ONX101-107: options the torch.export exporter ignores or translates differently.

What each value means today is the catalog's (``compat.catalog_facts``): dropped values are
dropped, plain-torch ones get their spelling (``do_constant_folding=False`` -> ``optimize=False``,
literal ``dynamic_axes`` -> ``dynamic_shapes``, ``training=EVAL`` -> ``model.eval()``), and values
only the shim translates or only the TorchScript exporter honours keep the call on a route that
honours them (``dynamo=False``, or ``compat.export``: see onx0).
"""

from __future__ import annotations

import ast

from compat import catalog_facts as facts
from compat import torch_apis
from compat.torch_apis import SIZE_ONE_AXIS_DYNAMIC

from .. import evidence
from ..analysis import SHIM_MODULES, Context, ExportCall, Option, literal
from ..model import Edit
from ..registry import register
from ..resolve import Scope, dotted
from .axes import dim_auto, dynamic_shapes_code
from .route import Route, harmless, kind

#: keywords distinctive enough to report on calls of project-local wrappers (not `training=`)
WRAPPER_KEYWORDS = tuple(o for o in facts.OPTION_CODES if o not in facts.GENERIC_OPTIONS)


def _bool_training_fix(ctx: Context, ec: ExportCall, opt: Option) -> Edit | None:
    """``training=False/True/None`` (torch 1.x) is a TypeError on torch >= 2.x: drop False and
    None (EVAL is the default), spell True as ``TrainingMode.TRAINING``."""
    value = literal(opt.value)
    if value is False or value is None:
        return Edit("drop", ec.key, ("training",))
    ref = ctx.module_ref("torch.onnx", ec.scope) if value is True else None
    return Edit("set", ec.key, ("training", f"{ref}.TrainingMode.TRAINING")) if ref else None


_SAME_MODULE = ("to", "cuda", "cpu", "float", "half", "double", "bfloat16", "requires_grad_")


def _sets_eval(call: ast.expr) -> bool | None:
    """True for ``x.eval()`` / ``x.train(False)``, False for other ``train`` calls; else None."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return None
    if call.func.attr == "eval" and not call.args and not call.keywords:
        return True
    if call.func.attr == "train":
        vals = list(call.args) + [k.value for k in call.keywords if k.arg in (None, "mode")]
        return len(vals) == 1 and literal(vals[0]) is False
    return None


def _mode_of(stmt: ast.stmt, name: list[str]) -> bool | None:
    """What ``stmt`` does to the mode of model ``name``: True eval, False train/unknown, None
    nothing."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
            and isinstance(stmt.value.func, ast.Attribute) and dotted(stmt.value.func.value) == name:
        verdict = _sets_eval(stmt.value)
        if verdict is not None:
            return verdict
    targets = (stmt.targets if isinstance(stmt, ast.Assign) else
               [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else [])
    if any(dotted(t) == name for t in targets):
        value = getattr(stmt, "value", None)
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            verdict = _sets_eval(value)
            if verdict is not None:
                return verdict
            if value.func.attr not in _SAME_MODULE:
                return False
            value = value.func.value
        return None if dotted(value) == name else False  # `m = m.to(dev)` keeps the mode
    for node in ast.walk(stmt):  # anything else touching the model's mode: not evidently eval
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("eval", "train") and dotted(node.func.value) == name:
            return False
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store) \
                and dotted(node) == name:
            return False
    return None


def evidently_eval(ctx: Context, ec: ExportCall) -> bool:
    """The model is in eval mode at the call: the last statement before it (same block, or an
    enclosing ``if``/``with``/``try`` body of the same scope) that sets the mode of that name is
    ``m.eval()``, ``m.train(False)`` or ``m = M().eval()``."""
    name = dotted(ec.model) if ec.model is not None else None
    if not name:
        return False
    node: ast.AST = ec.node
    while True:
        holder = ctx.parent(node)
        if holder is None or isinstance(holder, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                                                 ast.GeneratorExp)):
            return False
        if not isinstance(node, ast.stmt):
            node = holder
            continue
        block = next((getattr(holder, f) for f in ("body", "orelse", "finalbody")
                      if node in getattr(holder, f, ())), None)
        if block is None:
            return False
        for prev in reversed(block[:block.index(node)]):
            verdict = _mode_of(prev, name)
            if verdict is not None:
                return verdict
        if not isinstance(holder, (ast.If, ast.With, ast.AsyncWith, ast.Try)) \
                or (isinstance(holder, ast.Try) and block is not holder.body):
            return False  # scope start, loop body, handler: nothing known
        node = holder


@register("routed_export", order=20)
def check_export(ctx: Context, ec: ExportCall, route: Route) -> None:
    """ONX101-107 on an export call whose route is known."""
    if route.old_torch:  # the default exporter differs between the torch versions supported
        for name, opt in ec.options.items():
            code = facts.OPTION_CODES.get(name)
            if code and code.startswith("ONX1") and not harmless(ctx, ec, opt):
                ctx.emit(code, opt.value, anchor=ec.node,
                         note="kept: the supported torch versions export by different routes")
        return
    if route.dynamo is None:
        return
    k = ec.key
    pinned = {c for c, _ in route.pins}
    for name, opt in list(ec.options.items()):
        code = facts.OPTION_CODES.get(name)
        if not code or not code.startswith("ONX1"):
            continue
        if not route.dynamo:
            pins = route.pin_edits if not route.explicit and code in pinned else ()
            bool_fix = _bool_training_fix(ctx, ec, opt) if name == "training" else None
            if bool_fix is not None:
                ctx.emit(code, opt.value, "safe", ec.edits_for(opt, bool_fix, *pins),
                         note="torch 1.x value: the TorchScript exporter now takes a TrainingMode",
                         anchor=ec.node)
            elif pins:
                ctx.emit(code, opt.value, "safe", ec.edits_for(opt, *pins),
                         note="kept, with dynamo=False", anchor=ec.node)
            continue
        add_route = () if route.explicit else route.pin_edits
        if name == "do_constant_folding" and kind(opt) == "plain":
            # what the shim passes on the torch.export route: optimize= with the same value
            # (an explicit optimize= wins there, so the option is dropped beside one)
            edit = (Edit("drop", k, (name,)) if "optimize" in ec.options
                    else Edit("rename", k, (name, "optimize")))
            ctx.emit(code, opt.value, "safe", ec.edits_for(opt, edit, *add_route),
                     note="optimize= as the shim passes it on the torch.export route",
                     anchor=ec.node)
        elif name == "operator_export_type" and route.from_ledger \
                and evidence.site(route.evidence) is not None \
                and evidence.site(route.evidence).no_aten_node():
            ctx.emit(code, opt.value, "safe",
                     ec.edits_for(opt, Edit("drop", k, (name,)), *add_route),
                     note="the ledger shows no ATen node was needed", anchor=ec.node)
        elif name == "training" and route.train:
            ctx.emit(code, opt.value, "safe",
                     ec.edits_for(opt, Edit("drop", k, (name,)), *add_route),
                     note="batch statistics by the generated module's translations",
                     anchor=ec.node, generated=() if route.explicit else route.generated)
        elif not harmless(ctx, ec, opt):
            ctx.emit(code, opt.value, note="ignored with dynamo=True", anchor=ec.node)
        elif name == "dynamic_axes":
            auto, imports = dim_auto(ctx, ec)
            site = evidence.site(route.evidence) if route.from_ledger else None
            fixed = frozenset(site.fixed_axes()) if site is not None else frozenset()
            shapes = "None" if literal(opt.value) is None else \
                dynamic_shapes_code(ctx, ec, auto, fixed)
            if shapes is None or auto not in shapes:
                imports = ()  # string dims need no torch name
            edits = ((Edit("drop", k, (name,)),) if shapes == "None" else
                     (Edit("rename", k, (name, "dynamic_shapes")),
                      Edit("set", k, ("dynamic_shapes", shapes)), *imports))
            ctx.emit(code, opt.value, "safe", ec.edits_for(opt, *edits, *add_route),
                     anchor=ec.node, note="" if site is not None else _size_one_caveat(ctx))
        elif name == "training":
            drop = Edit("drop", k, (name,))
            if evidently_eval(ctx, ec):
                ctx.emit(code, opt.value, "safe", ec.edits_for(opt, drop, *add_route),
                         note="the model is in eval mode", anchor=ec.node)
            elif dotted(ec.model) and ctx.block_statement(ec.node) is not None:
                edits = ec.edits_for(opt, drop, Edit("before", k, (f"{ctx.src(ec.model)}.eval()",)),
                                     *add_route)
                ctx.emit(code, opt.value, "unsafe", edits, note="adds model.eval()",
                         anchor=ec.node)
            else:
                ctx.emit(code, opt.value, anchor=ec.node)
        else:
            ctx.emit(code, opt.value, "safe", ec.edits_for(opt, Edit("drop", k, (name,)),
                                                           *add_route), anchor=ec.node)


def _size_one_caveat(ctx: Context) -> str:
    """What a target torch that exports a size-1 example's dynamic axis static asks of the
    examples, where no ledger shows their sizes."""
    target = ctx.facts.get("target_torch")
    if target is None or SIZE_ONE_AXIS_DYNAMIC.available(target):
        return ""
    return (f"torch {torch_apis.shown(target)} (--target-torch) exports a dynamic axis static "
            "where its example has size 1: give examples of size >= 2 there, or migrate with "
            "a ledger, which shows the sizes")


@register("call", order=10)
def check_wrapper_call(ctx: Context, node: ast.Call, scope: list[Scope], quals: set[str]
                       ) -> None:
    """A project-local wrapper called with legacy export options (it may forward them); not the
    shim's own API (``compat.export`` honours them), where the rewriter may have routed a call,
    nor torch.onnx's own functions (the other rules' calls)."""
    if any(q.startswith("torch.onnx.") or q.split(".", 1)[0] in SHIM_MODULES for q in quals):
        return
    for kw in node.keywords:
        if kw.arg in WRAPPER_KEYWORDS:
            name = ctx.src(node.func)
            ctx.emit(facts.OPTION_CODES[kw.arg], kw.value,
                     note=f"passed to {name}(), which may forward it to torch.onnx.export",
                     anchor=node)
