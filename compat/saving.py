"""Atomic save of a route's result to ``f``: a temp folder beside the target, then os.replace.

A failed save leaves any previous file at ``f`` untouched and no temp file behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from .request import ExportRequest, Outcome

PROTOBUF_LIMIT = 2**31 - 1  # a single ModelProto cannot be larger than 2 GB


def save(outcome: Outcome, req: ExportRequest) -> str | None:
    """Write the exported model to ``req.f``; returns a description of where it went."""
    f = req.f
    if f is None:
        return None
    if not isinstance(f, (str, os.PathLike)):
        f.write(_as_bytes(outcome, req))
        return f"<{type(f).__name__}>"
    target = os.path.abspath(os.fsdecode(os.fspath(f)))
    folder, name = os.path.split(target)
    tmp = tempfile.mkdtemp(prefix=".compat-export-", dir=folder)
    try:
        staged = os.path.join(tmp, name)
        written = _write(outcome, req, staged)
        # data files first, so the .onnx never points at data that is not there yet
        for path in sorted(written, key=lambda p: p == staged):
            os.replace(path, os.path.join(folder, os.path.relpath(path, tmp)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _external(outcome: Outcome, req: ExportRequest) -> bool:
    if req.external_data is not None:
        return req.external_data
    return _size_estimate(outcome) > PROTOBUF_LIMIT


def _size_estimate(outcome: Outcome) -> int:
    if outcome.model_bytes is not None:
        return len(outcome.model_bytes)
    try:
        inits = outcome.program.model.graph.initializers.values()
        return sum(v.const_value.nbytes for v in inits if v.const_value is not None)
    except AttributeError:
        return 0


def _as_bytes(outcome: Outcome, req: ExportRequest) -> bytes:
    if outcome.model_bytes is not None:
        return outcome.model_bytes
    return outcome.program.model_proto.SerializeToString()


def _write(outcome: Outcome, req: ExportRequest, staged: str) -> list[str]:
    """Write into the staging folder; returns every file written."""
    external = _external(outcome, req)
    if outcome.program is not None:
        # export_params / keep_initializers_as_inputs are already applied to the program's model
        outcome.program.save(staged, external_data=external)
    elif external:
        import onnx

        proto = onnx.load_from_string(outcome.model_bytes)
        onnx.save_model(
            proto, staged, save_as_external_data=True, all_tensors_to_one_file=True,
            location=os.path.basename(staged) + ".data", size_threshold=0,
        )
    else:
        with open(staged, "wb") as fh:
            fh.write(outcome.model_bytes)
    folder = os.path.dirname(staged)
    return [os.path.join(folder, n) for n in os.listdir(folder)]


def describe(outcome: Outcome) -> dict[str, Any]:
    return {"route": outcome.route, "output": outcome.output}
