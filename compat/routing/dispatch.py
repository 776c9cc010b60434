"""Choose the routes for a request, run them in order, save the winner, record the call.

What runs around an export is the caller's to say: ``run`` takes the ledger to append to and the
observers to call, and reads neither from the environment (``compat.api`` resolves them).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compat import catalog
from compat.errors import (
    AcceptanceFailed,
    CompatValueError,
    DraftCaptureDeferred,
    ExportFailed,
    OpsetNotReached,
    RouteFailed,
    RouteUnavailable,
)
from compat.installed import torch_caps
from compat.policy import config, notices, route_noise
from compat.records import attempt_logs, baked, saving
from compat.records import ledger as ledger_file
from compat.request import ExportRequest, Outcome, Translation, shapes_to_axes
from compat.routing import acceptance, model_state, removed_options, route_memory
from compat.routing.route_packages import route_module
from compat.routing.steps import Steps, drive

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # torch colours its export errors
# The TorchScript exporter keeps global state (GLOBALS, symbolic registry): one export at a time.
_LOCK = threading.RLock()

#: Sees each successful export (its request and Outcome, after saving) and returns fields to add
#: to the call's ledger record, or None; must not raise. ``compat run --compare`` registers the
#: parity check as one (``compat.api.add_observer``); ``compare``'s own exports pass none.
Observer = Callable[[ExportRequest, Outcome], "Mapping[str, Any] | None"]


@dataclass
class RoutePlan:
    """The ordered routes to try, and why."""

    requested: str
    source: str
    routes: list[str]
    reason: str | None = None  # why the plan deviates from "dynamo, then legacy"
    translations: list[Translation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # for the ledger: a setting the call overrode
    #: auto's fallback routes left out because the installed torch lacks them: route -> why
    unavailable: dict[str, str] = field(default_factory=dict)


def _requested(req: ExportRequest) -> str | None:
    if req.route is not None:
        return req.route
    if req.dynamo is not None:
        return "dynamo" if req.dynamo else "legacy"
    return None


def _modules(req: ExportRequest, site: notices.CallSite | None) -> tuple[str, ...]:
    cls = type(req.model)
    return (site.module if site else "", f"{cls.__module__}.{cls.__qualname__}")


#: where a route setting the call overrode came from, as the note names it
_SETTING_ORIGINS = {
    "env": f"{config.ENV_ROUTE} (compat run --route sets it)",
    "pyproject": "pyproject.toml [tool.torch-onnx-compat] route",
    "pyproject-rule": "a pyproject.toml [tool.torch-onnx-compat.routes] rule",
}


def override_note(req: ExportRequest, site: notices.CallSite | None = None) -> str | None:
    """``call's dynamo=False overrides route=dynamo from ...`` when the call's own ``dynamo=``
    (or ``route=``) decides against a route set in the environment or the project; else None."""
    chosen = _requested(req)
    if chosen is None:
        return None
    setting, source = config.resolve_route(None, req.call_site, _modules(req, site))
    if source not in _SETTING_ORIGINS or setting == chosen:
        return None
    own = f"route={req.route!r}" if req.route is not None else f"dynamo={req.dynamo}"
    return f"call's {own} overrides route={setting} from {_SETTING_ORIGINS[source]}"


def plan(req: ExportRequest, site: notices.CallSite | None = None) -> RoutePlan:
    """Ordered routes for ``req``; raises ``CompatError`` for a route that cannot be honoured."""
    route_plan = _plan(req, site)
    note = override_note(req, site)
    if note is not None:
        route_plan.notes.append(note)
        notices.route_note(req.call_site, note)
    return route_plan


def _plan(req: ExportRequest, site: notices.CallSite | None) -> RoutePlan:
    requested, source = config.resolve_route(_requested(req), req.call_site, _modules(req, site))
    if requested == "legacy":
        return RoutePlan(requested, source, ["legacy"])
    dynamo, legacy = route_module("dynamo"), route_module("legacy")

    only_legacy = dynamo.legacy_only_reasons(req)
    if requested == "dynamo":
        if only_legacy:
            codes = ", ".join(sorted({c for c, _ in only_legacy}))
            raise CompatValueError(
                f"route='dynamo' cannot honour this call ({codes}): "
                + "; ".join(r for _, r in only_legacy)
                + ". Use route='legacy' or 'auto', or drop the option."
            )
        return RoutePlan(requested, source, ["dynamo"])
    # auto
    if only_legacy:
        reason = "; ".join(r for _, r in only_legacy)
        if not legacy.available():
            codes = ", ".join(sorted({c for c, _ in only_legacy}))
            raise RouteUnavailable(
                f"this call needs the TorchScript exporter ({codes}: {reason}), and "
                f"{_torchscript_missing()}. Drop the option to export on the torch.export route.")
        return RoutePlan(
            requested, source, ["legacy"], reason,
            [Translation(code, code_option(code), f"routed to the TorchScript exporter: {r}")
             for code, r in only_legacy],
        )
    remembered = route_memory.lookup(req)
    if remembered is not None and legacy.available():
        return RoutePlan(requested, source, ["legacy"], f"remembered fallback: {remembered}")
    if not legacy.available():
        return RoutePlan(requested, source, ["dynamo"], unavailable={"legacy": _torchscript_missing()})
    unreachable = _opset_out_of_reach(req, dynamo)
    if unreachable is not None:  # the torch.export route would pay a capture it cannot use:
        # it comes last, only for its model at the lowest opset it reaches should TorchScript fail
        return RoutePlan(requested, source, ["legacy", "dynamo"], f"dynamo: {unreachable}")
    return RoutePlan(requested, source, ["dynamo", "legacy"])


def _opset_out_of_reach(req: ExportRequest, dynamo: Any) -> str | None:
    """Why the torch.export route cannot write the opset asked, from facts known before capture:
    below what the down-conversion writes, or below the opset an earlier auto export of this
    model reached (route memory, any input size or opset asked)."""
    if req.opset_version is None or req.opset_version >= catalog.DYNAMO_MIN_OPSET:
        return None
    static = dynamo.opset_out_of_reach(req)
    if static is not None:
        return static
    reach = route_memory.lookup_reach(req)
    if reach is None or req.opset_version >= reach[0]:
        return None
    reached, why = reach
    blockers = why.partition(": ")[2]
    return (f"opset {req.opset_version} not reachable (remembered: this model's torch.export route "
            f"went no lower than opset {reached}{'; ' + blockers if blockers else ''})")


def _torchscript_missing() -> str:
    return torch_caps.torchscript_missing_reason()


def code_option(code: str) -> str:
    return catalog.get(code).name


def run(
    req: ExportRequest, site: notices.CallSite, *, ledger: str | None,
    observers: Sequence[Observer] = (),
) -> tuple[Outcome, Any]:
    """Warn (or refuse in strict mode), plan, export, save atomically, call the ``observers``,
    append the call's record to ``ledger`` (a path; None: no record); returns the Outcome and
    what ``torch.onnx.export`` returns for the route taken."""
    return drive(run_steps(req, site, ledger=ledger, observers=observers))


def run_steps(
    req: ExportRequest, site: notices.CallSite, *, ledger: str | None,
    observers: Sequence[Observer] = (),
) -> Steps[tuple[Outcome, Any]]:
    """``run`` as steps: it yields the TorchScript exporter's call (``compat.routing.steps``)."""
    ledger_path = ledger_file.check_path(ledger) if ledger else None  # fails before any work
    # a call compat.migrate pinned (its comment says why) is migrated code: quiet, in strict mode too
    usages = [] if notices.pinned_by_migrate(site) else req.usages
    if config.resolve_strict(req.strict, req.call_site):
        notices.raise_strict(usages)
    codes = notices.warn_usages(usages, site)
    codes += [c for c in notices.take_api_codes() if c not in codes]
    start = time.perf_counter()
    route_plan: RoutePlan | None = None
    failures: dict[str, RouteFailed] = {}
    try:
        route_plan = plan(req, site)
        try:
            outcome = yield from _run_routes(req, route_plan, failures)
        except ExportFailed:
            outcome = _lowest_opset_outcome(req, route_plan, failures, site, codes)
            if outcome is None:
                raise
        codes += baked.warn(outcome, site)  # a branch baked at the example's values: ONX003
        outcome.warnings = codes
        outcome.notes[:0] = route_plan.notes
        outcome.duration_s = time.perf_counter() - start
        outcome.output = _save(outcome, req)
    except BaseException as exc:
        logs = attempt_logs.write(failures, ledger_path)
        if isinstance(exc, ExportFailed):
            exc.name_logs(logs)
        if ledger_path:
            ledger_file.append(ledger_path, _record(req, route_plan, None, codes, failures, exc, start, logs))
        raise
    logs = attempt_logs.write(failures, ledger_path)
    observed = [fields for observer in observers if (fields := observer(req, outcome))]
    if ledger_path:
        record = _record(req, route_plan, outcome, codes, failures, None, start, logs)
        for fields in observed:
            for name, value in fields.items():
                record.setdefault(name, value)  # adds fields, never rewrites the call's own
        ledger_file.append(ledger_path, record)
    return outcome, (outcome.program if outcome.route == "dynamo" else None)


