"""ONX001: export calls relying on the default exporter get an explicit ``dynamo=``.

The route decision lives here: the torch.export route (``dynamo=True``) unless an option only
the TorchScript exporter honours pins ``dynamo=False``; ledger evidence overrides both.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import os
import textwrap

from compat import catalog_facts as facts
from compat.catalog import DYNAMO_MIN_OPSET, HF_CACHE_REGISTRATION
from compat.catalog_facts import OPTION_CODES
from compat.torch_apis import DYNAMO_KEYWORD_SINCE, SIZE_ONE_AXIS_DYNAMIC

from .. import draft_plan, evidence, generated, pins, symbolic_plan, train_mode
from ..analysis import Context, ExportCall, literal, option_value
from ..ledger import CACHES
from ..model import Edit
from ..registry import register
from ..resolve import dotted
from . import axes
from .route import Route, pin_reason, symbolic_names, translated_pins


def _comment(ctx: Context, ec: ExportCall, route: Route) -> list[str]:
    """The comment above a ``dynamo=False`` pin, saying why (over lines that fit)."""
    reasons = "; ".join(r for _, r in route.pins)
    if route.evidence is not None and route.evidence.get("route_taken") == "dynamo":
        return _pin_lines(f"dynamo=False because {reasons}", ctx, ec)
    if route.evidence is not None:
        reason = route.evidence.get("fallback_reason") or "the ledger recorded the TorchScript route"
        if route.evidence.get("draft_deferred"):
            reason += f"; {DEFERRED_ADVICE}"
        return _pin_lines(f"dynamo=False (ledger: {reason})", ctx, ec)
    tag = "TODO(compat.migrate)" if any(c == "ONX101" for c, _ in route.pins) else "compat.migrate"
    return _pin_lines(f"dynamo=False because {reasons}", ctx, ec, tag)


#: what a pin from TorchScript exports after a deferred draft capture adds: the torch.export
#: route was not finished there, a record of it can move the call
DEFERRED_ADVICE = ("to move this call to dynamo=True, record it with `compat run --route dynamo "
                   "--ledger` and migrate again")


def _enabled(ctx: Context, ec: ExportCall, code: str) -> bool:
    """A ``# noqa``'d finding makes no route decision; an unselected one still does (its
    option keeps its meaning; the pin is then that finding's fix too, see ``needs``)."""
    lines = [o.value.lineno for o in ec.options.values() if OPTION_CODES.get(o.name) == code]
    return not ctx.suppressed(code, *lines, ec.node.lineno)


def _via_compat(ctx: Context, ec: ExportCall, why: list[str], verdict: dict | None = None
                ) -> Route:
    """Export through ``compat.export``: the one way to keep what only the shim does. The
    diff says why, in a comment above the call."""
    ref, imports = ctx.import_shim(ec.scope)
    comment = _pin_lines(f"compat.export because {'; '.join(why)}", ctx, ec)
    edits: tuple[Edit, ...] = (Edit("func", ec.key, (f"{ref}.export",)),
                               *(Edit("comment", ec.key, (c,)) for c in comment), *imports)
    return Route(None, pin_edits=edits, via_compat=True, why=why, evidence=verdict)


def _comment_lines(text: str, ctx: Context, ec: ExportCall, tag: str = "compat.migrate"
                   ) -> list[str]:
    """``# compat.migrate: text`` over lines that fit in 99 columns at the call's indentation."""
    stmt = ctx.block_statement(ec.node) or ec.node
    width = max(99 - stmt.col_offset, 40)
    return textwrap.wrap(text, width, initial_indent=f"# {tag}: ", subsequent_indent="#   ",
                         break_on_hyphens=False, break_long_words=False)


def _pin_lines(text: str, ctx: Context, ec: ExportCall, tag: str = "compat.migrate") -> list[str]:
    """A pin's comment: why, then its expiry date when ``--pin-expires`` gave one (pins.py)."""
    expires = ctx.facts.get("pin_expires")
    return _comment_lines(text, ctx, ec, tag) + ([pins.expiry_line(expires)] if expires else [])


def _serves_callers(ctx: Context, ec: ExportCall) -> str | None:
    """The parameter of the enclosing function the call exports (its model or inputs): the
    call site then exports whatever its callers pass (a helper such as transformers'
    ``export_pytorch`` or yolov5's ``export_onnx``)."""
    holder = ec.scope[-1] if ec.scope else None
    if not isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = {a.arg for a in (*holder.args.posonlyargs, *holder.args.args,
                              *holder.args.kwonlyargs)}
    for node in (ec.model, ec.args):
        for name in ast.walk(node) if node is not None else ():
            if isinstance(name, ast.Name) and name.id in params:
                return name.id
    return None


