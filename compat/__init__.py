"""torch-onnx-compat: run old ``torch.onnx.export`` code on current PyTorch, and migrate it.

Importing ``compat`` is cheap: torch and the exporters load on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import CompatError, ExportFailed, LegacyExportWarning

__version__ = "0.1.0"

_LAZY = {
    "export": ("compat.api", "export"),
    "last_outcome": ("compat.api", "last_outcome"),
    "compare": ("compat.parity", "compare"),
    "ParityReport": ("compat.parity", "ParityReport"),
    "register_custom_op_symbolic": ("compat.registry", "register_custom_op_symbolic"),
    "unregister_custom_op_symbolic": ("compat.registry", "unregister_custom_op_symbolic"),
    "patch": ("compat.patching", "patch"),
    "ExportRequest": ("compat.request", "ExportRequest"),
    "Outcome": ("compat.request", "Outcome"),
}

__all__ = ["CompatError", "ExportFailed", "LegacyExportWarning", "__version__"] + list(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'compat' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
