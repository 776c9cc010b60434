"""The TorchScript route: torch's deprecated exporter, with removed torch 1.x options emulated.

Importing this package is cheap and never imports onnx, onnxscript or the torch.export exporter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .route import export as export


def available() -> bool:
    """Whether the installed torch still ships the TorchScript-based exporter."""
    from compat.installed import torch_caps

    return torch_caps.has_torchscript_exporter()


def __getattr__(name: str) -> Any:
    """``export``: ``route.export`` itself (export a request with torch's TorchScript exporter;
    raises ``RouteFailed``), imported on first use so that importing the package stays cheap.
    Not a wrapper: torch's tracer records the whole Python stack at each traced operation, so
    every frame between the caller and the exporter costs."""
    if name == "export":
        from .route import export

        globals()["export"] = export
        return export
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