#: a ledger with fewer records of a call site serving its callers cannot decide it (docs)
ENOUGH_RECORDS = 2


def _too_few(ctx: Context, ec: ExportCall, site: evidence.Site) -> str:
    """Why the ledger's records of a helper's call site are too few to move it to one plain
    route: they show fewer of its callers' models than ``ENOUGH_RECORDS``."""
    param = _serves_callers(ctx, ec)
    if param is None or len(site.ok) >= ENOUGH_RECORDS:
        return ""
    holder = ec.scope[-1].name  # type: ignore[attr-defined]
    shown = ", ".join(site.models) or "none"
    return (f"the ledger has {len(site.ok)} record(s) ({shown}) of a call that exports what the "
            f"callers of {holder}() pass ({param!r}): too few to decide for the others; record "
            "more of them with `compat run --ledger`, or leave this call to the shim "
            "(compat.export)")


#: calls whose result depends only on their arguments, as paths are built
_PATH_CALLS = {"os.path.join", "os.fspath", "os.path.abspath", "os.path.expanduser", "str",
               "pathlib.Path", "pathlib.PurePath"}
_PATH_METHODS = {"as_posix", "with_suffix", "with_name", "joinpath", "resolve", "absolute"}


def _path_expr(ctx: Context, ec: ExportCall, node: ast.expr, named_ok: bool) -> bool:
    """``node`` can be evaluated again after the export and names the same file: a string, an
    f-string, a path built by ``os.path.join``/``Path``/``/``/``.as_posix()``... of such parts;
    a plain name, attribute or subscript only when ``named_ok`` (the ledger shows a path was
    written: a name could hold a file object)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return all(_path_expr(ctx, ec, v.value, True) if isinstance(v, ast.FormattedValue)
                   else True for v in node.values)
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return named_ok and all(isinstance(n, (ast.Name, ast.Attribute, ast.Subscript,
                                               ast.Constant, ast.expr_context))
                                for n in ast.walk(node))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Add)):
        return _path_expr(ctx, ec, node.left, True) and _path_expr(ctx, ec, node.right, True)
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        pure = (isinstance(func, (ast.Name, ast.Attribute)) and bool(
            _PATH_CALLS & (ctx.qualnames(func, ec.scope) | ({func.id} if isinstance(func, ast.Name)
                                                          and func.id == "str" else set()))))
        method = isinstance(func, ast.Attribute) and func.attr in _PATH_METHODS \
            and _path_expr(ctx, ec, func.value, True)
        return (pure or method) and all(_path_expr(ctx, ec, a, True) for a in node.args)
    return False


#: the lowest opset compat.convert_opset writes (dynamo.downconvert.LOWEST; a test keeps them equal)
CONVERT_LOWEST = 11


def _step_blocker(ctx: Context, ec: ExportCall, site: evidence.Site | None) -> str:
    """Why no post-step (``compat.convert_opset``, ``compat.name_dims``) can follow the call
    ("" when one can): it needs ``f`` again, and a call that is a statement of its own."""
    named_ok = site is not None and site.written_to_files()
    if ec.f is None or not _path_expr(ctx, ec, ec.f, named_ok):
        return "f is not a path this tool can pass to compat.convert_opset again"
    if not isinstance(ctx.block_statement(ec.node), ast.Expr):
        return "the call is not a statement of its own (its result is used)"
    return ""


def _size_one_problem(ctx: Context, site: evidence.Site | None) -> str | None:
    """Why plain torch of the target exports static an axis the shim kept dynamic by tiling
    its size-1 example (None: it keeps it dynamic, or no record shows such an example)."""
    target = ctx.facts.get("target_torch")
    tiled = site.size_one_axes() if site is not None else []
    if not tiled or target is None or SIZE_ONE_AXIS_DYNAMIC.available(target):
        return None
    return (f"the shim tiled the size-1 example of {', '.join(tiled)} to keep the axis dynamic; "
            f"{SIZE_ONE_AXIS_DYNAMIC.why_not(target)} (--target-torch)")


def _opset_step(ctx: Context, ec: ExportCall, site: evidence.Site | None
                ) -> tuple[str, str]:
    """``(opset, "")``: the call needs ``compat.convert_opset(f, opset, out=f)`` after it to be
    written at the opset it asks for on plain torch (torch exports opset 18 there, and its own
    converter may fail or leave the model at 18; the step runs the shim's conversion, and
    ``compat run --observe`` records the file as the step leaves it, part of the call site);
    ``("", why)`` when the step cannot be written here; ``("", "")`` when none is needed."""
    opt = ec.options.get("opset_version")
    if opt is None:
        return "", ""
    value = literal(opt.value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= DYNAMO_MIN_OPSET:
        return "", ""
    if value is None:
        return "", ""
    opset = ctx.src(opt.value)
    where = _step_blocker(ctx, ec, site)
    if isinstance(value, int) and value < CONVERT_LOWEST:
        where = f"compat.convert_opset writes opset {CONVERT_LOWEST} and up"
    if not where:
        return opset, ""
    return "", (f"opset_version={opset} is below {DYNAMO_MIN_OPSET} (or may be), which plain "
                f"torch may leave at {DYNAMO_MIN_OPSET}, and {where}")


def _convert_edits(ctx: Context, ec: ExportCall, opset: str) -> tuple[Edit, ...]:
    """``compat.convert_opset(f, opset, out=f)`` right after the call, with the comment saying
    why, and the shim's import."""
    ref, imports = ctx.import_shim(ec.scope)
    f = ctx.src(ec.f)  # type: ignore[arg-type]
    line = f"{ref}.convert_opset({f}, {opset}, out={f})"
    stmt = ctx.block_statement(ec.node)
    indent = stmt.col_offset if stmt is not None else 0
    if indent + len(line) > 99:
        pad = " " * (len(ref) + len(".convert_opset("))
        line = f"{ref}.convert_opset({f}, {opset},\n{pad}out={f})"
    why = _comment_lines(f"torch exports opset {DYNAMO_MIN_OPSET} here; compat.convert_opset "
                         f"brings the file down to opset_version={opset}", ctx, ec)
    # a known opset below 18 is exported at 18 (torch's own converter would run otherwise, and
    # the step would find the file at the opset already); a computed one may be 18 or more
    value = literal(ec.options["opset_version"].value)
    at18 = (Edit("set", ec.key, ("opset_version", str(DYNAMO_MIN_OPSET))),) \
        if isinstance(value, int) and not isinstance(value, bool) else ()
    return (*at18, Edit("follow", ec.key, (line,)), *(Edit("comment", ec.key, (c,)) for c in why),
            *imports)


