"""What only the TorchScript exporter honours, decided from the request alone.

Read by the dispatcher (auto routing sends such a call to the TorchScript route), by the
torch.export route (which refuses it) and by ``normalize`` (an ``ExportedProgram`` can take
neither route then). The decision per option value is the catalog's ``needs_torchscript``, the
one the rewriter's ``dynamo=False`` pins use too. Imports torch only to recognise scripted models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compat import catalog_facts as facts

if TYPE_CHECKING:
    from compat.request import ExportRequest


def legacy_only_reasons(req: ExportRequest) -> list[tuple[str, str]]:
    """(code, reason) pairs; empty when the torch.export route can give the call its meaning."""
    reasons: list[tuple[str, str]] = []
    for option in facts.IGNORED_BY_TORCH_EXPORT:
        reason = facts.needs_torchscript(option, getattr(req, option))
        if reason is not None:
            reasons.append((facts.OPTION_CODES[option], reason))
    if _is_script(req.model):
        reasons.append(("ONX001", facts.SCRIPT_MODEL_REASON))
    return reasons


def _is_script(model: object) -> bool:
    import torch

    return isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction))
