"""The shared facts of the route decision: :class:`Route` (what onx0 decides and the ONX1/ONX2
rules read) and the options' reasons for a route (``pin_reason``, ``translated_pins``).

The rule families import this module, never each other (no import circle among them).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from compat import catalog_facts as facts

from .. import evidence
from ..analysis import Context, ExportCall, Option, disposition, literal
from ..model import Edit
from .axes import dynamic_shapes_code


@dataclass
class Route:
    """The route of one export call: written (``explicit``) or decided by the rewriter."""

    dynamo: bool | None  # None: unknown (non-literal dynamo= or **kwargs that may carry it)
    explicit: bool = False
    pins: list[tuple[str, str]] = field(default_factory=list)  # (code, reason) for dynamo=False
    pin_edits: tuple[Edit, ...] = ()  # the edits that write the decision
    via_compat: bool = False
    why: list[str] = field(default_factory=list)  # why the call stays on compat.export
    evidence: dict | None = None
    from_ledger: bool = False
    blocked: bool = False  # the route this tool would pin failed at this call site (ledger)
    old_torch: bool = False  # --target-torch older than dynamo=: the route cannot be written
    undecided: str = ""  # the ledger holds too few records of this call site to decide
    convert: str = ""  # the opset compat.convert_opset brings the written file down to
    dim_names: str = ""  # the dims compat.name_dims names in the written file (code)
    #: the generated module's entries the call's fix writes (``generated.Entry``: translations)
    generated: tuple = ()
    train: str = ""  # training=TRAINING/PRESERVE kept by the generated module's translations
    made: list[str] = field(default_factory=list)  # what the generated module holds for the call


#: what keeps a value's meaning only off plain torch's torch.export route
_KEPT = ("shim", "torchscript")


def kind(opt: Option) -> str | None:
    found = disposition(opt)
    return found.kind if found is not None else None


def harmless(ctx: Context, ec: ExportCall, opt: Option) -> bool:
    """True when the option's value is what the torch.export exporter does anyway (the
    catalog's "dropped", ``training=EVAL``, or ``dynamic_axes`` the rewriter can convert)."""
    if opt.name == "dynamic_axes":
        return literal(opt.value) is None or dynamic_shapes_code(ctx, ec) is not None
    if opt.name == "training":
        return kind(opt) in ("dropped", "plain")
    return kind(opt) == "dropped"


_SCRIPTED = re.compile(r"\bjit\s*\.\s*script\b|\bScriptModule\b|\bjit\s*\.\s*load\b")


def scripted_pins(ctx: Context, ec: ExportCall) -> list[tuple[str, str]]:
    """A scripted model's export needs the TorchScript exporter: (code, reason). The options'
    own needs are the catalog's (``option_pins``)."""
    out = []
    if "scripted" not in ctx.facts:  # a per-file fact: searched once, not once per call
        ctx.facts["scripted"] = bool(_SCRIPTED.search(ctx.text))
    if "example_outputs" in ec.options and ctx.facts["scripted"]:
        # example_outputs was required for ScriptModules; plain modules only traced, which
        # torch.export does as well, so the option is simply dropped for them
        why = f"example_outputs= with a ScriptModule in this file ({facts.SCRIPT_MODEL_REASON})"
        out.append(("ONX201", why))
    return out


def option_pins(ctx: Context, ec: ExportCall) -> list[tuple[str, str]]:
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


def pin_reason(ctx: Context, ec: ExportCall) -> list[tuple[str, str]]:
    """Why the call needs ``dynamo=False``, by the call's form and options: (code, reason)."""
    return scripted_pins(ctx, ec) + option_pins(ctx, ec)


def translated_pins(ctx: Context, ec: ExportCall, site: evidence.Site | None = None
                    ) -> list[tuple[str, str]]:
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
        if name == "operator_export_type" and site is not None and site.no_aten_node():
            continue  # the ledger shows no ATen node written: nothing for plain torch to keep
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


def symbolic_names(ctx: Context) -> list[str]:
    """The custom symbolics of the module, as a comment names them: ``relu_as_max (::relu)`` for
    a ``register_custom_op_symbolic`` call, ``ScaledTanh.symbolic`` for an ``autograd.Function``
    with one (searched once per module, only in modules that have symbolics)."""
    if "symbolic_names" not in ctx.facts:
        out: list[str] = []
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) \
                    and (node.func.attr if isinstance(node.func, ast.Attribute)
                         else node.func.id) == "register_custom_op_symbolic" and len(node.args) >= 2:
                op = literal(node.args[0])
                name = ctx.src(node.args[1])
                out.append(f"{name} ({op})" if isinstance(op, str) else name)
            elif isinstance(node, ast.ClassDef) and any(
                    isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "symbolic"
                    for s in node.body):
                out.append(f"{node.name}.symbolic")
        ctx.facts["symbolic_names"] = list(dict.fromkeys(out))
    return ctx.facts["symbolic_names"]