#: how ``evidence.shim_only`` says a record's branches were baked
BAKED = "the shim baked data-dependent branches"


def _draft_capture(ctx: Context, ec: ExportCall, site: evidence.Site) -> tuple[Edit, ...]:
    """``exported_program = torch.export.draft_export(model, args)`` before the call, which then
    exports that program: the explicit capture that bakes the branch the example takes, as the
    shim's draft capture did, with a comment naming the baked lines (issue 30.6). Empty when it
    cannot be written here (a model or args that are not plain expressions, keyword inputs,
    dynamic axes, a call that is no statement of its own)."""
    stmt = ctx.block_statement(ec.node)
    if ec.model is None or ec.args is None or ec.node.args[:1] != [ec.model] or len(ec.node.args) < 2 \
            or ec.node.args[1] is not ec.args or stmt is None or ec.star_args or ec.star_kwargs \
            or {"kwargs", "dynamic_axes", "dynamic_shapes"} & set(ec.options) \
            or isinstance(ec.args, (ast.Dict, ast.DictComp)):
        return ()
    module, imp = _generated_import(ctx, ec)
    names = ctx.names()
    program = next(n for n in ("exported_program", *(f"exported_program_{i}" for i in range(2, 99)))
                   if n not in names)
    args = ctx.src(ec.args)
    args = args if isinstance(ec.args, ast.Tuple) else f"({args},)"
    capture = f"{program} = {module}.{draft_plan.DRAFT_EXPORT}({ctx.src(ec.model)}, {args})"
    where = "; ".join(f"{os.path.basename(b.get('file') or '?')}:{b.get('line')} "
                      f"`{b.get('source')}`" for b in site.baked())
    why = _comment_lines(f"the model branches on a tensor's value ({where}); "
                         "torch.export.draft_export bakes the branch the example takes, as the "
                         f"shim did (on the parameters' real values: see "
                         f"{generated.module_name(ctx.path)}.py); torch.cond keeps both", ctx, ec)
    return (*(Edit("comment", ec.key, (c,)) for c in why), Edit("before", ec.key, (capture,)),
            Edit("arg", ec.key, (0, program)), imp)


