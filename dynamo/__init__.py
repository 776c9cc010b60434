"""The torch.export route: torch's new ONNX exporter, with legacy options translated.

Importing this package is cheap; the exporter stack loads inside ``export``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from compat.routing.route_packages import lazy_export

if TYPE_CHECKING:
    from compat.request import ExportRequest

    from .route import export as export


def available() -> bool:
    """Whether the installed torch (and onnxscript) provide the torch.export-based exporter."""
    from compat.installed import torch_caps

    return torch_caps.has_dynamo_exporter()


def legacy_only_reasons(req: ExportRequest) -> list[tuple[str, str]]:
    """(code, reason) for each thing in ``req`` only the TorchScript route honours."""
    from .capabilities import legacy_only_reasons as _reasons

    return _reasons(req)


def opset_out_of_reach(req: ExportRequest) -> str | None:
    """Why this route cannot write ``req``'s opset, known before any capture (it builds at
    ``DYNAMO_MIN_OPSET``; compat's down-conversion writes no lower than ``downconvert.LOWEST``);
    None when it may. For auto routing: ``route="dynamo"`` still exports and delivers the lowest
    opset it reaches."""
    from compat.catalog import DYNAMO_MIN_OPSET

    opset = req.opset_version

    if opset is None or opset >= DYNAMO_MIN_OPSET:
        return None
    from .downconvert.base import LOWEST  # onnx_ir: loaded only for an opset the route converts to

    if opset >= LOWEST:
        return None
    return (f"opset {opset} not reachable: compat's down-conversion writes opset {LOWEST} and up "
            f"(decided before capture)")


#: ``export`` (export a request with torch's torch.export-based exporter; raises ``RouteFailed``)
#: is ``route.export`` itself, imported on first use
__getattr__ = lazy_export(__name__)


def draft_later(why: str) -> contextlib.AbstractContextManager[None]:
    """While the block runs, an export that needs the draft capture (a data-dependent guard)
    raises ``DraftCaptureDeferred`` instead (for auto: another route is tried first)."""
    from .capture import draft_later as _later

    return _later(why)


def draft_from(first: BaseException) -> contextlib.AbstractContextManager[None]:
    """While the block runs, an export starts with the draft capture: torch.export's capture
    failed with ``first`` (a ``DraftCaptureDeferred``'s) on an earlier attempt."""
    from .capture import draft_from as _from

    return _from(first)


@contextlib.contextmanager
def output_pytrees(model: Any) -> Iterator[None]:
    """While the block runs, the containers the route flattens into graph inputs and outputs
    (transformers' Cache objects) are pytree nodes, so an eager result flattens like the graph's
    outputs (the acceptance check's reference)."""
    from .hf_caches import deregister, register

    classes = register(model)
    try:
        yield
    finally:
        deregister(classes)
