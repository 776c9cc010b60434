"""torch-onnx-compat: run old ``torch.onnx.export`` code on current PyTorch, and migrate it.

Importing ``compat`` is cheap: torch and the exporters load on first use (PEP 562). Installed
from the wheel, this package is ``torch_onnx_compat`` (``import torch_onnx_compat as compat``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from compat.errors import CompatError, ExportFailed, LegacyExportWarning

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from compat.api import export as export
    from compat.api import last_outcome as last_outcome
    from compat.request import ExportRequest as ExportRequest
    from compat.request import Outcome as Outcome
    from compat.routing.registry import register_custom_op_symbolic as register_custom_op_symbolic
    from compat.routing.registry import (
        unregister_custom_op_symbolic as unregister_custom_op_symbolic,
    )
    from compat.tools.parity import ParityReport as ParityReport
    from compat.tools.parity import compare as compare
    from compat.tools.patching import patch as patch

__version__ = "0.1.0"

#: name -> (submodule, attribute); these need the runtime extra (torch, onnx, ...)
_LAZY = {
    "export": ("api", "export"),
    "last_outcome": ("api", "last_outcome"),
    "compare": ("tools.parity", "compare"),
    "ParityReport": ("tools.parity", "ParityReport"),
    "register_custom_op_symbolic": ("routing.registry", "register_custom_op_symbolic"),
    "unregister_custom_op_symbolic": ("routing.registry", "unregister_custom_op_symbolic"),
    "patch": ("tools.patching", "patch"),
    "ExportRequest": ("request", "ExportRequest"),
    "Outcome": ("request", "Outcome"),
}
_NEEDS_RUNTIME = {"api", "tools.parity", "routing.registry", "tools.patching"}

__all__ = ["CompatError", "ExportFailed", "LegacyExportWarning", "__version__"] + list(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    if module in _NEEDS_RUNTIME:
        from compat.installed.runtime_extra import require_runtime

        require_runtime(f"{__name__}.{name}")
    value = getattr(importlib.import_module(f".{module}", __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
