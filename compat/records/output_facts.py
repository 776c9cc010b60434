"""What ``verify-migration`` needs from a ledger record to compare two runs' models later.

``output_files``: the written model and its ``<f>.data`` (path, size, sha256), so a file
overwritten since the run is recognised; ``output_snapshot``: a copy of the model when the call
wrote no file (``f=None``: an ``ONNXProgram`` returned, saved later or never), kept beside the
ledger in ``<ledger>.models/``; ``example_inputs``: shape and dtype of every tensor the call was
given (args then kwargs, flattened), the sizes the models are run at. Added by ``compat run
--ledger`` (an observer on the shim's exports) and by ``run --observe``'s pass-through.
``unnamed_outputs`` (the shim's exports only): the names the exporter gave the graph outputs
``output_names`` left unnamed, which the rewriter writes into the migrated call's
``output_names`` (torch names such an output after a graph node, and another capture of the
same model may number its nodes otherwise). Imports torch only through the tensors it is given;
onnx only to read a TorchScript-route model's output names.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping
from typing import Any

FIELDS = ("output_files", "output_snapshot", "example_inputs", "unnamed_outputs")
_snapshot_lock = threading.Lock()


def file_fingerprint(path: str) -> dict[str, Any]:
    """``{path, size, sha256}`` of a file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return {"path": os.path.abspath(path), "size": size, "sha256": digest.hexdigest()}


def fingerprint(model_path: str) -> dict[str, Any]:
    """The model file's fingerprint and its external data file's (``<f>.data``, the name both
    routes and plain torch give it), if there is one."""
    out: dict[str, Any] = {"model": file_fingerprint(model_path), "data": []}
    data = model_path + ".data"
    if os.path.isfile(data):
        out["data"].append(file_fingerprint(data))
    return out


def changed_since(recorded: Mapping[str, Any]) -> list[str]:
    """The files of a recorded ``output_files`` that are gone or differ now (empty: unchanged)."""
    changed = []
    entries = [recorded.get("model"), *(recorded.get("data") or [])]
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str):
            continue
        path = entry["path"]
        try:
            now = file_fingerprint(path)
        except OSError:
            changed.append(f"{path} (gone)")
            continue
        if now["sha256"] != entry.get("sha256"):
            changed.append(path)
    return changed


def example_inputs(args: Any, kwargs: Mapping[str, Any] | None) -> list[dict[str, Any] | None]:
    """``{shape, dtype}`` per tensor leaf of ``(args, kwargs)`` in flattening order (None for
    a leaf that is not a tensor)."""
    import torch

    from compat.installed import torch_internals

    try:
        leaves = torch_internals.tree_leaves((args, dict(kwargs or {})))
    except Exception:  # noqa: BLE001 - an unflattenable input: no shapes, verify says so
        return []
    return [{"shape": [int(d) for d in x.shape], "dtype": str(x.dtype).removeprefix("torch.")}
            if isinstance(x, torch.Tensor) else None for x in leaves]


def snapshot(program: Any, ledger: str) -> str | None:
    """Save ``program`` (an ``ONNXProgram``) to a new file in ``<ledger>.models/``; None if it
    cannot be saved."""
    folder = ledger + ".models"
    try:
        os.makedirs(folder, exist_ok=True)
        with _snapshot_lock:
            n = len(os.listdir(folder))
            while os.path.exists(path := os.path.join(folder, f"{os.getpid()}-{n}.onnx")):
                n += 1
            open(path, "xb").close()  # claim the name
        program.save(path)
    except Exception:  # noqa: BLE001 - a snapshot is an extra: the export itself succeeded
        return None
    return path


def facts(output: str | None, args: Any, kwargs: Mapping[str, Any] | None, program: Any = None,
          ledger: str | None = None) -> dict[str, Any]:
    """The record fields (``FIELDS``) for a call that wrote ``output`` (or returned ``program``)."""
    fields: dict[str, Any] = {"example_inputs": example_inputs(args, kwargs)}
    path = output
    if (path is None or not os.path.isfile(path)) and program is not None and ledger:
        path = fields["output_snapshot"] = snapshot(program, ledger)
    if path is not None and os.path.isfile(path):
        try:
            fields["output_files"] = fingerprint(path)
        except OSError:
            pass
    return fields


def graph_output_names(path: str | None, program: Any = None) -> list[str] | None:
    """The graph output names of the model at ``path`` (else of ``program``, an
    ``ONNXProgram``); None when neither can be read."""
    try:
        if path is not None and os.path.isfile(path):
            import onnx

            return [o.name for o in onnx.load(path, load_external_data=False).graph.output]
        return [str(v.name) for v in program.model.graph.outputs]
    except Exception:  # noqa: BLE001 - an extra: the export itself succeeded
        return None


def shim_observer(req: Any, outcome: Any) -> dict[str, Any] | None:
    """``compat.api.add_observer`` hook: the facts of a successful shim export (``compat run
    --ledger``)."""
    from compat.policy import config

    ledger = config.env_ledger()
    if not ledger:
        return None
    fields = facts(outcome.output, req.args, req.kwargs, outcome.program, ledger)
    names = graph_output_names(fields.get("output_snapshot") or outcome.output, outcome.program)
    given = len(req.output_names or ())
    if names and given and len(names) > given:  # only where the call named some outputs
        fields["unnamed_outputs"] = names[given:]
    return fields
