"""Parity and failure reasons for ``bench_architectures``: an exported file against eager torch in
onnxruntime, outputs paired by position with the eager output's flattened leaves.

Tolerances per dtype (``TOLERANCE``: rtol, and atol scaled by the reference's largest magnitude,
at least 1, as random-weight nets can have large activations); integers and bools must be equal.
Detection outputs (boxes/scores/labels of each image) are compared as sets: each eager detection
is matched by one exported detection of the same label with close box and score (the order of
near-equal scores may differ), and at least ``DETECTIONS_MATCHED`` of them must be.
"""

from __future__ import annotations

import re
import traceback
from typing import Any

import numpy as np

#: the share of an image's detections that must match (the larger count of the two is the whole): with
#: random weights, float differences between onnxruntime's kernels and torch's can swap a proposal at
#: an NMS or top-k near-tie, and the swap cascades to a detection or two; a wrong export misses most
DETECTIONS_MATCHED = 0.95
#: dtype name -> (rtol, atol before scaling)
TOLERANCE = {"float64": (1e-6, 1e-8), "float32": (1e-3, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: the libraries whose source lines name a failure's place
_LIBRARIES = ("torchvision", "timm", "piper")


def leaves(value: Any) -> list[tuple[str, Any]]:
    """(key path, numpy array) of every tensor in ``value``, in pytree order (the exporters'
    output order)."""
    import torch
    from torch.utils import _pytree

    flat, _ = _pytree.tree_flatten_with_path(value)
    return [(_pytree.keystr(path), t.detach().cpu().numpy()) for path, t in flat if isinstance(t, torch.Tensor)]


def close(ref: np.ndarray, got: np.ndarray) -> tuple[bool, str]:
    """Whether ``got`` equals ``ref`` within its dtype's tolerance; else what differs."""
    if tuple(ref.shape) != tuple(got.shape):
        return False, f"shape {list(got.shape)} != eager {list(ref.shape)}"
    if ref.dtype.kind in "fc":
        rtol, atol = TOLERANCE.get(str(ref.dtype), TOLERANCE["float32"])
        scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
        if ref.size and not np.allclose(got.astype(ref.dtype), ref, rtol=rtol, atol=atol * scale, equal_nan=True):
            diff = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max())
            return False, f"max abs diff {diff:.3g} (atol {atol * scale:.3g}, rtol {rtol:g})"
        return True, ""
    if not np.array_equal(got.astype(ref.dtype), ref):
        return False, f"{int((got.astype(ref.dtype) != ref).sum())} of {ref.size} values differ"
    return True, ""


def compare(ref: list[tuple[str, np.ndarray]], got: list[np.ndarray], detection: bool) -> tuple[bool, str]:
    """Every output of ``got`` against ``ref``; ``detection`` compares each image's
    boxes/scores/labels as a set."""
    if len(got) != len(ref):
        return False, f"{len(got)} outputs, eager has {len(ref)}"
    if detection:
        return _compare_detections(ref, got)
    for (key, r), g in zip(ref, got):
        ok, why = close(r, np.asarray(g))
        if not ok:
            return False, f"output {key}: {why}"
    return True, ""


def _compare_detections(ref: list[tuple[str, np.ndarray]], got: list[np.ndarray]) -> tuple[bool, str]:
    images: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for (key, r), g in zip(ref, got):
        image, _, field = key.rpartition("[")
        images.setdefault(image, {})[field.strip("]'\"")] = (r, np.asarray(g))
    notes = []
    for image, fields in images.items():
        if not {"boxes", "scores", "labels"} <= set(fields):
            return False, f"image {image or 0}: outputs {sorted(fields)}, not boxes/scores/labels"
        (rb, gb), (rs, gs), (rl, gl) = fields["boxes"], fields["scores"], fields["labels"]
        if gb.ndim != 2 or len(gb) != len(gs) or len(gb) != len(gl):
            return False, f"boxes {list(gb.shape)}, scores {list(gs.shape)}, labels {list(gl.shape)}"
        matched = _matched(rb, rs, rl, gb, gs, gl)
        total = max(len(rb), len(gb))
        notes.append(f"{matched}/{len(rb)} eager detections matched" + (f" ({len(gb)} exported)"
                                                                          if len(gb) != len(rb) else ""))
        if total and matched < DETECTIONS_MATCHED * total:
            return False, notes[-1]
    return True, "; ".join(notes)


def _matched(rb: np.ndarray, rs: np.ndarray, rl: np.ndarray, gb: np.ndarray, gs: np.ndarray,
             gl: np.ndarray) -> int:
    """How many eager detections (highest score first) find an unused exported one of the same
    label with a close score and box."""
    if not len(rb) or not len(gb):
        return 0
    box_atol = 1e-3 * max(1.0, float(np.abs(rb).max()))
    free = np.ones(len(gb), dtype=bool)
    count = 0
    for i in np.argsort(-rs, kind="stable"):
        hits = free & (gl == rl[i]) & (np.abs(gs - rs[i]) <= 1e-3 + 1e-3 * abs(rs[i])) \
            & np.all(np.abs(gb - rb[i]) <= box_atol + 1e-3 * np.abs(rb[i]), axis=1)
        if hits.any():
            free[int(np.argmax(hits))] = False
            count += 1
    return count


def reason(exc: BaseException) -> str:
    """One line: the exception's class and first meaningful line, and the source place that
    blocked the export when known (a compat route failure's ``where``, or the deepest frame of a
    model library in the traceback or the message)."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:  # compat.ExportFailed: one reason per route tried
        return "; ".join(f"{route}: {_route_reason(err)}" for route, err in failures.items())
    if hasattr(exc, "route") and hasattr(exc, "reason"):
        return _route_reason(exc)
    return _plain_reason(exc)


def _route_reason(err: BaseException) -> str:
    """A compat route failure: its reason class, the cause's first line, and the place (the
    library path from the traceback, with the source text the shim quoted in ``where``)."""
    cause = getattr(err, "cause", None)
    text = f"{err.reason}"  # type: ignore[attr-defined]
    if cause is not None:
        text += f" ({_first_line(cause)})"
    where = getattr(err, "where", None) or ""
    source = re.search(r"`[^`]+`", where)
    place = (_place(cause) if cause is not None else None) or where.split(" ")[0] or None
    return text + (f" at {place}" if place else "") + (f" {source.group(0)}" if source else "")


def _plain_reason(exc: BaseException) -> str:
    place = _place(exc)
    return f"{_first_line(exc)}" + (f" at {place}" if place else "")


_WRAPPED = re.compile(r"^<class '(?:[\w.]+\.)?(\w+)'>: ")
_NOISE = re.compile(r"\s+\((unhinted|Size-like symbols)[^)]*\)?.*$")


def _first_line(exc: BaseException) -> str:
    """``Class: first meaningful line`` (torch's wrapped ``<class 'X'>: ...`` unwrapped to X, the
    symbolic-shape noise cut), at most 160 characters."""
    text = _ANSI.sub("", str(exc)).strip()
    summary = text.partition("## Exception summary")[2].strip()  # torch's real cause in its reports
    lines = [line.strip() for line in (summary or text).splitlines() if line.strip()]
    line = next((ln for ln in lines if not ln.startswith(("#", "[", "Traceback", "File "))), lines[0] if lines else "")
    name = type(exc).__name__
    wrapped = _WRAPPED.match(line)
    if wrapped:
        name, line = wrapped.group(1), line[wrapped.end():]
    line = _NOISE.sub("", line)
    return f"{name}: {line[:160]}"


_FILE_LINE = re.compile(r"File \"?([^\s\",]+\.py)\"?, line (\d+)")


def _place(exc: BaseException) -> str | None:
    """``library/path.py:line`` of the deepest model-library frame, from the message (torch names
    the user code there) or the traceback (the chain included)."""
    candidates: list[tuple[str, str]] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        candidates += _FILE_LINE.findall(_ANSI.sub("", str(exc)))
        candidates += [(f.filename, str(f.lineno)) for f in traceback.extract_tb(exc.__traceback__)]
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    for path, line in reversed(candidates):
        short = _library_path(path)
        if short:
            return f"{short}:{line}"
    return None


def _library_path(path: str) -> str | None:
    """``path`` from its model library's folder on (``torchvision/ops/boxes.py``), or None for
    torch's, the shim's and other files."""
    path = path.replace("\\", "/")
    if path.endswith("/_arch_zoo.py"):
        return "benchmarks/_arch_zoo.py"
    rest = path.rpartition("-packages/")[2] if "-packages/" in path else ""
    return rest if rest.partition("/")[0] in _LIBRARIES else None
