"""onnxruntime helpers for the benchmarks: sessions on written files, feeds, eager references.

The benchmarks' own (tests keep theirs): a benchmark reads the files an export wrote, as a user
would, and never reaches into a route's in-memory program.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def session(path: str, threads: int = 1) -> Any:
    """An onnxruntime CPU session on the model file ``path`` (``threads`` intra-op threads: one by
    default, so two sessions timed side by side do not compete for the shared cores)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    opts.intra_op_num_threads = threads
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def feeds(sess: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (torch tensors or arrays) as numpy, only the names the graph takes."""
    import numpy as np

    names = {i.name for i in sess.get_inputs()}
    return {k: (v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v))
            for k, v in values.items() if k in names}


def positional(sess: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    """The tensors of ``args`` as numpy feeds for the graph's inputs, in order."""
    return {i.name: a.detach().cpu().numpy() for i, a in zip(sess.get_inputs(), args)}


def run(sess: Any, values: Mapping[str, Any]) -> list[Any]:
    return sess.run(None, feeds(sess, values))


def eager(model: Any, args: tuple[Any, ...]) -> list[Any]:
    """The model's outputs (flattened, numpy) under ``no_grad``."""
    import torch
    from torch.utils import _pytree

    with torch.no_grad():
        out = model(*args)
    return [t.detach().cpu().numpy() for t in _pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def runs_at(sess: Any, values_list: Iterable[Mapping[str, Any]]) -> bool:
    """True when the model runs at every one of ``values_list``."""
    try:
        for values in values_list:
            run(sess, values)
    except Exception:  # noqa: BLE001 - a model fixed to the example's size fails here
        return False
    return True


def input_dims(path: str, name: str) -> list[Any]:
    """Input ``name``'s dims in the model file: ``str`` for a dim_param, ``int`` for a dim_value."""
    import onnx

    proto = onnx.load(path, load_external_data=False)
    value = next(v for v in proto.graph.input if v.name == name)
    return [d.dim_param if d.HasField("dim_param") else d.dim_value if d.HasField("dim_value") else None
            for d in value.type.tensor_type.shape.dim]