def _cache_registration(ctx: Context, ec: ExportCall) -> tuple[Edit, ...]:
    """``register_cache_pytrees_for_model(model)`` before the call: transformers' own
    registration of its cache classes as pytree nodes, which the shim applied for the export
    (``dynamo/hf_caches.py``), so plain torch flattens the caches into graph inputs and outputs
    as the shim did. Empty when it cannot be written here (a model that is no plain name, a
    call that is no statement of its own)."""
    if ec.model is None or not dotted(ec.model) or ctx.block_statement(ec.node) is None:
        return ()
    module, func = HF_CACHE_REGISTRATION
    ref = ctx.module_ref(f"{module}.{func}", ec.scope)
    imports: tuple[Edit, ...] = ()
    if ref is None:
        if func in ctx.names():
            return ()
        ref, imports = func, (Edit("import", (0, 0), (f"from {module} import {func}",)),)
    why = _comment_lines("transformers' cache classes registered as pytree nodes (as the shim "
                         "did for this export), so torch.export flattens the caches into graph "
                         "inputs and outputs", ctx, ec)
    return (*(Edit("comment", ec.key, (c,)) for c in why),
            Edit("before", ec.key, (f"{ref}({ctx.src(ec.model)})",)), *imports)


def _forward_order(ctx: Context, ec: ExportCall) -> tuple[Edit, ...]:
    """The trailing dict of keyword inputs in ``args`` put in forward()'s parameter order
    before the call: plain torch names the graph inputs in the dict's order, the shim (as the
    TorchScript exporter) in forward()'s, so ``input_names`` then name the same inputs. Empty
    when it cannot be written here (``args`` not a tuple display ending in a plain name, a model
    that is no plain name, a call that is no statement of its own)."""
    if ec.model is None or not dotted(ec.model) or ctx.block_statement(ec.node) is None \
            or not isinstance(ec.args, ast.Tuple) or not ec.args.elts or ec.star_args:
        return ()
    last = ec.args.elts[-1]
    if not dotted(last):
        return ()
    names = ctx.names()
    fresh = next(n for n in ("inputs_in_forward_order",
                             *(f"inputs_in_forward_order_{i}" for i in range(2, 99)))
                 if n not in names)
    inspect_ref, imports = ctx.import_module("inspect", ec.scope)
    mapping, model = ctx.src(last), ctx.src(ec.model)
    line = (f"{fresh} = {{\n    k: {mapping}[k] for k in {inspect_ref}.signature({model}.forward)"
            f".parameters if k in {mapping}\n}} | {mapping}")
    elts = [ctx.src(e) for e in ec.args.elts[:-1]] + [fresh]
    args = "(" + ", ".join(elts) + ("," if len(elts) == 1 else "") + ")"
    if any(a is ec.args for a in ec.node.args):
        index = next(i for i, a in enumerate(ec.node.args) if a is ec.args)
        placed = Edit("arg", ec.key, (index, args))
    else:
        placed = Edit("set", ec.key, ("args", args))
    why = _comment_lines("the keyword inputs in forward()'s parameter order, as the shim named "
                         "them: plain torch names the graph inputs in the dict's order", ctx, ec)
    return (*(Edit("comment", ec.key, (c,)) for c in why), Edit("before", ec.key, (line,)),
            placed, *imports)


def _untranslated(ctx: Context, plan: symbolic_plan.SymbolicPlan) -> str:
    """Why the call keeps ``compat.export`` for its custom symbolics (ONX304 names each line)."""
    if not plan.blocked:
        names = ", ".join(symbolic_names(ctx)) or "registered elsewhere"
        return (f"custom symbolics in this file (compat.export honours them: {names}); "
                "plain torch would not keep them here")
    return "custom symbolics without a translation (ONX304: " + "; ".join(
        f"{name} at line {line}: {why}" for line, name, why in plan.blocked) + ")"


def _as_the_shim_applied(entries: list, site: evidence.Site | None) -> list:
    """The translations, keyed only for the ops whose symbolic the shim applied at this call
    site when its ledger says (the TorchScript registry lets torch's own symbolic of an aten op
    outrank a registration at a lower opset; the translation table must not override it)."""
    if site is None:
        return entries
    applied = {str(t.get("option") or "") for r in site.ok for t in r.get("translations") or ()
               if isinstance(t, dict) and t.get("code") == "ONX301"}
    applied |= {f"aten{a}" for a in applied if a.startswith("::")}
    out = []
    for e in entries:
        if e.table_key and e.table_key.startswith("aten::") and e.table_key not in applied:
            e = dataclasses.replace(e, table_key=None, doc=(e.doc + "; not in the table: the shim's "
                                                            "ledger shows torch's own symbolic "
                                                            "of this op applied"))
        out.append(e)
    return out


