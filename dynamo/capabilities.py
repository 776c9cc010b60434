"""What the torch.export route cannot honour, so that auto routing sends the call elsewhere.

Decided from the request alone, before any export; kept free of onnx/onnxscript imports (the
TorchScript route must not pay for them).
"""

from __future__ import annotations

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
