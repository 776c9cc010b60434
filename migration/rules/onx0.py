"""ONX001: export calls relying on the default exporter get an explicit ``dynamo=``.

The route decision lives here: the torch.export route (``dynamo=True``) unless an option only
the TorchScript exporter honours pins ``dynamo=False``; ledger evidence overrides both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


def decide(ctx: Context, ec: ExportCall) -> Route:
    """Where this call should export, and the edits that pin it there."""
    opt = ec.options.get("dynamo")
    if opt is not None:
        value = literal(opt.value)
        return Route(value if isinstance(value, bool) else None, explicit=True)
    if ec.dynamo_maybe_in_kwargs:
        return Route(None, explicit=True)
    if ec.custom_symbolics:
        ref = ctx.module_ref("compat", ec.scope)
        edits: list[Edit] = [Edit("func", ec.key, (f"{ref or 'compat'}.export",))]
        if ref is None:
            edits.append(Edit("import", (0, 0), ("import compat",)))
        return Route(None, pin_edits=tuple(edits), via_compat=True)
    pins = onx2.pin_reason(ctx, ec) + onx1.pin_reason(ctx, ec)
    evidence = ctx.evidence_for(ec.node)
    if evidence is not None:
        dynamo = evidence.get("route_taken") == "dynamo"
        route = Route(dynamo, pins=[] if dynamo else pins, evidence=None if dynamo else evidence,
                      from_ledger=True)
    else:
        route = Route(not pins, pins=pins)
    edits = [Edit("add", ec.key, ("dynamo", str(route.dynamo)))]
    if route.dynamo:
        has_f = ec.f is not None and literal(ec.f) is not None
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
