"""Run torch's TorchScript exporter for one ``ExportRequest``."""

from __future__ import annotations

import io
import math
import os
import re
import shutil
import time
import warnings
from typing import Any

from compat.errors import RouteFailed, RouteUnavailable
from compat.policy.warning_tap import WarningTap
from compat.request import ExportRequest, Outcome
from compat.routing import model_state
from compat.routing.capture import Capture
from compat.routing.copy_on_write import copy_on_write
from compat.routing.steps import Call, Steps, drive

from . import keyword_inputs

ROUTE = "legacy"

#: the categories torch has emitted the tracer's "this value is baked into the trace" warnings
#: as: ``torch.jit.TracerWarning`` so far, a deprecation category for parts of the tracer on
#: their way out (torch 2.14 moved ``torch.jit.trace``'s own notice to FutureWarning)
DEPRECATION_CATEGORIES: tuple[type[Warning], ...] = (DeprecationWarning, FutureWarning)

#: what only the tracer's warnings about a trace say (not its deprecation notices)
_TRACER_TEXT = re.compile(r"trace (might|may|will) |the trace to be incorrect|not generalize|"
                          r"record the data flow|treated as a constant", re.IGNORECASE)


def is_tracer_warning(msg: warnings.WarningMessage) -> bool:
    """A TracerWarning, or a deprecation-category warning saying what a TracerWarning says."""
    import torch

    return issubclass(msg.category, torch.jit.TracerWarning) or bool(
        _TRACER_TEXT.search(str(msg.message)))


def export(req: ExportRequest) -> Outcome:
    """Export to bytes in memory (or, over 2 GB, into a staging folder beside ``f``); compat
    saves the result atomically afterwards."""
    return drive(steps(req))


def steps(req: ExportRequest) -> Steps[Outcome]:
    """``export`` as steps: it yields torch's exporter call (``compat.routing.steps``)."""
    from compat.installed import torch_api, torch_caps

    exporter = torch_api.torchscript_export()
    if exporter is None or not torch_caps.has_torchscript_exporter():
        raise RouteUnavailable(
            f"the TorchScript route is not available: {torch_caps.torchscript_missing_reason()}")
    if req.dynamic_shapes is not None:
        raise RouteFailed(ROUTE, "dynamic_shapes needs the torch.export route")
    import torch

    outcome = Outcome(route=ROUTE)
    start = time.perf_counter()
    staging = staging_path(req)
    target: Any = staging if staging is not None else _BytesSink()
    # what the exporter prints (graph dumps on failure): shown on success, logged on failure
    capture = Capture(enabled=not req.verbose)
    try:
        # No warnings.catch_warnings here: changing the filters resets every module's
        # once-per-location registry, and compat's own warnings must show once per call site.
        categories = (torch.jit.TracerWarning, *DEPRECATION_CATEGORIES)
        # the trace runs the real forward, which may write to the model: put back what it changes
        # (verbose graph dumps show Python stacks, which the copy-on-write mode would add to)
        guard = model_state.values_preserved if req.verbose else copy_on_write
        with guard(req.model), capture, keyword_inputs.by_name(req) as args, \
                WarningTap(categories, accept=is_tracer_warning) as tracer:
            yield Call(exporter, (req.model, args, target), _options(req, torch))
    except Exception as exc:
        if staging is not None:
            shutil.rmtree(os.path.dirname(staging), ignore_errors=True)
        failed = RouteFailed(ROUTE, f"TorchScript export failed ({type(exc).__name__})", exc)
        failed.log = capture.log(exc)
        raise failed from exc
    capture.replay()
    # the trace baked a branch or value in at these lines
    outcome.tracer_warnings = [{"file": w.filename, "line": w.lineno, "message": str(w.message),
                                "category": w.category.__name__} for w in tracer.seen]
    if staging is not None:
        outcome.staged = staging
    else:
        outcome.model_bytes = target.getvalue()
    outcome.duration_s = time.perf_counter() - start
    return outcome


class _BytesSink(io.RawIOBase):
    """Where the exporter writes an in-memory model: keeps the bytes objects it is given (the
    whole model, in one write) instead of copying them into a buffer as ``io.BytesIO`` does."""

    def __init__(self) -> None:
        super().__init__()
        self._chunks: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._chunks.append(data if type(data) is bytes else bytes(data))
        return len(self._chunks[-1])

    def getvalue(self) -> bytes:
        if len(self._chunks) != 1:
            self._chunks = [b"".join(self._chunks)]
        return self._chunks[0]


#: above this many bytes of parameters and buffers the model cannot be one protobuf: the
#: exporter writes external data files itself, which needs a real path
LARGE_MODEL_BYTES = 2**31 - 2**26


def staging_path(req: ExportRequest) -> str | None:
    """For a model too large for one protobuf and a path ``f``: where to let torch write it (a
    staging folder beside ``f``, whose files saving moves into place). None: export to memory."""
    if not isinstance(req.f, (str, os.PathLike)) or _state_bytes(req.model) <= LARGE_MODEL_BYTES:
        return None
    from compat.records.saving import staging_dir

    # the folder of the file f resolves to: saving moves the staged files there (symlinks followed)
    target = os.path.realpath(os.fsdecode(os.fspath(req.f)))  # a link before a ".." followed, as open() does
    folder, name = os.path.split(target)
    return os.path.join(staging_dir(folder), name)


def _state_bytes(model: Any) -> int:
    if not hasattr(model, "parameters"):
        return 0
    snapshot = model_state.open_snapshot(model)  # the tensors it found already: no second walk
    total = snapshot.nbytes()[1] if snapshot is not None else math.inf
    if total != math.inf:
        return int(total)
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


def _options(req: ExportRequest, torch: Any) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "export_params": req.export_params,
        "verbose": bool(req.verbose),
        "training": getattr(torch.onnx.TrainingMode, req.training),
        "input_names": list(req.input_names) if req.input_names else None,
        "output_names": list(req.output_names) if req.output_names else None,
        "operator_export_type": getattr(torch.onnx.OperatorExportTypes, req.operator_export_type),
        "opset_version": req.opset_version,
        "do_constant_folding": req.do_constant_folding,
        "dynamic_axes": dict(req.dynamic_axes) if req.dynamic_axes else None,
        "keep_initializers_as_inputs": req.keep_initializers_as_inputs,
        "custom_opsets": dict(req.custom_opsets) if req.custom_opsets else None,
        "export_modules_as_functions": req.export_modules_as_functions,
        "autograd_inlining": req.autograd_inlining,
    }
    if opts["keep_initializers_as_inputs"] is None:
        del opts["keep_initializers_as_inputs"]
    return opts
