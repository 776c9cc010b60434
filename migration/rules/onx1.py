"""ONX101-107: options the torch.export exporter ignores or translates differently.

What each value means today is the catalog's (``compat.catalog_facts``): dropped values are
dropped, plain-torch ones get their spelling (``do_constant_folding=False`` -> ``optimize=False``,
literal ``dynamic_axes`` -> ``dynamic_shapes``, ``training=EVAL`` -> ``model.eval()``), and values
only the shim translates or only the TorchScript exporter honours keep the call on a route that
honours them (``dynamo=False``, or ``compat.export``: see onx0).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from compat import catalog_facts as facts

from .. import evidence
from ..analysis import SHIM_MODULES, Context, ExportCall, Option, disposition, literal
from ..model import Edit
from ..registry import register
from ..resolve import Scope, dotted

if TYPE_CHECKING:
    from .onx0 import Route

#: keywords distinctive enough to report on calls of project-local wrappers (not `training=`)
WRAPPER_KEYWORDS = tuple(o for o in facts.OPTION_CODES if o not in facts.GENERIC_OPTIONS)
#: what keeps a value's meaning only off plain torch's torch.export route
_KEPT = ("shim", "torchscript")


def _bool_training_fix(ctx: Context, ec: ExportCall, opt: Option) -> Edit | None:
    """``training=False/True/None`` (torch 1.x) is a TypeError on torch >= 2.x: drop False and
    None (EVAL is the default), spell True as ``TrainingMode.TRAINING``."""
    value = literal(opt.value)
    if value is False or value is None:
        return Edit("drop", ec.key, ("training",))
    ref = ctx.module_ref("torch.onnx", ec.scope) if value is True else None
    return Edit("set", ec.key, ("training", f"{ref}.TrainingMode.TRAINING")) if ref else None


def _kind(opt: Option) -> str | None:
    found = disposition(opt)
    return found.kind if found is not None else None


def harmless(ctx: Context, ec: ExportCall, opt: Option) -> bool:
    """True when the option's value is what the torch.export exporter does anyway (the
    catalog's "dropped", ``training=EVAL``, or ``dynamic_axes`` the rewriter can convert)."""
    if opt.name == "dynamic_axes":
        return literal(opt.value) is None or dynamic_shapes_code(ctx, ec) is not None
    if opt.name == "training":
        return _kind(opt) in ("dropped", "plain")
    return _kind(opt) == "dropped"


def pin_reason(ctx: Context, ec: ExportCall) -> list[tuple[str, str]]:
    """Options (ONX1 and removed ones) whose value plain torch honours only with
    ``dynamo=False``, by the catalog: (code, reason). ``dynamic_axes`` the rewriter cannot
    convert is one too (the TorchScript exporter reads it as it is)."""
    out = []
    for name, opt in ec.options.items():
        found = disposition(opt)
        if found is None:
            continue
        if name == "dynamic_axes":
            if not harmless(ctx, ec, opt):
                out.append((found.code, _axes_reason(ctx, ec)))
        elif found.kind in _KEPT:
            out.append((found.code, found.reason(ctx.src(opt.value))))
    return out


def translated_pins(ctx: Context, ec: ExportCall) -> list[tuple[str, str]]:
    """Options of a call the ledger shows exported on the shim's torch.export route whose
    values only the shim translates there (the catalog's "shim" values: ``training=TRAINING``,
    ``custom_opsets``, ...): plain torch ignores them on that route, so only ``dynamo=False``
    (or ``compat.export``) keeps them; never dropped.

    Plain-torch values (``dynamic_axes`` -> ``dynamic_shapes``, ``do_constant_folding=False``
    -> ``optimize=False``) are spelled on that route and are not listed.
    """
    out = []
    for name, opt in ec.options.items():
        found = disposition(opt)
        if found is None or found.kind not in _KEPT:
            continue
        why = (f"the shim translated {name}={ctx.src(opt.value)} on the torch.export route; "
               "plain torch ignores it there")
        out.append((found.code, why))
    return out