def train_table_blocker(ctx: Context, ec: ExportCall) -> tuple[str, str]:
    """``(mode, "")``: ``training=mode`` (``TRAINING``/``PRESERVE``) can be exported on plain torch
    with the shim's batch-statistics translations from the generated module (``TRAINING``: the
    call inside ``with <module>.train_mode(model):``); ``(mode, why)`` when it cannot be here;
    ``("", "")`` when the call has no such option."""
    opt = ec.options.get("training")
    mode = facts.canonical("training", option_value(opt.value)) if opt is not None else None
    if mode not in ("TRAINING", "PRESERVE"):
        return ("?", "training= is not a value this tool can read") \
            if opt is not None and mode is facts.UNKNOWN else ("", "")
    stmt = ctx.block_statement(ec.node)
    if mode == "TRAINING" and (ec.model is None or ec.star_args or not isinstance(stmt, ast.Expr)):
        return mode, ("the model is not a name this tool can put in train mode around the call, "
                      "or the call is not a statement of its own")
    if "custom_translation_table" in ec.options or ec.star_kwargs:
        return mode, "the call passes its own translation table (or **kwargs that may)"
    return mode, ""


def _train_edits(ctx: Context, ec: ExportCall, mode: str) -> tuple[tuple[Edit, ...], tuple]:
    """The edits exporting ``training=mode`` on plain torch, and the generated entries."""
    module, imp = _generated_import(ctx, ec)
    k = ec.key
    opt = ec.options["training"]
    edits: list[Edit] = [*ec.edits_for(opt, Edit("drop", k, ("training",))),
                         Edit("add", k, ("custom_translation_table",
                                         f"{module}.translation_table()")), imp]
    what = ("the model is captured in train mode, BatchNorm" if mode == "TRAINING"
            else "BatchNorm in train mode")
    why = _comment_lines(f"training={mode}: {what} exported with batch statistics by the shim's "
                         f"translations in {generated.module_name(ctx.path)}.py", ctx, ec)
    edits += [Edit("comment", k, (c,)) for c in why]
    if mode == "TRAINING":
        edits.append(Edit("wrap", k, (f"{module}.{train_mode.TRAIN_MODE}({ctx.src(ec.model)})",)))
    return tuple(edits), train_mode.entries(ctx.path, ec.node.lineno, mode)


def _generated_import(ctx: Context, ec: ExportCall) -> tuple[str, Edit]:
    """The name the call reads the generated module by, and its import."""
    taken = ctx.names()
    return generated.import_edit(ctx.path, taken)


def _name_dims_edits(ctx: Context, ec: ExportCall, dims: str) -> tuple[Edit, ...]:
    """``compat.name_dims(f, {...})`` right after the call: the output dims named as
    ``dynamic_axes`` named them, where torch names them after the inputs'."""
    ref, imports = ctx.import_shim(ec.scope)
    f = ctx.src(ec.f)  # type: ignore[arg-type]
    line = f"{ref}.name_dims({f}, {dims})"
    why = _comment_lines("torch names output dims after the input dims they derive from; "
                         "compat.name_dims writes the names dynamic_axes gave them", ctx, ec)
    return (Edit("follow", ec.key, (line,)), *(Edit("comment", ec.key, (c,)) for c in why),
            *imports)


def _output_names_edits(ctx: Context, ec: ExportCall, site: evidence.Site | None
                        ) -> tuple[Edit, ...] | str:
    """``output_names`` extended with the shim's names for the graph outputs it leaves unnamed
    (the ledger's ``unnamed_outputs``): torch names such an output after a graph node, and its
    own capture of the model may number the nodes otherwise than the shim's (CLIP: the shim's
    ``Dim.AUTO`` on the axes the model fixes leaves shape nodes the plain call has not). One
    model class: the names are appended; several: looked up by the model's class. A str: why
    they cannot be written here."""
    given = ec.options.get("output_names")
    found = site.unnamed_outputs() if site is not None else {}
    if given is None or found == {}:
        return ()
    value = literal(given.value)
    if found is None:
        return ("the shim's exports of one model class named the outputs output_names leaves "
                "unnamed differently")
    if value is ... and not axes._pure(given.value):
        return "output_names is an expression the call cannot evaluate again to extend it"
    text = ctx.src(ec.node)
    q = "'" if 0 <= text.find("'") < (text.find('"') if '"' in text else len(text)) else '"'
    def quoted(names: list[str]) -> str:
        return ", ".join(f"{q}{n}{q}" for n in names)

    head = quoted(list(value)) if isinstance(value, (list, tuple)) else f"*{ctx.src(given.value)}"
    edits: list[Edit] = []
    if len(found) == 1 and set(site.models) <= set(found):  # type: ignore[union-attr]
        names = "[" + ", ".join(p for p in (head, quoted(next(iter(found.values())))) if p) + "]"
    else:
        if ec.model is None or not dotted(ec.model) or ctx.block_statement(ec.node) is None:
            return "the shim named unnamed outputs by model, and the model is no plain name here"
        taken = ctx.names()
        fresh = next(n for n in ("unnamed_output_names",
                                 *(f"unnamed_output_names_{i}" for i in range(2, 99)))
                     if n not in taken)
        table = "{" + ", ".join(f"{q}{m}{q}: [{quoted(n)}]" for m, n in found.items()) + "}"
        edits.append(Edit("before", ec.key, (f"{fresh} = {table}",)))
        names = (f"[{head + ', ' if head else ''}*{fresh}.get(type({ctx.src(ec.model)})"
                 f".__name__, [])]")
    why = _comment_lines("the shim's names for the outputs output_names leaves unnamed: torch "
                         "names them after graph nodes, which its capture may number otherwise",
                         ctx, ec)
    placed = Edit("arg", ec.key, (given.index, names)) if given.index is not None \
        else Edit("set", ec.key, ("output_names", names))
    return (*(Edit("comment", ec.key, (c,)) for c in why), *edits, placed)


