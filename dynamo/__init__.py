"""The torch.export route: torch's new ONNX exporter, with legacy options translated.

Importing this package is cheap; the exporter stack loads inside ``export``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compat.request import ExportRequest, Outcome


def available() -> bool:
    """Whether the installed torch (and onnxscript) provide the torch.export-based exporter."""
    from compat.installed import torch_caps

    return torch_caps.has_dynamo_exporter()


def legacy_only_reasons(req: ExportRequest) -> list[tuple[str, str]]:
    """(code, reason) for each thing in ``req`` only the TorchScript route honours."""
    from .capabilities import legacy_only_reasons as _reasons

    return _reasons(req)


def export(req: ExportRequest) -> Outcome:
    """Export ``req`` with torch's torch.export-based exporter; raises ``RouteFailed``."""
    from .route import export as _export

    return _export(req)