def _axes_reason(ctx: Context, ec: ExportCall) -> str:
    """Why literal-or-not ``dynamic_axes`` could not become ``dynamic_shapes``."""
    if not isinstance(literal(ec.options["dynamic_axes"].value), dict):
        return "dynamic_axes is not a literal this tool can convert; write dynamic_shapes"
    if not isinstance(literal(ec.options["input_names"].value) if "input_names" in ec.options
                      else ..., (list, tuple)):
        return ("dynamic_axes needs literal input_names to be mapped to the inputs; "
                "write dynamic_shapes")
    return ("dynamic_axes cannot be mapped to the inputs (kwargs, a trailing dict or *args in "
            "args, or names that are not inputs); write dynamic_shapes")


def dim_auto(ctx: Context, ec: ExportCall) -> tuple[str, tuple[Edit, ...]]:
    """A spelling of ``torch.export.Dim.AUTO`` at the call, and the ``import torch`` it needs."""
    ref = ctx.module_ref("torch.export.Dim", ec.scope)
    if ref is not None:
        return f"{ref}.AUTO", ()
    torch_ref, imports = ctx.import_module("torch", ec.scope)
    return f"{torch_ref}.export.Dim.AUTO", imports


def _axis_names(key: str, spec: object) -> dict[int, str] | None:
    """``{axis: name}`` of one literal ``dynamic_axes`` entry, with the names the shim (and the
    TorchScript exporter) give the list form (``x_dynamic_axes_1``, ...); None if malformed."""
    if isinstance(spec, dict) and all(isinstance(a, int) and not isinstance(a, bool)
                                      and isinstance(n, str) and n for a, n in spec.items()):
        return dict(spec)
    if isinstance(spec, (list, tuple)) and all(isinstance(a, int) and not isinstance(a, bool)
                                               for a in spec):
        out: dict[int, str] = {}
        for i, axis in enumerate(spec):
            out[axis] = f"{key}_dynamic_axes_{i + 1}"
        return out
    return None


def _literal_axes(ctx: Context, ec: ExportCall) -> tuple[list[dict[int, str] | None],
                                                           dict[str, dict[int, str]]] | None:
    """Literal ``dynamic_axes`` mapped to the positional inputs (one entry per element of
    ``args``: the axes of the input ``input_names`` names at that position, or None) and to the
    named outputs; None when they cannot be mapped (a trailing dict, ``*args``, ``kwargs=``,
    names that are not inputs, a malformed entry)."""
    axes = literal(ec.options["dynamic_axes"].value)
    names = literal(ec.options["input_names"].value) if "input_names" in ec.options else ...
    if not isinstance(axes, dict) or not isinstance(names, (list, tuple)) or "kwargs" in ec.options:
        return None
    outputs = literal(ec.options["output_names"].value) if "output_names" in ec.options else []
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else []
    if isinstance(ec.args, ast.Tuple):
        elts = ec.args.elts
        if any(isinstance(e, ast.Starred) for e in elts) or (elts and _dict_like(ctx, ec, elts[-1])):
            return None
        count = len(elts)
    elif ec.args is not None and not isinstance(ec.args, (ast.Dict, ast.List)) \
            and not _dict_like(ctx, ec, ec.args):
        count = max(len(names), 1)
    else:
        return None
    if not all(isinstance(k, str) for k in axes) or any(k in names[count:] for k in axes):
        return None
    inputs: list[dict[int, str] | None] = []
    for i in range(count):
        name = names[i] if i < len(names) else None
        spec = axes.get(name) if name is not None else None
        found = _axis_names(name, spec) if spec is not None else None
        if spec is not None and found is None:
            return None
        inputs.append(found)
    named_outputs = {}
    for key, spec in axes.items():
        if key in outputs and key not in names[:count]:
            found = _axis_names(key, spec)
            if found is None:
                return None
            named_outputs[key] = found
    return inputs, named_outputs


def _quote(ctx: Context, ec: ExportCall) -> str:
    """The quote the call's ``dynamic_axes`` (else the call) writes its strings with."""
    for text in (ctx.src(ec.options["dynamic_axes"].value), ctx.src(ec.node)):
        double, single = text.find('"'), text.find("'")
        if double >= 0 or single >= 0:
            return '"' if double >= 0 and (single < 0 or double < single) else "'"
    return '"'