def decide(ctx: Context, ec: ExportCall) -> Route:
    """Where this call should export, and the edits that pin it there.

    With ledger evidence, every record of the call site counts: a form plain torch cannot give
    one of its models (what only the shim did, routes that differ by model) keeps the call on
    ``compat.export``; so does a plain-torch call that would not write what the shim wrote (the
    binding of ``input_names``, dim names, the opset where ``compat.convert_opset`` cannot
    follow). ``opset_version`` is never rewritten.
    """
    opt = ec.options.get("dynamo")
    if opt is not None:
        value = literal(opt.value)
        return Route(value if isinstance(value, bool) else None, explicit=True)
    if ec.dynamo_maybe_in_kwargs:
        return Route(None, explicit=True)
    translations = None
    if ec.custom_symbolics:
        translations = symbolic_plan.plan(ctx)
        symbolic_plan.report_blockers(ctx, translations)
        if not translations.ok:
            return _via_compat(ctx, ec, [_untranslated(ctx, translations)])
    if ctx.before_dynamo_keyword():
        return Route(None, old_torch=True)
    pins = [(code, why) for code, why in pin_reason(ctx, ec)
            if _enabled(ctx, ec, code)]  # a suppressed finding makes no decision either
    verdict = ctx.evidence_for(ec.node)
    site = evidence.site(verdict)
    if site is not None and not site.ok:
        site = None  # only failed records: they say which routes not to pin
    opset = literal(ec.options["opset_version"].value) if "opset_version" in ec.options else None
    if isinstance(opset, int) and not isinstance(opset, bool) and opset < DYNAMO_MIN_OPSET \
            and not _opset_step(ctx, ec, site)[0]:  # no convert_opset step can follow here
        why = (f"opset_version={opset} is below {DYNAMO_MIN_OPSET}, the lowest opset the "
               "torch.export exporter builds")
        pins.append(("ONX001", why))
    taken = verdict.get("route_taken") if verdict is not None else None
    failed = set(verdict.get("failed_routes") or ()) if verdict is not None else set()
    capture: tuple[Edit, ...] = ()
    before: tuple[Edit, ...] = ()  # plain-torch steps that do what the shim did for the export
    kept_shim: list[str] = []  # reasons the steps in ``before`` answer
    route_names: tuple[Edit, ...] = ()  # output_names extended with the shim's generated names
    if site is not None:
        reasons = site.keeps_shim()
        kept_shim = list(reasons)
        if reasons and site.baked():
            capture = _draft_capture(ctx, ec, site)
            if capture:  # the explicit capture does what the shim's draft capture did
                reasons = [r for r in reasons if not r.startswith(BAKED)]
        if any(r.startswith(CACHES) for r in reasons):
            registration = _cache_registration(ctx, ec)
            if registration:
                before += registration
                reasons = [r for r in reasons if not r.startswith(CACHES)]
        if any(r.startswith(evidence.BINDING) for r in reasons):
            reorder = _forward_order(ctx, ec)
            if reorder:
                before += reorder
                reasons = [r for r in reasons if not r.startswith(evidence.BINDING)]
        if reasons:  # plain torch cannot do what the shim did for one of its models
            return _via_compat(ctx, ec, reasons, verdict)
    train = ("", "")
    if taken == "dynamo":
        kept = [(code, why) for code, why in translated_pins(ctx, ec, site)
                if _enabled(ctx, ec, code)]
        train = train_table_blocker(ctx, ec)
        if train[0] == "TRAINING" and capture and not train[1]:
            # the explicit capture runs before the call, outside train_mode(model)
            train = (train[0], "the model's branch is baked by an explicit capture before the call")
        if train[0] and not train[1]:  # the shim's translations keep the shim's model
            kept = [(code, why) for code, why in kept if code != "ONX102"]
        elif train[0]:
            kept = [(c, f"{why} ({train[1]})" if c == "ONX102" else why) for c, why in kept]
        if kept and "legacy" in failed:  # neither plain route keeps what the shim did
            return _via_compat(ctx, ec, [("the shim translated options plain torch ignores and "
                                          "the TorchScript route failed here")], verdict)
        route = (Route(False, pins=kept, evidence=verdict, from_ledger=True) if kept
                 else Route(True, evidence=verdict, from_ledger=True))
    elif taken == "legacy":
        route = Route(False, pins=pins, evidence=verdict, from_ledger=True)
    else:
        route = Route(not pins, pins=pins)
        if ("dynamo" if route.dynamo else "legacy") in failed:
            route.blocked = True  # the ledger shows this route failing here: pin nothing
    if route.dynamo:  # plain torch must write what the shim wrote
        clear = site is not None and taken == "dynamo"  # its records show the binding agreed
        names = axes.output_dim_names(ctx, ec)
        route.dim_names = names if names and not _step_blocker(ctx, ec, site) else ""
        problems = [p for p in (None if clear else axes.dict_inputs_problem(ctx, ec),
                                axes.plain_dims_problem(ctx, ec, site, bool(route.dim_names)))
                    if p]
        route.convert, why = _opset_step(ctx, ec, site)
        problems += [p for p in (why, _size_one_problem(ctx, site)) if p]
        output_names = _output_names_edits(ctx, ec, site)
        if isinstance(output_names, str):
            problems.append(output_names)
        else:
            route_names = output_names
        if problems:
            return _via_compat(ctx, ec, problems, verdict)
    if site is not None and (route.dynamo or not any(c != "ONX001" for c, _ in pins)):
        route.undecided = _too_few(ctx, ec, site)
        if route.undecided and before:  # too few records to write the steps for every caller
            return _via_compat(ctx, ec, kept_shim, verdict)
        if route.undecided:
            return route
    edits = [Edit("add", ec.key, ("dynamo", str(route.dynamo)))]
    if capture and route.dynamo:
        edits += capture
        route.generated = draft_plan.entries(ctx.path, ec.node.lineno)
        route.made.append("draft_export")
    if before and route.dynamo:
        edits += before
    if route_names and route.dynamo:
        edits += route_names
    if route.dynamo and translations is not None:
        if "custom_translation_table" in ec.options or ec.star_kwargs:
            why = "custom symbolics in this file, and the call passes its own translation table"
            return _via_compat(ctx, ec, [why])
        module, imports = _generated_import(ctx, ec)
        entries = _as_the_shim_applied(translations.entries, site)
        # every translation left out of the table (torch's own symbolics applied): the generated
        # module then has no translation_table(), and plain torch needs none
        if any(e.table_key for e in entries) or translations.applies:
            edits += [Edit("add", ec.key, ("custom_translation_table",
                                           f"{module}.translation_table()")), imports]
        route.generated = (*route.generated, *entries)
        route.made.append("custom symbolics translated")
        if ctx.facts.get("drop_legacy_symbolics"):  # the export no longer needs them
            edits += [e for e in (symbolic_plan.droppable(ctx, r) for r in translations.registrations) if e]
        if translations.applies:
            torch_ref, torch_imports = ctx.import_module("torch", ec.scope)
            edits += [*(Edit("func", ctx.key(call), (fop.call_site(module, torch_ref),))
                        for call, fop in translations.applies), *torch_imports]
    elif translations is not None:
        return _via_compat(ctx, ec, [_untranslated(ctx, translations)])
    if route.dynamo and train[0] and not train[1]:
        train_edits, entries = _train_edits(ctx, ec, train[0])
        edits += train_edits
        route.generated = (*route.generated, *entries)
        route.train = train[0]
        route.made.append(f"training={train[0]}: BatchNorm translations")
    if route.dynamo:  # f given (or maybe given through *args): keep the weights in the file
        has_f = literal(ec.f) is not None if ec.f is not None else ec.star_args
        if has_f and not {"external_data", "use_external_data_format"} & set(ec.options):
            edits.append(Edit("add", ec.key, ("external_data", "False")))
        if route.dim_names:
            edits += _name_dims_edits(ctx, ec, route.dim_names)
        if route.convert:
            edits += _convert_edits(ctx, ec, route.convert)
    else:
        edits += [Edit("comment", ec.key, (c,)) for c in _comment(ctx, ec, route)]
    route.pin_edits = tuple(edits)
    return route


