"""Run torch's torch.export-based exporter for one ``ExportRequest``."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from typing import Any

from compat.errors import CompatError, OpsetNotReached, RouteFailed, RouteUnavailable
from compat.request import ExportRequest, Outcome, Translation
from compat.routing.capture import Capture

from .translation_fit import matches_every_node

ROUTE = "dynamo"


def export(req: ExportRequest) -> Outcome:
    """Export on the torch.export route; the ONNXProgram is returned unsaved in the Outcome."""
    from compat.installed import torch_api, torch_caps

    if not torch_caps.has_dynamo_exporter():
        raise RouteUnavailable(
            f"the torch.export route needs torch>={torch_caps.MIN_TORCH} with onnxscript installed "
            f"(installed torch {torch_caps.torch_version_str()})"
        )

    from . import hf_caches, options, quiet, symbolics, validate
    from .capture import export_program

    if torch_caps.fake_cuda_guard_dies_with_its_thread():  # before any FakeTensorMode (plan's probes)
        from .torch_internals import keep_fake_cuda_guard

        keep_fake_cuda_guard()

    outcome = Outcome(route=ROUTE)
    start = time.perf_counter()
    plan = options.plan(req)
    outcome.translations.extend(plan.translations)
    # what torch prints while it tries: replayed on success, kept for the ledger's log on failure
    capture = Capture(enabled=not req.verbose)
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(capture)
            stack.enter_context(plan.model_mode())
            for context in plan.contexts:
                stack.enter_context(context())
            stack.enter_context(hf_caches.cache_pytrees(req.model, plan))  # transformers-5 Cache objects
            sym = stack.enter_context(symbolics.export_context(req))
            # the user's own table wins over translations we derive
            table: dict[Any, Any] = {op: matches_every_node(fn) for op, fn in
                                     {**sym.translation_table, **plan.translation_table}.items()}
            # ... applied as given on every torch (a list: torch 2.9-2.10 choose by signature)
            table.update({op: fn if isinstance(fn, (list, tuple)) else matches_every_node(fn)
                          for op, fn in (req.custom_translation_table or {}).items()})
            # No warnings.catch_warnings here: changing the filters resets every module's
            # once-per-location registry, and compat's own warnings must show once per site.
            # torch's capture, then (data-dependent guards) a draft capture baking the example's branch
            model = plan.model if plan.model is not None else req.model
            captured = without_autograd_on_failure(
                lambda: export_program(
                    torch_api.torch_export(), model, plan.args, plan.kwargs,
                    {"custom_translation_table": table or None, **plan.export_kwargs}, classify,
                    quiet=lambda: Capture(enabled=not req.verbose),
                ), model, outcome.translations)
            program, outcome.baked = captured.program, captured.baked
            planned = len(plan.translations)
            not_reached = _post_process(program, (*plan.post_process, *sym.post_process))
            outcome.translations.extend(plan.translations[planned:])  # recorded by post-processing
            outcome.input_leaves = plan.interface.input_leaves if plan.interface else None
            validate.check(program)  # strict shape/type inference: an invalid model is a RouteFailed
            # symbolics record some translations only while the export runs
            outcome.translations.extend(sym.translations)
            if not_reached is not None:
                # the model at the lowest opset reached, fully post-processed and checked: the
                # dispatcher delivers it when no route can honour the opset
                not_reached.program = program
                not_reached.outcome = outcome
                outcome.program = program
                raise not_reached
    except RouteFailed as exc:
        exc.log = capture.log(exc)
        raise
    except CompatError:
        capture.replay()
        raise
    except Exception as exc:
        failed = RouteFailed(ROUTE, with_operator(classify(exc), exc), exc)
        failed.where = quiet.describe_block(failed.reason, exc)
        failed.log = capture.log(exc)
        raise failed from exc
    capture.replay()
    outcome.program = program
    outcome.duration_s = time.perf_counter() - start
    return outcome


#: the ledger's translation when the capture ran without autograd (compat.catalog.SHIM_ONLY_TRANSLATIONS)
NO_GRAD_ACTION = ("captured under torch.no_grad(): torch's ONNX decomposition failed with autograd on "
                  "(docs/upstream/beit-sdpa-mask-view.md)")


def without_autograd_on_failure(export: Callable[[], Any], model: Any, translations: list[Translation]) -> Any:
    """``export()``; when torch's ONNX conversion fails on a model with parameters that require
    grad, ``export()`` again under ``torch.no_grad()`` (recorded in ``translations``).

    With autograd on, an op's output strides can follow whether an input requires grad (CPU
    scaled_dot_product_attention with a mask derived from a parameter, timm's BEiT), and torch's
    decomposition then re-executes a ``view`` on the other layout ("Cannot view a tensor"). An
    ONNX graph computes no gradients, so capturing without autograd gives the same model; plain
    torch does not retry, so the ledger says the shim did. The first failure is raised when the
    retry fails too."""
    import torch

    try:
        return export()
    except Exception as exc:
        if (classify(exc) != "ONNX conversion error" or not torch.is_grad_enabled()
                or not isinstance(model, torch.nn.Module)
                or not any(p.requires_grad for p in model.parameters())):
            raise
        first = exc
    try:
        with torch.no_grad():
            result = export()
    except Exception as exc:  # noqa: BLE001 - the first failure is the one to report
        first.add_note(f"captured under torch.no_grad() too, which failed: {type(exc).__name__}")
        raise first from None
    translations.append(Translation("ONX001", "model", NO_GRAD_ACTION))
    return result


def _post_process(program: Any, fixes: tuple[Any, ...]) -> OpsetNotReached | None:
    """Run every fix on ``program``; an ``OpsetNotReached`` is held until the others have run."""
    not_reached: OpsetNotReached | None = None
    for fix in fixes:
        try:
            fix(program)
        except OpsetNotReached as exc:
            not_reached = exc
    return not_reached


def classify(exc: BaseException) -> str:
    """A short, stable class of why torch.export failed (ledger reports group by it)."""
    text = f"{type(exc).__name__}: {exc}"
    from .rnn_decompositions import NO_LOOP_REASON

    gap = re.search(NO_LOOP_REASON, text)
    if gap:  # a torch bug the shim refused by name: the reason names it
        return f"torch bug: {gap.group(0)}"
    for needle, reason in (
        ("GuardOnDataDependentSymNode", "data-dependent control flow"),
        ("data-dependent", "data-dependent control flow"),
        ("Dynamic control flow", "data-dependent control flow"),
        ("Constraints violated", "dynamic shape constraints violated"),
        ("No ONNX function found", "operator without ONNX translation"),
        ("ConversionError", "ONNX conversion error"),
        ("PassError", "ONNX graph pass error"),
        ("Unsupported", "unsupported construct"),
    ):
        if needle in text:
            return reason
    # torch's "Exception summary" names the root cause (<class 'NotImplementedError'>: ...)
    summary = re.search(r"<class '(?:[\w.]*\.)?(\w+)'>:", text)
    return f"torch.export failed ({summary.group(1) if summary else type(exc).__name__})"


#: reason classes whose failure sits on one operator (the ledger's reason names it)
_OPERATOR_REASONS = ("ONNX conversion error", "ONNX graph pass error", "operator without ONNX translation")


def with_operator(reason: str, exc: BaseException) -> str:
    """``reason`` with the operator it failed on, for conversion, translation and graph-pass
    failures: ``ONNX conversion error in aten.view.default``."""
    from . import quiet

    if reason not in _OPERATOR_REASONS:
        return reason
    op = quiet.failing_operator(exc)
    return f"{reason} in {op}" if op else reason


__all__ = ["Translation", "classify", "export", "with_operator"]
