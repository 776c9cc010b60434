"""ONX301-303: custom symbolics and TorchScript-exporter internals."""

from __future__ import annotations

import ast
import re

from .. import generated, symbolic_plan
from ..analysis import Context
from ..model import Edit
from ..registry import register
from ..resolve import Scope, dotted

REGISTER = {
    "torch.onnx.register_custom_op_symbolic": "register_custom_op_symbolic",
    "torch.onnx.unregister_custom_op_symbolic": "unregister_custom_op_symbolic",
}
FUNCTION = {"torch.autograd.Function", "torch.autograd.function.Function"}
_INTERNAL = re.compile(
    r"^torch\.onnx\.(symbolic_helper|symbolic_opset\d+|symbolic_registry|_internal\.jit_utils"
    r"|utils\._model_to_graph|_globals)(\.|$)"
)
_SYMBOLIC_DEF = re.compile(r"def\s+symbolic\s*\(")


@register("prepare")
def prepare(ctx: Context) -> None:
    """Whether the module defines custom symbolics (its export calls then use compat.export)."""
    text = ctx.text
    ctx.facts["custom_symbolics"] = (
        "register_custom_op_symbolic" in text or bool(_SYMBOLIC_DEF.search(text))
    )
    ctx.facts["uses_compat"] = ctx.imports_shim()


@register("call", order=30)
def check_call(ctx: Context, node: ast.Call, scope: list[Scope], quals: set[str]) -> None:
    """ONX301: registrations switch to compat's helpers, which also feed the torch.export route."""
    hit = next((REGISTER[q] for q in quals if q in REGISTER), None)
    if hit is None:
        return
    translations = symbolic_plan.plan(ctx) if hit == "register_custom_op_symbolic" else None
    if translations is not None:
        symbolic_plan.report_blockers(ctx, translations)
    if translations is not None and translations.ok and node in translations.registrations:
        # torch's own registration stays for TorchScript users; the export uses the translation
        module = generated.module_name(ctx.path)
        if ctx.facts.get("drop_legacy_symbolics") and symbolic_plan.droppable(ctx, node) is not None:
            note = f"translated into {module}.py; --drop-legacy-symbolics removes it with ONX001"
        else:
            note = f"translated into {module}.py; the registration stays for the TorchScript exporter"
        ctx.emit("ONX301", node, note=note)
        ctx.facts["custom_symbolics"] = True
        return
    ref, imports = ctx.import_shim(scope)
    edits = [Edit("func", ctx.key(node), (f"{ref}.{hit}",)), *imports]
    ctx.emit("ONX301", node, "safe", tuple(edits), note=f"compat.{hit}")
    ctx.facts["custom_symbolics"] = True


@register("import", order=10)
def check_import(ctx: Context, node: ast.Import | ast.ImportFrom, scope: list[Scope]) -> None:
    """ONX303: imports of TorchScript-exporter internals."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif node.level == 0 and node.module:
        names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    else:
        return
    for name in names:
        if _INTERNAL.match(name):
            ctx.emit("ONX303", node, note=name)
            return


@register("class")
def check_class(ctx: Context, node: ast.ClassDef, scope: list[Scope]) -> None:
    """ONX302: ``autograd.Function`` subclasses with a ``symbolic`` staticmethod."""
    if ctx.facts.get("uses_compat"):
        return  # exported through compat.export, which honours the symbolic
    if not any(FUNCTION & ctx.qualnames(b, scope) for b in node.bases if dotted(b)):
        return
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "symbolic":
            translations = symbolic_plan.plan(ctx)
            symbolic_plan.report_blockers(ctx, translations)
            done = translations.ok and any(f.cls is node for f in translations.functions)
            note = (f"{node.name}.symbolic: a torch.library op with its translation in "
                    f"{generated.module_name(ctx.path)}.py" if done else f"{node.name}.symbolic")
            ctx.emit("ONX302", stmt, note=note)
            return
