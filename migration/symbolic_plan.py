"""The custom symbolics of one module and their translations (issue 32), found once per module.

``register_custom_op_symbolic("ns::op", fn, opset)`` with ``fn`` a function of this module:
``fn``'s source becomes a translation keyed by ``torch.ops.<ns or aten>.<op>.default``;
an ``autograd.Function`` with a ``symbolic`` staticmethod becomes a ``torch.library`` op
(``function_ops.py``) whose translation is its symbolic's, and its ``.apply`` calls use the op
while torch.export captures the model. An export
call of the module then passes ``custom_translation_table=<module>_onnx.translation_table()``
with ``dynamo=True``; a symbolic that cannot be translated (or a registration this tool cannot
read) keeps the call on ``compat.export``, with the reason and line (ONX304).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field

from compat import torch_apis

from . import generated, symbolic_translate
from .analysis import Context, literal
from .astwalk import walk_in_order
from .function_ops import FunctionOp
from .generated import Entry
from .model import Edit


@dataclass
class SymbolicPlan:
    """What the module's symbolics become: generated entries, or why not (per symbolic)."""

    entries: list[Entry] = field(default_factory=list)
    #: (line of the symbolic's def or registration, its name, why it has no translation)
    blocked: list[tuple[int, str, str]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # the symbolics translated
    registrations: list[ast.Call] = field(default_factory=list)  # the legacy registration calls
    #: autograd.Functions that become ops, and the ``Fn.apply(...)`` calls to route to them
    functions: list[FunctionOp] = field(default_factory=list)
    applies: list[tuple[ast.Call, FunctionOp]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.entries) and not self.blocked


def _callee(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def table_key(name: str) -> str | None:
    """``"::relu"`` -> ``"aten::relu"``; ``"ns::op"`` as it is; None for a name that is not
    ``ns::op`` (the translation is of the op's default overload)."""
    ns, sep, op = name.partition("::")
    if not sep or not op.isidentifier() or (ns and not ns.isidentifier()):
        return None
    return f"{ns or 'aten'}::{op}"


def _held_by_target(ctx: Context) -> str:
    """Why the call sites of a migrated Function cannot be written for ``--target-torch`` (''
    when they can): they choose the op by ``torch.compiler.is_exporting()``, which torch before
    2.12 also makes True under torch.compile, where the op (it has no backward) would break
    training. The export call then keeps ``compat.export``, which needs no call-site change."""
    target = ctx.facts.get("target_torch")
    api = torch_apis.EXPORTING_ONLY_UNDER_EXPORT
    if target is None or api.available(tuple(target)):
        return ""
    return (f"not migrated for target torch {torch_apis.shown(tuple(target))}: its call sites "
            f"would pick the op by torch.compiler.is_exporting(), also True under torch.compile "
            f"before torch {torch_apis.shown(api.since)} (pytorch/pytorch#176347), so a compiled "
            f"model would call the op, which has no backward")


def _own_module(tree: ast.Module, path: str) -> symbolic_translate.OwnModule | None:
    """The user's module as its generated neighbour imports it: relatively, inside a package
    (a script is never imported: that would run it)."""
    folder, name = os.path.split(path)
    if not path or not name.endswith(".py") or name == "__init__.py" \
            or not os.path.isfile(os.path.join(folder or ".", "__init__.py")):
        return None
    return symbolic_translate.OwnModule.of(tree, name[: -len(".py")], level=1)


def plan(ctx: Context) -> SymbolicPlan:
    """The module's symbolic plan (computed once, kept in ``ctx.facts``)."""
    if "symbolic_plan" not in ctx.facts:
        ctx.facts["symbolic_plan"] = _plan(ctx)
    return ctx.facts["symbolic_plan"]


def _plan(ctx: Context) -> SymbolicPlan:
    out = SymbolicPlan()
    defs: dict[str, ast.FunctionDef] = {}
    nodes = list(walk_in_order(ctx.tree))  # one walk for the module's four questions
    for n in nodes:  # nested ones too (onnxruntime's register() defines its own)
        if isinstance(n, ast.FunctionDef):
            defs.setdefault(n.name, n)
    local = frozenset(defs)
    path = ctx.path if ctx.path and ctx.path != "-" else ""
    namespace = generated.module_name(path) if path else "migrated"
    torch_names = symbolic_translate.torch_symbolic_names(ctx.tree, nodes)
    imports = symbolic_translate.module_imports(ctx.tree)
    own = _own_module(ctx.tree, path)
    for node in nodes:
        if isinstance(node, ast.ClassDef) and any(
                isinstance(s, ast.FunctionDef) and s.name == "symbolic" for s in node.body):
            fop = FunctionOp(node, namespace, path, local, imports, own)
            held = _held_by_target(ctx)
            if fop.blockers or held:
                line, why = fop.blockers[0] if fop.blockers else (node.lineno, held)
                out.blocked.append((line, f"{node.name}.symbolic", why))
            else:
                out.functions.append(fop)
                out.entries += fop.entries
                out.names.append(f"{node.name}.symbolic")
            continue
        if not (isinstance(node, ast.Call) and _callee(node.func) == "register_custom_op_symbolic"):
            continue
        name = literal(node.args[0]) if node.args else None
        fn = node.args[1] if len(node.args) > 1 else None
        label = ctx.src(fn) if fn is not None else "?"
        key = table_key(name) if isinstance(name, str) else None
        if key is None:
            out.blocked.append((node.lineno, label, "the op name is no 'ns::op' literal"))
            continue
        if not isinstance(fn, ast.Name) or fn.id not in defs:
            out.blocked.append((node.lineno, label, "no def of this module"))
            continue
        out.registrations.append(node)
        func = defs[fn.id]
        opset = literal(node.args[2]) if len(node.args) > 2 else None
        opset = opset if isinstance(opset, int) else None
        tr = symbolic_translate.translate(func, fn.id, local, torch_names, imports, opset, own)
        todo, seen = list(tr.helpers), set()
        target = ctx.facts.get("target_torch")
        entries = symbolic_translate.entries(tr, path, func.lineno, key, doc=_doc(name, func),
                                             target=tuple(target) if target else None)
        while todo and tr.ok:
            helper = todo.pop()
            if helper in seen:
                continue
            seen.add(helper)
            sub = symbolic_translate.translate(defs[helper], helper, local, torch_names,
                                                  imports, opset, own)
            if not sub.ok:
                tr.blockers.extend(sub.blockers)
                break
            todo += sub.helpers
            entries += symbolic_translate.entries(sub, path, defs[helper].lineno, None)
        if not tr.ok:
            first = tr.blockers[0]
            out.blocked.append((first.line, fn.id, first.reason))
            continue
        out.names.append(f"{fn.id} ({name})")
        out.entries += entries
    by_name = {f.cls.name: f for f in out.functions}
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "apply" and isinstance(node.func.value, ast.Name) \
                and node.func.value.id in by_name:
            out.applies.append((node, by_name[node.func.value.id]))
    if not path:
        out.blocked.append((1, "?", "source read from stdin: no module to generate beside it"))
    elif out.entries:
        problem = generated.write_problem(generated.module_path(path))
        if problem is not None:
            out.blocked.append((1, generated.module_name(path), problem))
    return out


def _doc(name: str, func: ast.FunctionDef) -> str:
    return f"translation of the symbolic {func.name} registered for {name!r}"


def droppable(ctx: Context, node: ast.Call) -> Edit | None:
    """The edit removing the registration statement ``node``: only an expression statement of its
    own lines, with no comment on or right above them, in a block it does not empty."""
    stmt = ctx.parent(node)
    block = ctx.parent(stmt) if isinstance(stmt, ast.Expr) else None
    body = next((getattr(block, f) for f in ("body", "orelse", "finalbody")
                 if stmt in getattr(block, f, [])), None) if block is not None else None
    if body is None or len(body) < 2:
        return None
    lines = ctx.lines[stmt.lineno - 2: stmt.end_lineno]  # the line above too
    if any("#" in line for line in lines) or any(
            s is not stmt and (s.lineno <= stmt.end_lineno and s.end_lineno >= stmt.lineno)
            for s in body):
        return None
    return Edit("drop_stmt", ctx.key(node))


def report_blockers(ctx: Context, plan: SymbolicPlan) -> None:
    """ONX304 at each symbolic's blocking line (once per module)."""
    if ctx.facts.get("onx304_reported"):
        return
    ctx.facts["onx304_reported"] = True
    for line, name, why in plan.blocked:
        if name == "?":  # no module to generate (stdin): not the symbolic's doing
            continue
        ctx.emit("ONX304", ast.Pass(lineno=line, col_offset=0), note=f"{name}: {why}")
