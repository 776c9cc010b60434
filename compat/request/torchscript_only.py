"""What only the TorchScript exporter honours, decided from the request alone.

Read by the dispatcher (auto routing sends such a call to the TorchScript route), by the
torch.export route (which refuses it) and by ``normalize`` (an ``ExportedProgram`` can take
neither route then). Imports torch only to recognise scripted models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compat.request import ExportRequest


def legacy_only_reasons(req: ExportRequest) -> list[tuple[str, str]]:
    """(code, reason) pairs; empty when the torch.export route can give the call its meaning."""
    reasons: list[tuple[str, str]] = []
    if req.operator_export_type != "ONNX":
        reasons.append((
            "ONX103",
            (f"operator_export_type={req.operator_export_type} is honoured only by the TorchScript "
             "exporter"),
        ))
    if req.export_modules_as_functions:
        reasons.append(("ONX106", "export_modules_as_functions is honoured only by the TorchScript exporter"))
    if not req.autograd_inlining:
        reasons.append(("ONX107", "autograd_inlining=False is honoured only by the TorchScript exporter"))
    if _is_script(req.model):
        reasons.append(("ONX001", "ScriptModule/ScriptFunction models export only on the TorchScript route"))
    return reasons


def _is_script(model: object) -> bool:
    import torch

    return isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction))