def dynamic_shapes_code(ctx: Context, ec: ExportCall, auto: str = "torch.export.Dim.AUTO",
                        fixed: frozenset[tuple[str, int]] = frozenset()) -> str | None:
    """``dynamic_shapes`` for ``dynamic_axes`` the tool can read, keeping the legacy axis names:
    a tuple matching ``args`` whose axes are the names as strings (torch makes each a dynamic
    dim of that name, as the shim names it), ``auto`` (``Dim.AUTO``) for an axis the ledger
    shows the model fixes (the shim exported it static). For transformers' OnnxConfig,
    ``dict(config.inputs)`` (its input names are forward()'s parameters). Output axes are
    inferred (their names follow the inputs'). None when it cannot be converted."""
    mapping = _inputs_mapping(ctx, ec)
    if mapping is not None:
        return f"dict({mapping})"
    found = _literal_axes(ctx, ec)
    if found is None:
        return None
    inputs, _ = found
    names = literal(ec.options["input_names"].value)
    if not any(inputs) and not any(k in names for k in literal(ec.options["dynamic_axes"].value)):
        return "None"
    q = _quote(ctx, ec)
    entries = []
    for i, axes in enumerate(inputs):
        if axes is None:
            entries.append("None")
            continue
        parts = [f"{a}: {auto}" if (names[i], a) in fixed else f"{a}: {q}{n}{q}"
                 for a, n in axes.items()]
        entries.append("{" + ", ".join(parts) + "}")
    return "(" + ", ".join(entries) + ("," if len(entries) == 1 else "") + ")"


def plain_dims_problem(ctx: Context, ec: ExportCall, site: evidence.Site | None) -> str | None:
    """Why ``dynamic_shapes`` on plain torch would not write the dims the shim wrote for this
    call's ``dynamic_axes`` (None: it does, or there are none)."""
    opt = ec.options.get("dynamic_axes")
    if opt is None or literal(opt.value) is None or literal(opt.value) == {}:
        return None
    if _inputs_mapping(ctx, ec) is not None:
        if site is None or not site.ok:
            return ("dynamic_axes computed from an OnnxConfig: which axes the model fixes and "
                    "whether its input names are forward() parameters show only at run time")
        if site.fixed_axes():
            shown = ", ".join(f"{n}[{a}]" for n, a in sorted(site.fixed_axes()))
            return f"the model fixes dynamic axes of a computed dynamic_axes ({shown})"
        if not site.names_by_parameter():
            return "dynamic_axes keyed by graph input names that are not forward() parameters"
        return None
    found = _literal_axes(ctx, ec)
    if found is None:
        if dynamic_shapes_code(ctx, ec) is None and site is not None and site.ok:
            return ("dynamic_axes this tool cannot convert: plain torch's own reading of it with "
                    "dynamo=True (Dim.DYNAMIC, forward()'s order) is not the shim's")
        return None
    inputs, outputs = found
    known = {n for axes in inputs if axes for n in axes.values()}
    named = sorted({n for axes in outputs.values() for n in axes.values()} - known)
    if named:
        return (f"output axes named {named}, which no input axis is: plain torch names an "
                "output's dims after the inputs' it derives from")
    return None


def dict_inputs_problem(ctx: Context, ec: ExportCall) -> str | None:
    """Why plain torch may attach ``input_names`` to other forward() parameters than the shim:
    keyword inputs in a trailing dict of ``args``, which plain torch takes in the dict's order
    and the shim (as the TorchScript exporter) in forward()'s."""
    if "input_names" not in ec.options or literal(ec.options["input_names"].value) in ([], ()):
        return None
    last = ec.args.elts[-1] if isinstance(ec.args, (ast.Tuple, ast.List)) and ec.args.elts \
        else ec.args
    if last is None or not (_dict_like(ctx, ec, last) or _inputs_mapping(ctx, ec) is not None):
        return None
    return ("input_names with keyword inputs in a trailing dict of args: plain torch names the "
            "graph inputs in the dict's order, the shim in forward()'s parameter order")


def _dict_like(ctx: Context, ec: ExportCall, node: ast.expr) -> bool:
    """``node`` is (or is a name bound in the call's function to) a dict display, a dict
    comprehension or a ``dict(...)`` call."""
    def dict_expr(n: ast.expr | None) -> bool:
        return isinstance(n, (ast.Dict, ast.DictComp)) or (
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "dict"
            and not ctx.qualnames(n.func, ec.scope))

    if dict_expr(node):
        return True
    if not isinstance(node, ast.Name):
        return False
    holder = ec.scope[-1]
    for stmt in ast.walk(holder):
        if isinstance(stmt, ast.Assign) and dict_expr(stmt.value) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets):
            return True
    return False


