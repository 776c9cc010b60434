"""ONX001: export calls relying on the default exporter get an explicit ``dynamo=``.

The route decision lives here: the torch.export route (``dynamo=True``) unless an option only
the TorchScript exporter honours pins ``dynamo=False``; ledger evidence overrides both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compat.catalog import DYNAMO_MIN_OPSET, OPTION_CODES

from ..analysis import Context, ExportCall, literal
from ..model import Edit
from . import onx1, onx2


@dataclass
class Route:
    """The route of one export call: written (``explicit``) or decided by the rewriter."""

    dynamo: bool | None  # None: unknown (non-literal dynamo= or **kwargs that may carry it)
    explicit: bool = False
    pins: list[tuple[str, str]] = field(default_factory=list)  # (code, reason) for dynamo=False
    pin_edits: tuple[Edit, ...] = ()  # the edits that write the decision
    via_compat: bool = False
    evidence: dict | None = None
    from_ledger: bool = False


def _comment(route: Route) -> str:
    if route.evidence is not None:
        reason = route.evidence.get("fallback_reason") or "the ledger recorded the TorchScript route"
        return f"# compat.migrate: dynamo=False (ledger: {reason})"
    reasons = "; ".join(r for _, r in route.pins)
    tag = "TODO(compat.migrate)" if any(c == "ONX101" for c, _ in route.pins) else "compat.migrate"
    return f"# {tag}: dynamo=False because {reasons}"


def _enabled(ctx: Context, ec: ExportCall, code: str) -> bool:
    lines = [o.value.lineno for o in ec.options.values() if OPTION_CODES.get(o.name) == code]
    return ctx.enabled(code, *lines, ec.node.lineno)


def decide(ctx: Context, ec: ExportCall) -> Route:
    """Where this call should export, and the edits that pin it there."""
    opt = ec.options.get("dynamo")
    if opt is not None:
        value = literal(opt.value)
        return Route(value if isinstance(value, bool) else None, explicit=True)
    if ec.dynamo_maybe_in_kwargs:
        return Route(None, explicit=True)
    if ec.custom_symbolics:
        ref, imports = ctx.import_module("compat", ec.scope)
        edits: list[Edit] = [Edit("func", ec.key, (f"{ref}.export",)), *imports]
        return Route(None, pin_edits=tuple(edits), via_compat=True)
    pins = [(code, why) for code, why in onx2.pin_reason(ctx, ec) + onx1.pin_reason(ctx, ec)
            if _enabled(ctx, ec, code)]  # a suppressed finding makes no decision either
    opset = literal(ec.options["opset_version"].value) if "opset_version" in ec.options else None
    if isinstance(opset, int) and not isinstance(opset, bool) and opset < DYNAMO_MIN_OPSET:
        why = (f"opset_version={opset} is below {DYNAMO_MIN_OPSET}, the lowest opset the "
               "torch.export exporter builds")
        pins.append(("ONX001", why))
    evidence = ctx.evidence_for(ec.node)
    if evidence is not None:
        dynamo = evidence.get("route_taken") == "dynamo"
        route = Route(dynamo, pins=[] if dynamo else pins, evidence=None if dynamo else evidence,
                      from_ledger=True)
    else:
        route = Route(not pins, pins=pins)
    edits = [Edit("add", ec.key, ("dynamo", str(route.dynamo)))]
    if route.dynamo:  # f given (or maybe given through *args): keep the weights in the file
        has_f = literal(ec.f) is not None if ec.f is not None else ec.star_args
        if has_f and not {"external_data", "use_external_data_format"} & set(ec.options):
            edits.append(Edit("add", ec.key, ("external_data", "False")))
    else:
        edits.append(Edit("comment", ec.key, (_comment(route),)))
    route.pin_edits = tuple(edits)
    return route


def check_export(ctx: Context, ec: ExportCall) -> Route:
    """Emit ONX001 (when ``dynamo=`` is missing) and return the route for the ONX1 rules."""
    route = decide(ctx, ec)
    if route.explicit:
        return route
    if ec.star_kwargs:
        ctx.emit("ONX001", ec.node, note="**kwargs may carry dynamo=; set it explicitly")
        return Route(None, explicit=True)
    if route.via_compat:
        note = "custom symbolics in this file: export through compat.export"
    elif route.evidence is not None or ctx.evidence_for(ec.node) is not None:
        note = f"ledger: exported on the {'torch.export' if route.dynamo else 'TorchScript'} route"
    elif route.dynamo:
        note = "dynamo=True"
    else:
        note = "dynamo=False: " + "; ".join(r for _, r in route.pins)
    ctx.emit("ONX001", ec.node, "safe", route.pin_edits, note=note)
    return route
