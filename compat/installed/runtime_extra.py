"""The shim's runtime needs (the ``runtime`` extra): a clear error when they are missing."""

from __future__ import annotations

import importlib.util
import warnings

from compat.errors import RuntimeExtraMissing, UntestedTorchWarning

#: what an export needs; onnxruntime is only needed by parity checks, which import it themselves
RUNTIME_MODULES = ("torch", "onnx", "onnxscript")
#: torch-onnx-compat is not on a package index: the extra is installed from a clone
EXTRA_HINT = (
    "install the runtime extra from your clone of torch-onnx-compat: pip install '.[runtime]' "
    "in the clone (pip install -e '.[runtime]' to work on it); install torch's CPU build first, "
    "as torch's own instructions say, to avoid the CUDA download"
)

_checked = False


def _installed(name: str) -> bool:
    # find_spec, not import: the exporters' heavy modules load only when a route needs them
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def require_runtime(feature: str) -> None:
    """Raise RuntimeExtraMissing naming ``feature`` and the missing modules, before any work."""
    global _checked
    if _checked:
        return
    missing = [name for name in RUNTIME_MODULES if not _installed(name)]
    if missing:
        raise RuntimeExtraMissing(f"{feature} needs {', '.join(missing)}, not installed: {EXTRA_HINT}")
    _checked = True
    warn_if_untested_torch()


def warn_if_untested_torch() -> bool:
    """Warn (once per process) when the installed torch is outside the tested range."""
    from compat.installed import torch_caps

    reason = torch_caps.untested_torch()
    if reason is not None:
        warnings.warn(reason, UntestedTorchWarning, stacklevel=3)
    return reason is not None
