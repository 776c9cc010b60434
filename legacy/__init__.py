"""The TorchScript route: torch's deprecated exporter, with removed torch 1.x options emulated.

Importing this package is cheap and never imports onnx, onnxscript or the torch.export exporter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compat.routing.route_packages import lazy_export

if TYPE_CHECKING:
    from .route import export as export
    from .route import steps as steps


def available() -> bool:
    """Whether the installed torch still ships the TorchScript-based exporter."""
    from compat.installed import torch_caps

    return torch_caps.has_torchscript_exporter()


#: ``export`` (export a request with torch's TorchScript exporter; raises ``RouteFailed``) and
#: ``steps`` (the same, yielding the exporter call: ``compat.routing.steps``) are ``route``'s
#: own, imported on first use
__getattr__ = lazy_export(__name__)