def _lowest_opset_outcome(
    req: ExportRequest, route_plan: RoutePlan, failures: dict[str, RouteFailed],
    site: notices.CallSite, codes: list[str],
) -> Outcome | None:
    """Never worse than plain torch: when every route failed and one of them is the torch.export
    route that built the model but could not bring it down to ``opset_version``, its model at the
    lowest opset reached is the result (warned as ONX002). None: nothing to deliver, or strict."""
    below = next((e for e in failures.values() if isinstance(e, OpsetNotReached)
                  and e.program is not None), None)
    if below is None or config.resolve_strict(req.strict, req.call_site):
        return None
    outcome = below.outcome if isinstance(below.outcome, Outcome) else Outcome(route=below.route)
    outcome.program = below.program
    try:
        removed_options.apply(req, outcome)
    except RouteFailed:
        return None
    others = [f"the {_ROUTE_NAMES.get(r, r)} route failed too ({_first_line(e.cause) or e.reason})"
              for r, e in failures.items() if e is not below]
    why = f"{_first_line(below.cause) or below.reason}" + "".join(f"; {o}" for o in others)
    action = (f"{below.wanted}: no route could export at opset {below.wanted}; "
              f"written at opset {below.reached} by the {_ROUTE_NAMES.get(below.route, below.route)} "
              f"route ({why})")
    outcome.translations[:0] = route_plan.translations
    outcome.translations.append(Translation("ONX002", "opset_version", action))
    outcome.fallback_reason = attempt_logs.reasons(failures)
    notices.emit(notices.make_warning("ONX002", f"opset_version={action}", site.filename), site)
    if "ONX002" not in codes:
        codes.append("ONX002")
    return outcome


