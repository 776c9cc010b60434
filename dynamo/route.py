"""Run torch's torch.export-based exporter for one ``ExportRequest``."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from compat.errors import CompatError, RouteFailed, RouteUnavailable
from compat.request import ExportRequest, Outcome, Translation

ROUTE = "dynamo"


def export(req: ExportRequest) -> Outcome:
    """Export on the torch.export route; the ONNXProgram is returned unsaved in the Outcome."""
    from compat import torch_api, torch_caps

    if not torch_caps.has_dynamo_exporter():
        raise RouteUnavailable(
            "the torch.export route needs torch>=2.5 with onnxscript installed "
            f"(installed torch {torch_caps.torch_version_str()})"
        )

    from . import options, symbolics

    outcome = Outcome(route=ROUTE)
    start = time.perf_counter()
    plan = options.plan(req)
    outcome.translations.extend(plan.translations)
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(plan.model_mode())
            sym = stack.enter_context(symbolics.export_context(req))
            # the user's own table wins over translations we derive
            table: dict[Any, Any] = {**sym.translation_table, **plan.translation_table}
            table.update(req.custom_translation_table or {})
            # No warnings.catch_warnings here: changing the filters resets every module's
            # once-per-location registry, and compat's own warnings must show once per site.
            program = torch_api.torch_export()(
                req.model,
                plan.args,
                None,
                kwargs=plan.kwargs,
                dynamo=True,
                custom_translation_table=table or None,
                **plan.export_kwargs,
            )
            for fix in (*plan.post_process, *sym.post_process):
                fix(program)
            # symbolics record some translations only while the export runs
            outcome.translations.extend(sym.translations)
    except (RouteFailed, CompatError):
        raise
    except Exception as exc:
        raise RouteFailed(ROUTE, classify(exc), exc) from exc
    outcome.program = program
    outcome.duration_s = time.perf_counter() - start
    return outcome


def classify(exc: BaseException) -> str:
    """A short, stable class of why torch.export failed (ledger reports group by it)."""
    text = f"{type(exc).__name__}: {exc}"
    for needle, reason in (
        ("GuardOnDataDependentSymNode", "data-dependent control flow"),
        ("data-dependent", "data-dependent control flow"),
        ("Dynamic control flow", "data-dependent control flow"),
        ("Constraints violated", "dynamic shape constraints violated"),
        ("No ONNX function found", "operator without ONNX translation"),
        ("ConversionError", "ONNX conversion error"),
        ("Unsupported", "unsupported construct"),
    ):
        if needle in text:
            return reason
    return f"torch.export failed ({type(exc).__name__})"


__all__ = ["Translation", "classify", "export"]
