"""torch-onnx-compat: run old ``torch.onnx.export`` code on current PyTorch, and migrate it.

Importing ``compat`` is cheap: torch and the exporters load on first use (PEP 562, through
``compat._lazy``). Installed from the wheel, this package is ``torch_onnx_compat`` (``import
torch_onnx_compat as compat``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from compat import _lazy
from compat.errors import CompatError, ExportFailed, LegacyExportWarning, OpsetNotConvertible

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from compat.api import export as export
    from compat.api import last_outcome as last_outcome
    from compat.request import ExportRequest as ExportRequest
    from compat.request import Outcome as Outcome
    from compat.routing.registry import register_custom_op_symbolic as register_custom_op_symbolic
    from compat.routing.registry import (
        unregister_custom_op_symbolic as unregister_custom_op_symbolic,
    )
    from compat.tools.convert_opset import convert_opset as convert_opset
    from compat.tools.name_dims import name_dims as name_dims
    from compat.tools.parity import ParityReport as ParityReport
    from compat.tools.parity import compare as compare
    from compat.tools.patching import patch as patch

__version__ = "0.1.0"

__all__ = ["CompatError", "ExportFailed", "LegacyExportWarning", "OpsetNotConvertible", "__version__"] + list(
    _lazy.PUBLIC)


def __getattr__(name: str) -> Any:
    value = _lazy.load(name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