_ROUTE_NAMES = {"dynamo": "torch.export", "legacy": "TorchScript"}


def _first_line(exc: BaseException | None) -> str:
    text = _ANSI.sub("", str(exc)).strip() if exc is not None else ""
    return text.splitlines()[0][:200] if text else ""


def _save(outcome: Outcome, req: ExportRequest) -> str | None:
    return saving.save(outcome, req)


def _run_routes(req: ExportRequest, route_plan: RoutePlan, failures: dict[str, RouteFailed]) -> Steps[Outcome]:
    # only torch.export marks example inputs
    marks = model_state.inputs_preserved(req.args, req.kwargs) if "dynamo" in route_plan.routes \
        else contextlib.nullcontext()
    routes = list(route_plan.routes)  # a deferred draft capture appends the torch.export route
    with _LOCK, model_state.preserved(req.model, will_train=req.training == "TRAINING"), marks:
        for position, name in enumerate(routes):  # sees what is appended while it runs
            module = route_module(name)
            outcome = None
            # torch's own warnings and log lines of the attempt: dropped on success, logged on failure
            noise = route_noise.Held(enabled=not (req.verbose or config.env_verbose()))
            try:
                route_req, converted = req, None
                if name == "legacy":
                    route_req, converted = shapes_to_axes.for_torchscript(req)
                # the forward may write to the model
                with model_state.route_guard(req.model, name, req.verify), noise, \
                        _draft_timing(req, route_plan, routes[position + 1:], name, failures):
                    outcome = yield from _attempt(module, route_req)
                    if name == "dynamo":
                        acceptance.check(req, outcome)  # a model that differs is a RouteFailed
                if converted is not None:
                    outcome.translations.append(converted)
                removed_options.apply(req, outcome)
            except RouteUnavailable as exc:
                if route_plan.requested != "auto":
                    raise
                failures[name] = RouteFailed(name, "route unavailable", exc)
                continue
            except RouteFailed as exc:
                if outcome is not None:
                    saving.discard(outcome)
                noise.add_to_log(exc)
                failures[name] = exc
                if isinstance(exc, DraftCaptureDeferred):
                    routes.append(name)  # its draft capture, should the routes after it fail
                continue
            if name == "dynamo" and route_plan.requested == "auto" and "legacy" in route_plan.routes \
                    and "legacy" not in failures:
                outcome = yield from _closer_of_both(req, outcome)
            outcome.translations[:0] = route_plan.translations
            deferred = failures.get("dynamo")
            if isinstance(deferred, DraftCaptureDeferred) and deferred.place and not outcome.baked:
                outcome.baked = [deferred.place]  # the tracer baked the branch capture stopped at
            if failures:
                outcome.fallback_reason = attempt_logs.reasons(failures)
                if isinstance(failures.get("dynamo"), AcceptanceFailed):
                    outcome.acceptance = failures["dynamo"].acceptance
                if name == "legacy" and "dynamo" in failures:
                    route_memory.remember(req, failures["dynamo"].reason)
                    if isinstance(failures["dynamo"], OpsetNotReached):
                        route_memory.remember_reach(req, failures["dynamo"].reached,
                                                    failures["dynamo"].reason)
            elif route_plan.reason:
                outcome.fallback_reason = route_plan.reason
            return outcome
    for name, why in route_plan.unavailable.items():  # auto's fallback that could not be tried
        failures[name] = RouteFailed(name, "route unavailable",
                                     RouteUnavailable(f"not tried: {why}"))
    raise ExportFailed(failures)


