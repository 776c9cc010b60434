"""Side-by-side test helpers for the two routes: export, describe, run (was ``dynamo/parity.py``).

Test support, not part of the distribution: ``tests/conftest.py`` puts this folder on
``sys.path`` (``import route_parity as parity``). The shim's own parity check is
``compat.compare`` (``compat/tools/parity.py``). Imports onnx/onnxruntime on use.
"""

from __future__ import annotations

import io
import time
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch


def legacy_proto(model: Any, args: tuple[Any, ...], **options: Any) -> Any:
    """``torch.onnx.export(..., dynamo=False)`` (what the compat legacy route wraps) as a ModelProto."""
    import onnx

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, buf, dynamo=False, **options)
    return onnx.load_from_string(buf.getvalue())


def compat_proto(model: Any, args: tuple[Any, ...], folder: Any, route: str = "dynamo",
                 **options: Any) -> tuple[Any, dict[str, Any]]:
    """``compat.export`` to ``folder/m.onnx`` with its own ledger → (ModelProto, ledger record)."""
    import json
    import os
    from pathlib import Path

    import onnx

    import compat

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ledger = folder / "ledger.jsonl"
    saved = os.environ.get("TORCH_ONNX_COMPAT_LEDGER")
    os.environ["TORCH_ONNX_COMPAT_LEDGER"] = str(ledger)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compat.export(model, args, str(folder / "m.onnx"), route=route, **options)
    finally:
        if saved is None:
            del os.environ["TORCH_ONNX_COMPAT_LEDGER"]
        else:
            os.environ["TORCH_ONNX_COMPAT_LEDGER"] = saved
    (record,) = [json.loads(line) for line in ledger.read_text().splitlines()]
    return onnx.load(str(folder / "m.onnx")), record


def dynamo_proto(req: Any) -> tuple[Any, Any]:
    """``dynamo.export(req)`` → (ModelProto, Outcome)."""
    from compat.routing.route_packages import route_module

    dynamo = route_module("dynamo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = dynamo.export(req)
    return outcome.program.model_proto, outcome


def dims(value_info: Any) -> list[Any]:
    """A value's dims: ``str`` for a dim_param, ``int`` for a dim_value, None when unknown."""
    out: list[Any] = []
    for d in value_info.type.tensor_type.shape.dim:
        out.append(d.dim_param if d.HasField("dim_param") else d.dim_value if d.HasField("dim_value") else None)
    return out


def describe(proto: Any) -> dict[str, Any]:
    """Graph inputs/outputs (name → dims), initializer names, and opset imports of a ModelProto."""
    inits = {i.name for i in proto.graph.initializer}
    return {
        "inputs": {v.name: dims(v) for v in proto.graph.input if v.name not in inits},
        "all_inputs": [v.name for v in proto.graph.input],
        "outputs": {v.name: dims(v) for v in proto.graph.output},
        "initializers": sorted(inits),
        "opsets": {o.domain or "": o.version for o in proto.opset_import},
    }


def session(proto: Any, quiet: bool = False) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4 if quiet else 3
    return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def run(proto_or_session: Any, feeds: Mapping[str, Any]) -> list[np.ndarray]:
    """Run with numpy/torch feeds (names not in the graph are dropped)."""
    sess = proto_or_session if hasattr(proto_or_session, "run") else session(proto_or_session)
    names = {i.name for i in sess.get_inputs()}
    arrays = {k: (v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v)) for k, v in feeds.items() if k in names}
    return sess.run(None, arrays)


def eager(model: torch.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None = None, train: bool = False) -> list[np.ndarray]:
    """Eager outputs (flattened), in train or eval mode; the model's mode and buffers are restored."""
    flags = [(m, m.training) for m in model.modules()]
    saved = [(b, b.detach().clone()) for b in model.buffers()]
    try:
        model.train(train)
        with torch.no_grad():
            out = model(*args, **(kwargs or {}))
    finally:
        for m, f in flags:
            m.training = f
        with torch.no_grad():
            for b, c in saved:
                b.copy_(c)
    leaves = out if isinstance(out, (tuple, list)) else (out,)
    return [t.detach().numpy() for t in leaves]


def latency(proto: Any, feeds: Mapping[str, Any], repeat: int = 30, warmup: int = 3) -> float:
    """Median onnxruntime latency in seconds."""
    sess = session(proto)
    for _ in range(warmup):
        run(sess, feeds)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(sess, feeds)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def runs_at(proto: Any, feeds_list: Iterable[Mapping[str, Any]]) -> bool:
    """Whether onnxruntime accepts every feed set (other sizes along the dynamic axes)."""
    sess = session(proto, quiet=True)
    try:
        for feeds in feeds_list:
            run(sess, feeds)
    except Exception:  # noqa: BLE001 - any runtime rejection means "does not run"
        return False
    return True
