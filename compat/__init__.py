"""torch-onnx-compat: run old ``torch.onnx.export`` code on current PyTorch, and migrate it.

Importing ``compat`` is cheap: torch and the exporters load on first use (PEP 562). Installed
from the wheel, this package is ``torch_onnx_compat`` (``import torch_onnx_compat as compat``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import CompatError, ExportFailed, LegacyExportWarning

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from .api import export as export
    from .api import last_outcome as last_outcome
    from .parity import ParityReport as ParityReport
    from .parity import compare as compare
    from .patching import patch as patch
    from .registry import (
        register_custom_op_symbolic as register_custom_op_symbolic,
    )
    from .registry import (
        unregister_custom_op_symbolic as unregister_custom_op_symbolic,
    )
    from .request import ExportRequest as ExportRequest
    from .request import Outcome as Outcome

__version__ = "0.1.0"

#: name -> (submodule, attribute); these need the runtime extra (torch, onnx, ...)
_LAZY = {
    "export": ("api", "export"),
    "last_outcome": ("api", "last_outcome"),
    "compare": ("parity", "compare"),
    "ParityReport": ("parity", "ParityReport"),
    "register_custom_op_symbolic": ("registry", "register_custom_op_symbolic"),
    "unregister_custom_op_symbolic": ("registry", "unregister_custom_op_symbolic"),
    "patch": ("patching", "patch"),
    "ExportRequest": ("request", "ExportRequest"),
    "Outcome": ("request", "Outcome"),
}
_NEEDS_RUNTIME = {"api", "parity", "registry", "patching"}

__all__ = ["CompatError", "ExportFailed", "LegacyExportWarning", "__version__"] + list(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    if module in _NEEDS_RUNTIME:
        from ._runtime import require_runtime

        require_runtime(f"{__name__}.{name}")
    value = getattr(importlib.import_module(f".{module}", __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
