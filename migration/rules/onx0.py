"""ONX001: export calls relying on the default exporter get an explicit ``dynamo=``.

The route decision lives here: the torch.export route (``dynamo=True``) unless an option only
the TorchScript exporter honours pins ``dynamo=False``; ledger evidence overrides both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compat.catalog import DYNAMO_KEYWORD_SINCE, DYNAMO_MIN_OPSET
from compat.catalog_facts import OPTION_CODES

from ..analysis import Context, ExportCall, literal
from ..ledger import shim_only
from ..model import Edit
from ..registry import register
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
    blocked: bool = False  # the route this tool would pin failed at this call site (ledger)
    old_torch: bool = False  # --target-torch older than dynamo=: the route cannot be written
    opset: int | None = None  # opset_version written with the route (ledger)


def _comment(route: Route) -> str:
    if route.evidence is not None and route.evidence.get("route_taken") == "dynamo":
        reasons = "; ".join(r for _, r in route.pins)
        return f"# compat.migrate: dynamo=False because {reasons}"
    if route.evidence is not None:
        reason = route.evidence.get("fallback_reason") or "the ledger recorded the TorchScript route"
        return f"# compat.migrate: dynamo=False (ledger: {reason})"
    reasons = "; ".join(r for _, r in route.pins)
    tag = "TODO(compat.migrate)" if any(c == "ONX101" for c, _ in route.pins) else "compat.migrate"
    return f"# {tag}: dynamo=False because {reasons}"


def _enabled(ctx: Context, ec: ExportCall, code: str) -> bool:
    """A ``# noqa``'d finding makes no route decision; an unselected one still does (its
    option keeps its meaning; the pin is then that finding's fix too, see ``needs``)."""
    lines = [o.value.lineno for o in ec.options.values() if OPTION_CODES.get(o.name) == code]
    return not ctx.suppressed(code, *lines, ec.node.lineno)


def _converted_down(ec: ExportCall, record: dict | None) -> bool:
    """The ledger shows the shim built this call at the torch.export route's opset and brought
    it down to the requested one itself (plain torch's converter cannot be relied on for that):
    the migrated call asks for the opset that route builds."""
    if "opset_version" not in ec.options or record is None:
        return False
    value = literal(ec.options["opset_version"].value)
    if isinstance(value, int) and value >= DYNAMO_MIN_OPSET:
        return False
    return any(isinstance(t, dict) and t.get("option") == "opset_version"
               for t in record.get("translations") or ())


def _via_compat(ctx: Context, ec: ExportCall, evidence: dict | None = None) -> Route:
    """Export through ``compat.export``: the one way to keep what only the shim does."""
    ref, imports = ctx.import_shim(ec.scope)
    edits: tuple[Edit, ...] = (Edit("func", ec.key, (f"{ref}.export",)), *imports)
    return Route(None, pin_edits=edits, via_compat=True, evidence=evidence)


def decide(ctx: Context, ec: ExportCall) -> Route:
    """Where this call should export, and the edits that pin it there."""
    opt = ec.options.get("dynamo")
    if opt is not None:
        value = literal(opt.value)
        return Route(value if isinstance(value, bool) else None, explicit=True)
    if ec.dynamo_maybe_in_kwargs:
        return Route(None, explicit=True)
    if ec.custom_symbolics:
        return _via_compat(ctx, ec)
    if ctx.before_dynamo_keyword():
        return Route(None, old_torch=True)
    pins = [(code, why) for code, why in onx2.pin_reason(ctx, ec) + onx1.pin_reason(ctx, ec)
            if _enabled(ctx, ec, code)]  # a suppressed finding makes no decision either
    opset = literal(ec.options["opset_version"].value) if "opset_version" in ec.options else None
    if isinstance(opset, int) and not isinstance(opset, bool) and opset < DYNAMO_MIN_OPSET:
        why = (f"opset_version={opset} is below {DYNAMO_MIN_OPSET}, the lowest opset the "
               "torch.export exporter builds")
        pins.append(("ONX001", why))
    evidence = ctx.evidence_for(ec.node)
    taken = evidence.get("route_taken") if evidence is not None else None
    failed = set(evidence.get("failed_routes") or ()) if evidence is not None else set()
    only_shim = (evidence.get("shim_only") or shim_only(evidence)) if taken == "dynamo" else None
    if only_shim:  # plain torch cannot do what the shim did here: stay on the shim
        return _via_compat(ctx, ec, {**evidence, "shim_only": only_shim})
    if taken == "dynamo":
        kept = [(code, why) for code, why in onx1.translated_pins(ctx, ec)
                if _enabled(ctx, ec, code)]
        if kept and "legacy" in failed:  # neither plain route keeps what the shim did
            return _via_compat(ctx, ec, evidence)
        route = (Route(False, pins=kept, evidence=evidence, from_ledger=True) if kept
                 else Route(True, evidence=evidence, from_ledger=True))
    elif taken == "legacy":
        route = Route(False, pins=pins, evidence=evidence, from_ledger=True)
    else:
        route = Route(not pins, pins=pins)
        if ("dynamo" if route.dynamo else "legacy") in failed:
            route.blocked = True  # the ledger shows this route failing here: pin nothing
    edits = [Edit("add", ec.key, ("dynamo", str(route.dynamo)))]
    if route.dynamo and route.from_ledger and _converted_down(ec, evidence):
        opt = ec.options["opset_version"]
        edits[:0] = ec.edits_for(opt, Edit("set", ec.key, ("opset_version", str(DYNAMO_MIN_OPSET))))
        route.opset = DYNAMO_MIN_OPSET
    if route.dynamo:  # f given (or maybe given through *args): keep the weights in the file
        has_f = literal(ec.f) is not None if ec.f is not None else ec.star_args
        if has_f and not {"external_data", "use_external_data_format"} & set(ec.options):
            edits.append(Edit("add", ec.key, ("external_data", "False")))
    else:
        edits.append(Edit("comment", ec.key, (_comment(route),)))
    route.pin_edits = tuple(edits)
    return route


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
    if route.via_compat and route.evidence is not None and route.evidence.get("shim_only"):
        note = "; ".join(route.evidence["shim_only"]) + ": export through compat.export"
    elif route.via_compat and route.evidence is not None:
        note = ("the shim translated options plain torch ignores and the TorchScript route failed "
                "here: export through compat.export")
    elif route.via_compat:
        note = "custom symbolics in this file: export through compat.export"
    elif route.from_ledger and route.pins and route.evidence.get("route_taken") == "dynamo":
        note = "dynamo=False: " + "; ".join(r for _, r in route.pins)
    elif route.from_ledger:
        note = f"ledger: exported on the {'torch.export' if route.dynamo else 'TorchScript'} route"
        if route.opset is not None:
            note += f", built at opset {route.opset}: opset_version={route.opset}"
    elif route.dynamo:
        note = "dynamo=True"
    else:
        note = "dynamo=False: " + "; ".join(r for _, r in route.pins)
    ctx.emit("ONX001", ec.node, "safe", route.pin_edits, note=note)
    return route
