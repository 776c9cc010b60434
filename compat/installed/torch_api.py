"""torch's own ``torch.onnx`` functions, captured before ``compat.patch()`` replaces them.

Routes call these, never ``torch.onnx.export`` directly: under the patch that name is ours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_ORIGINALS: dict[str, Any] = {}
_MISSING = object()
PATCHED_NAMES = (
    "export", "register_custom_op_symbolic", "unregister_custom_op_symbolic",
    "select_model_mode_for_export", "dynamo_export", "ExportOptions",
)


def capture() -> None:
    """Remember torch's attributes once (idempotent; never captures our replacements)."""
    if _ORIGINALS:
        return
    import torch.onnx

    for name in PATCHED_NAMES:
        _ORIGINALS[name] = getattr(torch.onnx, name, _MISSING)
    utils = getattr(torch.onnx, "utils", None)
    _ORIGINALS["utils.export"] = getattr(utils, "export", _MISSING) if utils else _MISSING
    _ORIGINALS["_export"] = getattr(torch.onnx, "_export", _MISSING)


def original(name: str) -> Any:
    """torch's attribute ``name`` (``utils.export`` for the utils one); None when torch lacks it."""
    capture()
    value = _ORIGINALS.get(name, _MISSING)
    return None if value is _MISSING else value


def originals() -> dict[str, Any]:
    capture()
    return dict(_ORIGINALS)


def is_missing(value: Any) -> bool:
    return value is _MISSING


def torch_export() -> Callable[..., Any]:
    """torch's real ``torch.onnx.export``."""
    fn = original("export")
    if fn is None:
        raise RuntimeError("torch.onnx.export is missing from the installed torch")
    return fn


def torchscript_export() -> Callable[..., Any] | None:
    """The TorchScript exporter's own ``export`` (what ``torch.onnx.export(dynamo=False)`` calls).

    ``torch.onnx.utils`` is that exporter's module, so this is ``torch.onnx.utils.export`` as
    torch shipped it; None when the capability probe finds no TorchScript exporter (or it is
    hidden by ``TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT``).
    """
    from compat.installed import torch_caps

    return original("utils.export") if torch_caps.has_torchscript_exporter() else None
