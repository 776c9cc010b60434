"""The one lazy boundary of ``compat``: public names whose modules need torch load on first use.

``import compat`` must stay cheap (no torch, onnx or onnxscript), so that ``python -m
compat.migrate`` and ``python -m compat report`` start fast and run where torch is not installed.
``compat/__init__.py`` therefore delegates its module ``__getattr__`` (PEP 562) to :func:`load`,
which imports the owning module from the table below on first access. This module and
``compat.routing.route_packages`` (our ``legacy``/``dynamo`` packages, loaded under a private
name when a user's same-named package would shadow them) are the only places that import the
project's own modules by a string; everything else uses plain imports, so every edge is visible.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> (module of this package, attribute)
PUBLIC: dict[str, tuple[str, str]] = {
    "export": ("api", "export"),
    "last_outcome": ("api", "last_outcome"),
    "compare": ("tools.parity", "compare"),
    "ParityReport": ("tools.parity", "ParityReport"),
    "register_custom_op_symbolic": ("routing.registry", "register_custom_op_symbolic"),
    "unregister_custom_op_symbolic": ("routing.registry", "unregister_custom_op_symbolic"),
    "patch": ("tools.patching", "patch"),
    "ExportRequest": ("request", "ExportRequest"),
    "Outcome": ("request", "Outcome"),
    "convert_opset": ("tools.convert_opset", "convert_opset"),
    "name_dims": ("tools.name_dims", "name_dims"),
}
#: modules that need the runtime extra (torch, onnx, ...): a missing extra is named before import
NEEDS_RUNTIME = frozenset({"api", "tools.parity", "routing.registry", "tools.patching"})

#: ``compat`` in a checkout, ``torch_onnx_compat`` installed from the wheel
_PACKAGE = __name__.rpartition(".")[0]


def load(name: str) -> Any:
    """The public attribute ``name`` (AttributeError, as for any module, when there is none)."""
    try:
        module, attr = PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module {_PACKAGE!r} has no attribute {name!r}") from None
    if module in NEEDS_RUNTIME:
        from compat.installed.runtime_extra import require_runtime

        require_runtime(f"{_PACKAGE}.{name}")
    return getattr(importlib.import_module(f"{_PACKAGE}.{module}"), attr)
