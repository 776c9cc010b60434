"""Atomic save of a route's result to ``f``: stage beside the target, then ``os.replace``.

A failed save leaves any previous file at ``f`` untouched and no temp file behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator

from .request import ExportRequest, Outcome

PROTOBUF_LIMIT = 2**31 - 1  # a single ModelProto cannot be larger than 2 GB


def save(outcome: Outcome, req: ExportRequest) -> str | None:
    """Write the exported model to ``req.f``; returns where it went."""
    f = req.f
    if f is None:
        return None
    if not isinstance(f, (str, os.PathLike)):
        f.write(_as_bytes(outcome))
        return f"<{type(f).__name__}>"
    target = os.path.abspath(os.fsdecode(os.fspath(f)))
    if outcome.staged is not None:
        _move_staged(outcome.staged, target)
        return target
    external = _external(outcome, req)
    if outcome.model_bytes is not None and not external:
        _replace_with_bytes(target, outcome.model_bytes)
    else:
        _replace_with_files(target, outcome, external)
    return target


def _replace_with_bytes(target: str, data: bytes) -> None:
    """One self-contained file: a temp file in the same folder, then one ``os.replace``."""
    folder, name = os.path.split(target)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    # O_EXCL: never write through a file or link someone else left at that name; mode 0o666
    # lets the umask decide, as a plain open() of the target would
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _replace_with_files(target: str, outcome: Outcome, external: bool) -> None:
    """A model plus its data file: both staged in a temp folder under their final names (the
    .onnx refers to the data file by name), then moved, data first."""
    folder, name = os.path.split(target)
    with _staging(folder) as tmp:
        staged = os.path.join(tmp, name)
        if outcome.program is not None:
            # export_params / keep_initializers_as_inputs are already applied to the program
            outcome.program.save(staged, external_data=external)
        else:
            import onnx

            onnx.save_model(
                onnx.load_from_string(outcome.model_bytes), staged, save_as_external_data=True,
                all_tensors_to_one_file=True, location=name + ".data", size_threshold=0,
            )
        written = sorted(os.listdir(tmp), key=lambda n: n == name)
        for n in written:
            os.replace(os.path.join(tmp, n), os.path.join(folder, n))


def _move_staged(staged: str, target: str) -> None:
    """Files a route wrote into a staging folder beside the target: data first, then the model."""
    tmp, name = os.path.split(staged)
    try:
        for n in sorted(os.listdir(tmp), key=lambda n: n == name):
            dest = target if n == name else os.path.join(os.path.dirname(target), n)
            os.replace(os.path.join(tmp, n), dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def discard(outcome: Outcome) -> None:
    """Remove what an outcome staged on disk (its export was rejected after the route ran)."""
    if outcome.staged is not None:
        shutil.rmtree(os.path.dirname(outcome.staged), ignore_errors=True)
        outcome.staged = None


@contextlib.contextmanager
def _staging(folder: str) -> Iterator[str]:
    tmp = tempfile.mkdtemp(prefix=".compat-export-", dir=folder)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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


def _as_bytes(outcome: Outcome) -> bytes:
    if outcome.staged is not None:
        with open(outcome.staged, "rb") as fh:
            return fh.read()
    if outcome.model_bytes is not None:
        return outcome.model_bytes
    return outcome.program.model_proto.SerializeToString()