#: options a helper may take as parameters and the rewriter reads as its callers' values
_CALLER_OPTIONS = ("opset_version", "dynamic_axes")


def _callers_literal(ctx: Context, ec: ExportCall, node: ast.expr) -> ast.expr | None:
    """The literal every caller in this module passes for parameter ``node`` of the function
    holding the call (a default counts for a caller that passes none); None when the name is
    no parameter, the function has no caller here, is referenced otherwise, or the callers
    pass different or non-literal values."""
    holder = ec.scope[-1] if ec.scope else None
    if not isinstance(node, ast.Name) or not isinstance(holder, ast.FunctionDef):
        return None
    params = [a.arg for a in (*holder.args.posonlyargs, *holder.args.args)]
    if node.id not in params:
        return None
    index = params.index(node.id)
    defaults = dict(zip(params[len(params) - len(holder.args.defaults):], holder.args.defaults))
    calls, seen = [], 0
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Name) and n.id == holder.name:
            seen += 1
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == holder.name:
            calls.append(n)
    if not calls or seen != len(calls):
        return None
    values = []
    for call in calls:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        given = call.args[index] if index < len(call.args) else next(
            (k.value for k in call.keywords if k.arg == node.id), defaults.get(node.id))
        value = literal(given) if given is not None else ...
        if value is ... or value is None:
            return None
        values.append((value, given))
    if any(v != values[0][0] for v, _ in values):
        return None
    return values[0][1]


