"""``dynamic_axes`` read as ``dynamic_shapes``: what the rewriter can convert, and why not.

Shared by the route decision (onx0: does plain torch write the shim's dims?) and the option
rules (onx1: the rewrite itself); no rule hooks here.
"""

from __future__ import annotations

import ast

from .. import evidence
from ..analysis import Context, ExportCall, literal
from ..model import Edit
from ..resolve import dotted


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


_PURE = (ast.Name, ast.Attribute, ast.BoolOp, ast.Or, ast.And, ast.Constant, ast.expr_context)


def _pure(node: ast.expr) -> bool:
    """``node`` reads names only (it may be evaluated again after the call)."""
    return all(isinstance(n, _PURE) for n in ast.walk(node))


def _runtime_axes(ctx: Context, ec: ExportCall) -> tuple[str, list[str], str] | None:
    """``(A, inputs, outputs)`` for ``dynamic_axes=A`` that is no literal but a plain expression
    the call may evaluate again (a name, ``dynamic or None``: yolov5's ``export_onnx``), with
    literal ``input_names`` (``inputs``: those of the positional inputs) and ``output_names``
    a literal or such an expression (``outputs``: its code, "" without any); None otherwise
    (``kwargs=``, ``*args``, a trailing dict, an unknown count of inputs)."""
    opt = ec.options.get("dynamic_axes")
    if opt is None or literal(opt.value) is not ... or "kwargs" in ec.options \
            or not _pure(opt.value):
        return None
    names = literal(ec.options["input_names"].value) if "input_names" in ec.options else ...
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        return None
    given = ec.options.get("output_names")
    outputs = "" if given is None else ctx.src(given.value)
    value = literal(given.value) if given is not None else []
    if value is ... and not _pure(given.value):  # type: ignore[union-attr]
        return None
    if value is not ... and not (isinstance(value, (list, tuple))
                                 and all(isinstance(n, str) for n in value)):
        return None
    if isinstance(ec.args, ast.Tuple):
        if any(isinstance(e, ast.Starred) for e in ec.args.elts) or (
                ec.args.elts and _dict_like(ctx, ec, ec.args.elts[-1])):
            return None
        count = len(ec.args.elts)
    elif ec.args is not None and len(names) == 1 and not isinstance(ec.args, (ast.Dict, ast.List)) \
            and not _dict_like(ctx, ec, ec.args):
        count = 1  # one input name: one input (a tensor, or a name holding a 1-tuple)
    else:
        return None
    return ctx.src(opt.value), list(names[:count]), outputs if value != [] else ""


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
        if not fixed:
            return f"dict({mapping})"
        # the axes the ledger shows the model fixes are left out (static, as the shim exported
        # them; Dim.AUTO may keep such an axis dynamic); the others keep their names
        q = _quote(ctx, ec)
        pairs = ", ".join(f"({q}{n}{q}, {a})" for n, a in sorted(fixed))
        return (f"{{name: {{axis: dim for axis, dim in axes.items() if (name, axis) not in "
                f"{{{pairs}}}}} for name, axes in {mapping}.items()}}")
    found = _literal_axes(ctx, ec)
    if found is None:
        runtime = _runtime_axes(ctx, ec)
        if runtime is None or fixed:
            return None
        # evaluated at the call: each input's axes as dynamic_axes gives them at run time
        axes_src, names, _ = runtime
        q = _quote(ctx, ec)
        listed = ", ".join(f"{q}{n}{q}" for n in names)
        return f"tuple(({axes_src} or {{}}).get(name) for name in [{listed}])"
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


def output_dim_names(ctx: Context, ec: ExportCall) -> str | None:
    """``{"out": {0: "out_rows"}}`` (code) for literal ``dynamic_axes`` naming output axes no
    input axis names, which plain torch names after the inputs' dims they derive from: what a
    ``compat.name_dims`` step after the export sets (issue 30.2); None when none is needed."""
    if "dynamic_axes" not in ec.options:
        return None
    mapping = _inputs_mapping(ctx, ec)
    if mapping is not None:
        return _mapping_output_names(ctx, ec, mapping)
    found = _literal_axes(ctx, ec)
    if found is None:
        runtime = _runtime_axes(ctx, ec)
        if runtime is None or not runtime[2]:
            return None
        # the output axes dynamic_axes names at run time (none: nothing to name)
        return (f"{{name: axes for name, axes in ({runtime[0]} or {{}}).items() "
                f"if name in {runtime[2]}}}")
    inputs, outputs = found
    known = {n for axes in inputs if axes for n in axes.values()}
    if not {n for axes in outputs.values() for n in axes.values()} - known:
        return None
    q = _quote(ctx, ec)
    return "{" + ", ".join(
        f"{q}{out}{q}: {{" + ", ".join(f"{a}: {q}{n}{q}" for a, n in axes.items()) + "}"
        for out, axes in outputs.items()) + "}"


def _mapping_output_names(ctx: Context, ec: ExportCall, mapping: str) -> str | None:
    """The output axes of an OnnxConfig-style ``dynamic_axes`` (its mappings but the inputs'),
    evaluated at run time, for the graph outputs ``output_names`` (a literal or a plain name)
    gives: the shim named them as given, torch after the input dims (or not at all where the
    model fixes the size)."""
    sources = [m for m in _mapping_sources(ctx, ec, ec.options["dynamic_axes"].value) or ()
               if m != mapping]
    given = ec.options.get("output_names")
    if not sources or given is None or not (_pure(given.value) or isinstance(
            literal(given.value), (list, tuple))):
        return None
    merged = sources[0] if len(sources) == 1 else "{" + ", ".join(f"**{m}" for m in sources) + "}"
    return (f"{{name: axes for name, axes in {merged}.items() "
            f"if name in {ctx.src(given.value)}}}")


def plain_dims_problem(ctx: Context, ec: ExportCall, site: evidence.Site | None,
                       names_step: bool = False) -> str | None:
    """Why ``dynamic_shapes`` on plain torch would not write the dims the shim wrote for this
    call's ``dynamic_axes`` (None: it does, or there are none); with ``names_step`` a
    ``compat.name_dims`` step follows the call (output axes named on their own are no problem)."""
    opt = ec.options.get("dynamic_axes")
    if opt is None or literal(opt.value) is None or literal(opt.value) == {}:
        return None
    if _inputs_mapping(ctx, ec) is not None:
        if site is None or not site.ok:
            return ("dynamic_axes computed from an OnnxConfig: which axes the model fixes and "
                    "whether its input names are forward() parameters show only at run time")
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
    if named and not names_step:
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
