"""An exported model's outputs against eager torch: tolerances per dtype, difference numbers, the
verdict at one set of inputs, and an onnxruntime session to get the outputs from.

Shared by ``compat.compare`` (``compat.tools.parity``) and the torch.export route's acceptance
check (``compat.routing.acceptance``). Imports numpy, torch and onnxruntime on use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: (rtol, atol) per eager output dtype; |onnx - eager| <= atol + rtol * |eager|
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
    "complex64": (1e-4, 1e-4),
}


@dataclass
class Check:
    """One model at one probe: ``match``, ``mismatch`` or ``error`` (onnxruntime failed).

    ``outputs`` has one entry per output compared with eager torch: index, shape, size and the
    ``max_abs``/``max_rel`` difference (see ``diff_stats``)."""

    probe: str
    status: str
    max_abs_diff: float | None = None
    detail: str = ""
    max_rel_diff: float | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    #: per output index, what is wrong with it (``detail`` joins them)
    problems: dict[int, str] = field(default_factory=dict)


NOISE = re.compile(r"\x1b\[[0-9;]*m|/onnxruntime_src/\S+ \S+\([^)]*\)\s*")


def clean(text: str) -> str:
    """``text`` on one line without terminal colours or onnxruntime's source locations; full length."""
    return " ".join(NOISE.sub("", text).split())


def session(model: str | bytes, optimize: bool = True) -> Any:
    """A quiet single-threaded CPU onnxruntime session of a model file path or serialized bytes;
    ``optimize=False``: basic graph optimizations only (built quicker, for a few runs)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if not optimize:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    opts.log_severity_level = 4  # failures are reported, not logged
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def to_numpy(t: Any) -> Any:
    """A detached CPU copy of tensor ``t`` as numpy (bfloat16 as float32)."""
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.float().numpy()
    if t.is_conj():
        t = t.resolve_conj()
    return t.numpy()


def eager_outputs(result: Any) -> list[Any]:
    """The tensor leaves of a forward's ``result``, detached on the CPU (what the graph outputs)."""
    import torch

    from compat.installed import torch_internals

    return [t.detach().cpu() for t in torch_internals.tree_leaves(result) if isinstance(t, torch.Tensor)]


def diff_stats(got: Any, ref: Any) -> dict[str, Any]:
    """``max_abs``: the largest ``|got - ref|``; ``max_rel``: the largest ``|got - ref| / |ref|``
    over the elements where ``ref`` is non-zero (None when there is none). NaN against NaN is no
    difference; ``nan_mismatches`` counts elements where only one side is NaN. Arrays of the
    same shape; booleans count as 0/1."""
    import numpy as np

    g, r = np.asarray(got), np.asarray(ref)
    if g.size == 0:
        return {"max_abs": 0.0, "max_rel": None}
    if not (np.issubdtype(g.dtype, np.number) or g.dtype == np.bool_):
        differ = float(np.count_nonzero(g != r) > 0)
        return {"max_abs": differ, "max_rel": None}
    g64, r64 = g.astype(np.float64), r.astype(np.float64)
    g_nan, r_nan = np.isnan(g64), np.isnan(r64)
    with np.errstate(invalid="ignore"):
        diff = np.where((g_nan & r_nan) | (g64 == r64), 0.0, np.abs(g64 - r64))  # inf == inf
    one_nan = g_nan != r_nan
    diff = np.where(one_nan | np.isnan(diff), 0.0, diff)
    nonzero = (np.abs(r64) > 0) & ~r_nan
    stats: dict[str, Any] = {
        "max_abs": float(diff.max()),
        "max_rel": float((diff[nonzero] / np.abs(r64[nonzero])).max()) if nonzero.any() else None,
    }
    if one_nan.any():
        stats["nan_mismatches"] = int(np.count_nonzero(one_nan))
    return stats


def compare_outputs(got: Sequence[Any], expected: Sequence[Any], probe: str,
                    tol: Mapping[str, tuple[float, float]]) -> Check:
    """Outputs ``got`` (numpy arrays) against eager torch's ``expected`` (tensors) at one probe:
    count, shapes, and every value within the tolerance of its eager dtype (integers and booleans
    exactly)."""
    import numpy as np

    check = Check(probe, "match", 0.0)
    problems: list[str] = []
    if len(got) != len(expected):
        problems.append(f"{len(got)} outputs, eager torch gives {len(expected)}")
    rels: list[float] = []
    for k, (g, e) in enumerate(zip(got, expected)):
        e_np = to_numpy(e)
        entry: dict[str, Any] = {"output": k, "shape": list(e_np.shape), "size": int(e_np.size)}
        check.outputs.append(entry)
        if tuple(g.shape) != tuple(e_np.shape):
            entry["onnx_shape"] = list(g.shape)
            check.problems[k] = f"output {k} has shape {list(g.shape)}, eager torch {list(e_np.shape)}"
            continue
        stats = diff_stats(g, e_np)
        entry.update(stats)
        check.max_abs_diff = max(check.max_abs_diff or 0.0, stats["max_abs"])
        if stats["max_rel"] is not None:
            rels.append(stats["max_rel"])
        if e_np.size == 0:
            continue
        if e_np.dtype == np.bool_ or not np.issubdtype(e_np.dtype, np.number):
            bad = int(np.count_nonzero(g != e_np))
            if bad:
                check.problems[k] = f"output {k}: {bad} of {e_np.size} values differ"
            continue
        rtol, atol = tol.get(str(e.dtype).replace("torch.", ""), (0.0, 0.0))
        g64, e64 = g.astype(np.float64), e_np.astype(np.float64)
        both_nan = np.isnan(g64) & np.isnan(e64)
        with np.errstate(invalid="ignore"):
            within = both_nan | (g64 == e64) | (np.abs(g64 - e64) <= atol + rtol * np.abs(e64))
        if not within.all():
            rel = "-" if stats["max_rel"] is None else f"{stats['max_rel']:.3g}"
            nan = f", {stats['nan_mismatches']} NaN only on one side" if stats.get("nan_mismatches") else ""
            check.problems[k] = (
                f"output {k} (shape {list(e_np.shape)}): max abs diff {stats['max_abs']:.3g}, max rel diff "
                f"{rel}{nan}; {int(np.count_nonzero(~within))} of {e_np.size} values beyond "
                f"rtol={rtol:g}, atol={atol:g}")
    check.max_rel_diff = max(rels) if rels else None
    problems += list(check.problems.values())
    if problems:
        check.status, check.detail = "mismatch", "; ".join(problems)
    return check