def _draft_timing(req: ExportRequest, route_plan: RoutePlan, later: list[str], name: str,
                  failures: dict[str, RouteFailed]) -> contextlib.AbstractContextManager[Any]:
    """When the torch.export route's draft capture runs. It waits under auto, below the opset the
    route builds at, for a call with fixed input shapes, when the TorchScript route is still to
    come: there the tracer bakes the example's branch as the draft capture does, into a model of
    the same fixed shapes (with dynamic axes the tracer can bake the example's sizes too: README,
    Data-dependent branches), and the draft capture with its translation, down-conversion and
    acceptance check is the route's costly part. A later attempt of the route starts its draft
    capture from the deferred attempt's failure, which it replaces in ``failures``."""
    if name != "dynamo":
        return contextlib.nullcontext()
    deferred = failures.get(name)
    if isinstance(deferred, DraftCaptureDeferred):
        del failures[name]
        return route_module(name).draft_from(deferred.first)
    if (route_plan.requested == "auto" and "legacy" in later and req.opset_version is not None
            and req.opset_version < catalog.DYNAMO_MIN_OPSET and not req.layout.axes):
        return route_module(name).draft_later(
            f"{catalog.DRAFT_DEFERRED}: at opset {req.opset_version} and fixed input shapes the "
            f"TorchScript route, baking the branch alike, is tried first")
    return contextlib.nullcontext()