def _items_sources(ctx: Context, ec: ExportCall, node: ast.expr) -> list[str] | None:
    """``[A, B]`` for ``chain(A.items(), B.items())`` / ``A.items()``; None otherwise."""
    def items_of(call: ast.expr) -> str | None:
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                and call.func.attr == "items" and not call.args and not call.keywords \
                and dotted(call.func.value):
            return ctx.src(call.func.value)
        return None

    one = items_of(node)
    if one is not None:
        return [one]
    if isinstance(node, ast.Call) and not node.keywords and isinstance(node.func, (ast.Name, ast.Attribute)) \
            and "itertools.chain" in ctx.qualnames(node.func, ec.scope):
        out = [items_of(a) for a in node.args]
        return out if out and all(out) else None  # type: ignore[return-value]
    return None


def _mapping_sources(ctx: Context, ec: ExportCall, axes: ast.expr) -> list[str] | None:
    """The mappings an OnnxConfig-style ``dynamic_axes`` merges: ``dict(chain(A.items(),
    B.items()))``, ``{k: v for k, v in chain(A.items(), B.items())}`` or ``{**A, **B}``."""
    if isinstance(axes, ast.Call) and isinstance(axes.func, ast.Name) and axes.func.id == "dict" \
            and len(axes.args) == 1 and not axes.keywords and ctx.qualnames(axes.func, ec.scope) == set():
        return _items_sources(ctx, ec, axes.args[0])
    if isinstance(axes, ast.DictComp) and len(axes.generators) == 1:
        gen = axes.generators[0]
        if gen.ifs or gen.is_async or not isinstance(gen.target, ast.Tuple) \
                or len(gen.target.elts) != 2 or not all(isinstance(e, ast.Name) for e in gen.target.elts):
            return None
        k, v = (e.id for e in gen.target.elts)  # type: ignore[attr-defined]
        if not (isinstance(axes.key, ast.Name) and axes.key.id == k
                and isinstance(axes.value, ast.Name) and axes.value.id == v):
            return None
        return _items_sources(ctx, ec, gen.iter)
    if isinstance(axes, ast.Dict) and axes.keys and all(key is None for key in axes.keys) \
            and all(dotted(v) for v in axes.values):
        return [ctx.src(v) for v in axes.values]
    return None


def _inputs_mapping(ctx: Context, ec: ExportCall) -> str | None:
    """``A`` when ``dynamic_axes`` merges mapping ``A`` (inputs) with others (outputs) and
    ``input_names`` is ``list(A.keys())`` / ``list(A)``: transformers' OnnxConfig, whose input
    names are the model's forward() parameters, so ``A`` (its axes made ``Dim.AUTO``) is
    ``dynamic_shapes`` by name."""
    names = ec.options.get("input_names")
    if "dynamic_axes" not in ec.options:
        return None
    axes = ec.options["dynamic_axes"].value
    if names is None or "kwargs" in ec.options or not isinstance(names.value, ast.Call):
        return None
    call = names.value
    if not (isinstance(call.func, ast.Name) and call.func.id in ("list", "tuple")
            and len(call.args) == 1 and not call.keywords):
        return None
    inner = call.args[0]
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
            and inner.func.attr == "keys" and not inner.args and not inner.keywords:
        inner = inner.func.value
    if not dotted(inner):
        return None
    sources = _mapping_sources(ctx, ec, axes)
    mapping = ctx.src(inner)
    return mapping if sources and mapping in sources else None


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
        if name == "do_constant_folding" and _kind(opt) == "plain":
            # what the shim passes on the torch.export route: optimize= with the same value
            # (an explicit optimize= wins there, so the option is dropped beside one)
            edit = (Edit("drop", k, (name,)) if "optimize" in ec.options
                    else Edit("rename", k, (name, "optimize")))
            ctx.emit(code, opt.value, "safe", ec.edits_for(opt, edit, *add_route),
                     note="optimize= as the shim passes it on the torch.export route",
                     anchor=ec.node)
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
                     anchor=ec.node)
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