@register("export", order=-10)
def read_callers_values(ctx: Context, ec: ExportCall) -> None:
    """A helper exporting with its parameters as ``opset_version``/``dynamic_axes`` migrates
    once, with the value all its callers in this module pass (issue 30.7): the option reads as
    that literal (its text stays the parameter's name)."""
    for name in _CALLER_OPTIONS:
        opt = ec.options.get(name)
        if opt is None or literal(opt.value) is not ...:
            continue
        found = _callers_literal(ctx, ec, opt.value)
        if found is not None:
            value = copy.copy(found)
            for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                setattr(value, attr, getattr(opt.value, attr))
            opt.value = value


@register("route")
def check_export(ctx: Context, ec: ExportCall) -> Route:
    """Emit ONX001 (when ``dynamo=`` is missing) and return the route for the ONX1 rules."""
    route = decide(ctx, ec)
    if route.explicit:
        return route
    if ec.star_kwargs:
        ctx.emit("ONX001", ec.node, note="**kwargs may carry dynamo=; set it explicitly")
        return Route(None, explicit=True)
    if route.old_torch:
        since = ".".join(map(str, DYNAMO_KEYWORD_SINCE))
        ctx.emit("ONX001", ec.node, note=f"--target-torch {ctx.before_dynamo_keyword()}: "
                 f"dynamo= needs torch >= {since}; left to the default exporter")
        return route
    if route.blocked:
        failed = "torch.export" if route.dynamo else "TorchScript"
        ctx.emit("ONX001", ec.node, note=f"the ledger shows the {failed} route failing here: "
                 "no route to pin")
        return Route(None, explicit=True)
    if route.undecided:
        ctx.emit("ONX001", ec.node, note=route.undecided)
        return Route(None, explicit=True)
    if route.via_compat:
        note = "; ".join(route.why) + ": export through compat.export"
    elif route.from_ledger and route.pins and route.evidence.get("route_taken") == "dynamo":
        note = "dynamo=False: " + "; ".join(r for _, r in route.pins)
    elif route.from_ledger:
        note = f"ledger: exported on the {'torch.export' if route.dynamo else 'TorchScript'} route"
        if route.evidence.get("draft_deferred"):  # type: ignore[union-attr]
            note += f" (the torch.export route's draft capture deferred): {DEFERRED_ADVICE}"
    elif route.dynamo:
        note = "dynamo=True"
    else:
        note = "dynamo=False: " + "; ".join(r for _, r in route.pins)
    if route.convert:
        note += f"; opset_version={route.convert} kept, compat.convert_opset after the export"
    if route.made:
        note += f"; {', '.join(route.made)} in {generated.module_name(ctx.path)}.py"
    ctx.emit("ONX001", ec.node, "safe", route.pin_edits, note=note, generated=route.generated)
    return route