def _attempt(module: Any, req: ExportRequest) -> Steps[Outcome]:
    """One route's attempt: its ``steps`` where it has them (the exporter call is yielded), else
    its ``export``."""
    route_steps = getattr(module, "steps", None)
    if route_steps is not None:
        return (yield from route_steps(req))
    return module.export(req)


def _closer_of_both(req: ExportRequest, outcome: Outcome) -> Steps[Outcome]:
    """Never the worse of two models: when the torch.export route's model passed the acceptance
    check but is not close to eager (``acceptance.imprecise``), the TorchScript route exports too
    and the model closer to eager torch at the example input is returned (the other discarded)."""
    diff = acceptance.imprecise(outcome)
    if diff is None:
        return outcome
    legacy = route_module("legacy")
    noise = route_noise.Held(enabled=not (req.verbose or config.env_verbose()))
    try:
        route_req, converted = shapes_to_axes.for_torchscript(req)
        with model_state.route_guard(req.model, "legacy", req.verify), noise:
            other = yield from _attempt(legacy, route_req)
        if converted is not None:
            other.translations.append(converted)
        removed_options.apply(req, other)
    except (RouteFailed, RouteUnavailable):
        return outcome
    theirs = acceptance.example_difference(req, other.model_bytes) if other.model_bytes else None
    if theirs is None or theirs > diff * acceptance.CLEARLY_CLOSER:
        saving.discard(other)
        outcome.notes.append(f"the TorchScript route's model is not closer to eager torch "
                             f"({theirs if theirs is not None else 'not compared'} against {diff:.3g})")
        return outcome
    saving.discard(outcome)
    other.acceptance = outcome.acceptance
    other.fallback_reason = (f"the TorchScript route's model is closer to eager torch: max abs diff "
                             f"{theirs:.3g} at the example input, the torch.export route's {diff:.3g}")
    return other


def _record(
    req: ExportRequest, route_plan: RoutePlan | None, outcome: Outcome | None, codes: list[str],
    failures: dict[str, RouteFailed], error: BaseException | None, start: float,
    logs: dict[str, str] | None = None,
) -> dict[str, Any]:
    fallback = outcome.fallback_reason if outcome else (
        attempt_logs.reasons(failures) or None
    )
    # a model delivered below the requested opset failed "its own" route (_lowest_opset_outcome)
    below = failures.get(outcome.route) if outcome else None
    return {
        "call_site": req.call_site,
        "route_requested": route_plan.requested if route_plan else req.route or "auto",
        "route_taken": outcome.route if outcome else None,
        "fallback_reason": fallback,
        "translations": [t.to_dict() for t in outcome.translations] if outcome else [],
        "warnings": codes,
        "output": outcome.output if outcome else None,
        "duration_s": round(time.perf_counter() - start, 6),
        "torch_version": torch_caps.torch_version_str(),
        "model": type(req.model).__qualname__,
        "status": "ok" if error is None else "failed",
        "error": None if error is None else _ANSI.sub("", f"{type(error).__name__}: {error}"),
        "notes": list(outcome.notes) if outcome else list(route_plan.notes if route_plan else ()),
        "opset_written": below.reached if isinstance(below, OpsetNotReached) else None,
        "attempt_logs": dict(logs or {}),
        "tracer_warnings": list(outcome.tracer_warnings) if outcome else [],
        "acceptance": _acceptance(outcome, failures),
        "baked": list(outcome.baked) if outcome else [],
    }


def _acceptance(outcome: Outcome | None, failures: dict[str, RouteFailed]) -> dict[str, Any] | None:
    """The acceptance check's numbers: the delivered model's, else a failed check's."""
    if outcome is not None and outcome.acceptance is not None:
        return outcome.acceptance
    failed = failures.get("dynamo")
    return failed.acceptance if isinstance(failed, AcceptanceFailed) else None
