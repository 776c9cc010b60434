"""The TorchScript route: torch's deprecated exporter, with removed torch 1.x options emulated.

Importing this package is cheap and never imports onnx, onnxscript or the torch.export exporter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compat.request import ExportRequest, Outcome


def available() -> bool:
    """Whether the installed torch still ships the TorchScript-based exporter."""
    from compat.installed import torch_caps

    return torch_caps.has_torchscript_exporter()


def export(req: ExportRequest) -> Outcome:
    """Export ``req`` with torch's TorchScript exporter; raises ``RouteFailed``."""
    from .route import export as _export

    return _export(req)
