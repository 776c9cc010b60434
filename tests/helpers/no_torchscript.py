"""The suite on a torch without the TorchScript exporter (``make test-no-torchscript``).

``TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT=1`` makes the capability probe report no TorchScript exporter.
Then:

- a test marked ``needs_torchscript`` is skipped with the probe's reason before it runs;
- torch's own TorchScript export entry is wrapped: a test (or a script it runs in-process) that
  calls it, as ``torch.onnx.export(..., dynamo=False)`` for a comparison, is skipped with that
  reason at the call; project code that reaches it without asking the probe fails the test, so
  nothing passes by using the hidden exporter;
- a test that fails with the probe's reason in its failure (``RouteUnavailable`` from
  ``route='legacy'``, an ``ExportFailed`` whose TorchScript attempt was unavailable, a script's
  output saying so) is reported as skipped with that reason and the failure's first line: it
  needed the exporter. Any other failure stays a failure.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

MARKER = "needs_torchscript"
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_ENTRY_MODULE = "torch.onnx._internal.torchscript_exporter.utils"
_PROJECT = tuple(os.path.join(os.path.dirname(_TESTS.rstrip(os.sep)), name) + os.sep
                 for name in ("compat", "legacy", "dynamo", "migration"))
_BYPASS = "without asking the capability probe"


def missing_reason() -> str | None:
    """Why the TorchScript exporter is unavailable here; None when it is available."""
    from compat.installed import torch_caps

    if torch_caps.has_torchscript_exporter():
        return None
    return torch_caps.torchscript_missing_reason()


#: tests that need the exporter but whose failure cannot say so (a subprocess killed on purpose,
#: a verdict comparing both routes): node id, or its start up to ``[`` for parametrized ones
#: (every parameter, or those starting with the text after it) -> why. Marked
#: ``needs_torchscript`` at collection, here rather than in the files, where a new test should
#: carry the marker itself.
NEEDS_TORCHSCRIPT: dict[str, str] = {
    "tests/migration/test_ledger_moves.py::test_records_name_the_call_site_relative_to_the_project_root":
        "its ledger records a fallback to the TorchScript exporter",
    "tests/migration/test_ledger_moves.py::test_copied_tree_gets_the_ledgers_decisions[":
        "its ledger records a fallback to the TorchScript exporter",
    "tests/reliability/test_kill.py::test_kill_during_save_leaves_old_or_new_never_a_mix[legacy-":
        "kills a TorchScript-route export while it saves",
    "tests/reliability/test_saving_names.py::test_a_kill_at_every_step_leaves_a_complete_pair[legacy-":
        "kills a TorchScript-route export while it saves",
    "tests/reliability/test_ledger_and_cache.py::test_auto_export_with_a_fifo_in_the_cache_falls_back_and_remembers":
        "auto's fallback to the TorchScript route",
    "tests/symbolics/test_third_party_symbolics.py::test_invalid_model_is_a_route_failure_and_auto_falls_back":
        "auto's fallback to the TorchScript route",
    "tests/symbolics/test_registered_ops.py::test_registration_below_torchs_own_symbolic_applies_on_neither_route":
        "torch's built-in TorchScript symbolics decide which registration applies",
    "tests/symbolics/test_torch_versions.py::test_registration_dispatch_does_not_depend_on_an_earlier_torchscript_export":
        "torch's built-in TorchScript symbolics decide which registration applies",
    "tests/symbolics/test_registry.py::test_register_forwards_to_torch_and_unregister_removes":
        "torch's TorchScript symbolic registry",
    "tests/symbolics/test_registry.py::test_registrations_made_directly_with_torch_are_found":
        "torch's TorchScript symbolic registry",
    "tests/symbolics/test_torch_internals.py::test_private_internals_are_where_we_expect":
        "checks where the exporter's private pieces are",
    **{f"tests/scale/{test}": "compares the TorchScript route's model with the torch.export route's" for test in (
        "test_compare.py::test_routes_that_agree_are_equivalent",
        "test_compare.py::test_transformer_differs_at_other_sequence_length",
        "test_compare.py::test_compare_restores_mode_and_serialises",
        "test_compare.py::test_one_route_only",
        "test_compare.py::test_tolerances_are_parameters",
        "test_compare.py::test_dynamic_shapes_probes_with_integer_inputs",
        "test_compare.py::test_generated_names_alone_are_not_a_difference",
        "test_compare.py::test_dynamic_shapes_are_probed_on_both_routes",
        "test_compare_hook.py::test_hook_summary_and_table",
        "test_compare_hook.py::test_observer_gives_the_parity_field_only_in_compare_mode",
        "test_compare_hook.py::test_run_compare_records_verdict",
        "test_compare_numbers.py::test_agreeing_routes_give_numbers_near_zero",
        "test_compare_numbers.py::test_numeric_difference_is_differs_with_the_real_numbers",
        "test_compare_numbers.py::test_dim_labels_only_are_a_note_not_differs",
        "test_compare_numbers.py::test_the_record_says_what_compare_cost_and_the_table_where_the_full_text_is",
    )},
}


def _listed_reason(nodeid: str) -> str | None:
    return next((why for start, why in NEEDS_TORCHSCRIPT.items()
                 if nodeid == start or ("[" in start and nodeid.startswith(start))), None)


def skip_marked(items: list[pytest.Item]) -> None:
    """Skip, with the probe's reason, the tests marked ``needs_torchscript`` (or listed in
    ``NEEDS_TORCHSCRIPT``) when it says no."""
    for item in items:
        why = _listed_reason(item.nodeid)
        if why is not None:
            item.add_marker(pytest.mark.needs_torchscript(reason=why))
    marked = [item for item in items if item.get_closest_marker(MARKER) is not None]
    if not marked:
        return
    reason = missing_reason()
    if reason is None:
        return
    for item in marked:
        why = item.get_closest_marker(MARKER).kwargs.get("reason")
        item.add_marker(pytest.mark.skip(reason=f"needs the TorchScript exporter{f' ({why})' if why else ''}: {reason}"))


def guard_torch_entry() -> None:
    """In hidden mode, wrap torch's TorchScript ``export`` (what ``torch.onnx.export(dynamo=False)``
    and ``torch.onnx.utils.export`` call) so no caller gets the hidden exporter."""
    from compat.installed import torch_caps

    if not torch_caps.torchscript_hidden():
        return
    import importlib


    module = importlib.import_module(_ENTRY_MODULE)
    original = module.export
    if getattr(original, "_hidden_by_tests", False):
        return
    guarded = _guarded(original, torch_caps.torchscript_missing_reason())
    module.export = guarded
    utils = sys.modules.get("torch.onnx.utils") or importlib.import_module("torch.onnx.utils")
    if getattr(utils, "export", None) is original:
        utils.export = guarded


def _guarded(original: Callable[..., Any], reason: str) -> Callable[..., Any]:
    def export(*args: Any, **kwargs: Any) -> Any:
        caller = _first_caller_outside_torch()
        if caller.startswith(_PROJECT):
            raise AssertionError(
                f"{caller} called torch's TorchScript exporter {_BYPASS} "
                f"(compat.installed.torch_caps.has_torchscript_exporter): {reason}")
        pytest.skip(f"calls torch's TorchScript exporter directly ({caller}): {reason}")

    export._hidden_by_tests = True  # type: ignore[attr-defined]
    return export


def _first_caller_outside_torch() -> str:
    import torch

    torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    frame = sys._getframe(2)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(torch_dir) and path != os.path.abspath(__file__):
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def failure_to_skip(item: pytest.Item, report: pytest.TestReport) -> None:
    """In hidden mode, a failure that says the TorchScript exporter is hidden becomes a skip
    with that reason (the test needed it); a bypass of the probe stays a failure."""
    from compat.installed import torch_caps

    if not (report.failed and torch_caps.torchscript_hidden()):
        return
    reason = torch_caps.torchscript_missing_reason()
    text = report.longreprtext
    # the variable, not the whole reason: pytest shortens long strings in assertion messages
    if f"{torch_caps.ENV_HIDE_TORCHSCRIPT}=1" not in text or _BYPASS in text:
        return
    first = next((line.strip() for line in text.splitlines() if line.startswith("E ")), "")[1:].strip()
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0,
                       f"needs the TorchScript exporter (failed with: {first[:160]}): {reason}")
