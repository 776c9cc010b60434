"""Replay one case with each contender and judge what it wrote, the way a legacy user's code uses
the model: the graph interface the TorchScript exporter gave that call, and onnxruntime against
eager torch at the example and at the case's other inputs.

Contenders (each export gets a fresh model, fresh inputs, a fresh temp folder and, for compat, a
private route memory folder):

* ``torch_default``: ``torch.onnx.export(model, args, f, **kwargs)`` as the script wrote it, on
  plain torch (torch 2.9+: the torch.export exporter; a keyword it no longer takes fails the call);
* ``torchscript``: the same call with ``dynamo=False`` (the TorchScript exporter);
* ``compat_auto``: ``compat.export(model, args, f, **kwargs)``;
* ``compat_dynamo``: ``compat.export(..., route="dynamo")``.

The legacy interface is the TorchScript exporter's model for the same call: its graph inputs and
outputs (order, count, element types, ranks, and the names the call declared in
``input_names``/``output_names``; generated names are compared by position only) and whether
initializers are listed as inputs. When that export fails, the interface expected from the call
stands in: every flattened input (Python ints as int64, floats as double), named by
``input_names``, and eager's outputs. A contender passes when it exports, has that interface, and
onnxruntime matches eager (shape, dtype, ``allclose`` with the case's tolerances) everywhere.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .case import Case, clone_tree, flat_leaves, seeded, split_kwargs

CONTENDERS = ("torch_default", "torchscript", "compat_auto", "compat_dynamo")
TITLES = {
    "torch_default": "torch default",
    "torchscript": "TorchScript",
    "compat_auto": "compat auto",
    "compat_dynamo": "compat dynamo",
}
REFERENCE = "torchscript"
#: settings that would change what compat does for every case: the harness clears them
_COMPAT_ENV = ("TORCH_ONNX_COMPAT_ROUTE", "TORCH_ONNX_COMPAT_STRICT", "TORCH_ONNX_COMPAT_LEDGER",
               "TORCH_ONNX_COMPAT_COMPARE")


class CaseError(Exception):
    """The case itself is broken (eager fails, inputs cannot be mapped): no contender is judged."""


# --- the call -----------------------------------------------------------------------------------

def call_names(case: Case) -> tuple[list[str], list[str]]:
    """``input_names`` and ``output_names`` of the call, keyword or positional (both positional
    layouts of torch 1.x-2.4 put them 4th and 5th after ``f``)."""
    ins, outs = case.kwargs.get("input_names"), case.kwargs.get("output_names")
    if ins is None and len(case.positional) > 3:
        ins = case.positional[3]
    if outs is None and len(case.positional) > 4:
        outs = case.positional[4]
    return list(ins or []), list(outs or [])


def eager_mode(case: Case, model: Any) -> bool:
    """Whether eager runs in train mode for the call: ``training=TRAINING`` (or ``True``, 1.x),
    ``PRESERVE`` keeps the model's mode, anything else is eval (the legacy default)."""
    import torch

    mode = case.kwargs.get("training", case.positional[2] if len(case.positional) > 2 else None)
    if mode is True or mode == torch.onnx.TrainingMode.TRAINING:
        return True
    if mode == torch.onnx.TrainingMode.PRESERVE:
        return bool(model.training)
    return False


def eager_outputs(case: Case, values: tuple[Any, ...]) -> list[Any]:
    """The fresh model's outputs (tensors, flattened, numpy) for ``values`` in the call's mode."""
    import torch

    model = seeded(case, case.model)
    model.train(eager_mode(case, model))
    args, kwargs = split_kwargs(clone_tree(values))
    with torch.no_grad():
        out = model(*args, **kwargs)
    return [t.detach().cpu().numpy() for t in flat_leaves(out) if isinstance(t, torch.Tensor)]


@contextlib.contextmanager
def _own_settings(folder: str) -> Iterator[None]:
    """No route/strict/ledger settings of the caller's environment, route memory in ``folder``,
    warnings and torch's chatter off (a worker also points fds 1/2 at its log)."""
    from _timing import cache_dir, quiet

    saved = {k: os.environ.pop(k) for k in _COMPAT_ENV if k in os.environ}
    try:
        with cache_dir(folder), quiet():
            yield
    finally:
        os.environ.update(saved)


def export_with(contender: str, case: Case, folder: str) -> dict[str, Any]:
    """One contender's export of the case into ``folder``: ``{"path"}`` or ``{"error"}``, with
    the route compat took."""
    import torch

    model = seeded(case, case.model)
    args = seeded(case, case.args)
    kwargs = copy.deepcopy(case.kwargs)
    path = os.path.join(folder, "model.onnx")
    info: dict[str, Any] = {}
    start = time.perf_counter()
    try:
        with _own_settings(os.path.join(folder, "route-memory")):
            if contender == "torch_default":
                torch.onnx.export(model, args, path, *case.positional, **kwargs)
            elif contender == "torchscript":
                torch.onnx.export(model, args, path, *case.positional, dynamo=False, **kwargs)
            else:
                import compat

                route = {"compat_auto": None, "compat_dynamo": "dynamo"}[contender]
                compat.export(model, args, path, *case.positional, route=route, **kwargs)
                outcome = compat.last_outcome()
                info["route"] = getattr(outcome, "route", None)
                if getattr(outcome, "fallback_reason", None):
                    info["fallback"] = one_line(outcome.fallback_reason)
    except Exception as exc:  # noqa: BLE001 - a failed export is a result, not a crash
        info["error"] = describe_error(exc)
    info["export_s"] = round(time.perf_counter() - start, 2)
    if "error" not in info:
        if not os.path.exists(path):
            info["error"] = "no file written"
        else:
            info["path"] = path
    return info


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def one_line(text: str, limit: int = 200) -> str:
    """The first non-empty line of ``text``, without colour codes, clipped: a reason for the report."""
    line = next((ln.strip() for ln in _ANSI.sub("", str(text)).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _root(exc: BaseException) -> BaseException:
    seen = {id(exc)}
    while exc.__cause__ is not None and id(exc.__cause__) not in seen:
        exc = exc.__cause__
        seen.add(id(exc))
    return exc


def describe_error(exc: BaseException) -> str:
    """One line for a failed export: the error and its root cause (torch wraps torch.export's
    error in a long TorchExportError); for compat's ``ExportFailed``, each route's reason."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        parts = []
        for route, failure in failures.items():
            root = _root(failure)
            cause = f" <- {type(root).__name__}: {one_line(str(root), 120)}" if root is not failure else ""
            parts.append(f"{route}: {getattr(failure, 'reason', '') or one_line(str(failure), 120)}{cause}")
        return one_line(f"{type(exc).__name__}: " + "; ".join(parts), 300)
    root = _root(exc)
    if root is exc:
        return f"{type(exc).__name__}: {one_line(str(exc))}"
    return f"{type(exc).__name__} <- {type(root).__name__}: {one_line(str(root))}"


# --- the interface ------------------------------------------------------------------------------

def _rank(value_info: Any) -> int | None:
    t = value_info.type.tensor_type
    return len(t.shape.dim) if t.HasField("shape") else None


def model_interface(path: str) -> dict[str, Any]:
    """Graph inputs (without initializers), outputs, whether initializers are listed as inputs,
    and the default-domain opset of the model file ``path``."""
    import onnx

    proto = onnx.load(path, load_external_data=False)
    inits = {i.name for i in proto.graph.initializer}
    return {
        "inputs": [[v.name, v.type.tensor_type.elem_type, _rank(v)] for v in proto.graph.input if v.name not in inits],
        "outputs": [[v.name, v.type.tensor_type.elem_type, _rank(v)] for v in proto.graph.output],
        "initializers_as_inputs": any(v.name in inits for v in proto.graph.input),
        "opset": next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None),
    }


def _elem_type(value: Any) -> int:
    """The ONNX element type the TorchScript exporter gives an input or output value."""
    import numpy as np
    import onnx
    import torch

    if isinstance(value, bool):
        return onnx.TensorProto.BOOL
    if isinstance(value, int):
        return onnx.TensorProto.INT64
    if isinstance(value, float):
        return onnx.TensorProto.DOUBLE
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    return onnx.helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype)


def _ndim(value: Any) -> int:
    return value.dim() if hasattr(value, "dim") else len(getattr(value, "shape", ()))


def call_interface(case: Case, leaves: list[Any], outputs: list[Any]) -> dict[str, Any]:
    """The interface the call asks for when the TorchScript exporter gives none: every
    flattened input, named by ``input_names``; eager's outputs, named by ``output_names``."""
    ins, outs = call_names(case)
    return {
        "inputs": [[ins[i] if i < len(ins) else f"input_{i}", _elem_type(v), _ndim(v)] for i, v in enumerate(leaves)],
        "outputs": [[outs[i] if i < len(outs) else f"output_{i}", _elem_type(v), v.ndim] for i, v in enumerate(outputs)],
        "initializers_as_inputs": bool(case.kwargs.get("keep_initializers_as_inputs")),
        "opset": case.kwargs.get("opset_version"),
    }


_GENERATED = re.compile(r"onnx::\w+?_(\d+)")


def input_positions(case: Case, interface: dict[str, Any], leaves: list[Any]) -> list[int]:
    """For each graph input of the reference interface, the index of the flattened call input
    it takes: by the declared name, else by the number in a generated ``onnx::Op_N`` name (the
    TorchScript exporter numbers inputs in call order), else the next free input of that rank."""
    names, _ = call_names(case)
    taken: list[int] = []
    for name, _, rank in interface["inputs"]:
        index = names.index(name) if name in names else None
        match = _GENERATED.fullmatch(name)
        if index is None and match and int(match.group(1)) < len(leaves):
            index = int(match.group(1))
        if index is None or index in taken:
            free = [i for i in range(len(leaves)) if i not in taken and _ndim(leaves[i]) == rank]
            if not free:
                raise CaseError(f"graph input {name!r} matches no input of the call")
            index = free[0]
        taken.append(index)
    return taken


def interface_mismatch(ref: dict[str, Any], got: dict[str, Any], declared: set[str]) -> str | None:
    """Why ``got`` does not have the reference interface, or None."""
    for side in ("inputs", "outputs"):
        want, have = ref[side], got[side]
        if len(want) != len(have):
            return (f"{len(have)} {side} {[v[0] for v in have]}, legacy has {len(want)} "
                    f"{[v[0] for v in want]}")
        for i, (w, h) in enumerate(zip(want, have)):
            if w[0] in declared and w[0] != h[0]:
                return f"{side[:-1]} {i} named {h[0]!r}, legacy {w[0]!r}"
            if w[1] != h[1]:
                return f"{side[:-1]} {i} ({h[0]}) has element type {_type_name(h[1])}, legacy {_type_name(w[1])}"
            if w[2] is not None and h[2] is not None and w[2] != h[2]:
                return f"{side[:-1]} {i} ({h[0]}) has rank {h[2]}, legacy {w[2]}"
    if ref["initializers_as_inputs"] != got["initializers_as_inputs"]:
        return ("initializers listed as inputs" if got["initializers_as_inputs"]
                else "initializers not listed as inputs (keep_initializers_as_inputs)")
    return None


def _type_name(elem_type: int) -> str:
    import onnx

    return onnx.TensorProto.DataType.Name(elem_type).lower()


# --- numerics -----------------------------------------------------------------------------------

def _feeds(names: list[str], ref: dict[str, Any], positions: list[int], values: tuple[Any, ...]) -> dict[str, Any]:
    """Feeds for graph inputs ``names`` (which match ``ref`` by position) from the call's ``values``."""
    import numpy as np
    import onnx

    leaves = flat_leaves(values)
    feeds = {}
    for spec, index, name in zip(ref["inputs"], positions, names):
        value = leaves[index]
        array = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
        feeds[name] = array.astype(onnx.helper.tensor_dtype_to_np_dtype(spec[1]), copy=False)
    return feeds


def parity(path: str, names: list[str], ref: dict[str, Any], positions: list[int],
           probes: Sequence[tuple[str, tuple[Any, ...]]], expected: Sequence[list[Any]], case: Case,
           diffs: list[float] | None = None) -> str | None:
    """Why onnxruntime on the model at ``path`` (graph inputs ``names``) does not match eager at
    every probe, or None. ``diffs`` gets the largest absolute difference of each output compared
    (NaN at the same places counts as equal)."""
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    opts.intra_op_num_threads = 1
    try:
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        return f"onnxruntime rejects the model: {one_line(str(exc), 160)}"
    for (label, values), want in zip(probes, expected):
        try:
            got = sess.run(None, _feeds(names, ref, positions, values))
        except Exception as exc:  # noqa: BLE001
            return f"onnxruntime fails at {label}: {one_line(str(exc), 160)}"
        if len(got) != len(want):
            return f"{len(got)} outputs at {label}, eager has {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            if g.shape != w.shape:
                return f"output {i} at {label}: shape {list(g.shape)}, eager {list(w.shape)}"
            if g.dtype != w.dtype:
                return f"output {i} at {label}: dtype {g.dtype}, eager {w.dtype}"
            largest = _max_abs_diff(g, w)
            if diffs is not None:
                diffs.append(largest)
            if not np.allclose(g, w, rtol=case.rtol, atol=case.atol, equal_nan=True):
                return (f"output {i} differs from eager at {label}: max abs {largest:.3g} "
                        f"(rtol {case.rtol:g}, atol {case.atol:g})")
    return None


def _max_abs_diff(got: Any, want: Any) -> float:
    """The largest absolute difference, NaN where both are NaN ignored (inf: a NaN on one side
    only, or an infinity that does not match)."""
    import numpy as np

    if got.size == 0:
        return 0.0
    g, w = got.astype(np.float64), want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    same = (g == w) | both_nan
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(g - w))
    diff = np.where(np.isnan(diff), np.inf, diff)
    return float(diff.max())


def _probes(case: Case) -> list[tuple[str, tuple[Any, ...]]]:
    probes = [("the example", seeded(case, case.args))]
    for i, values in enumerate(seeded(case, case.others, offset=1)):
        shapes = [list(v.shape) for v in flat_leaves(values) if hasattr(v, "shape")]
        probes.append((f"other input {i + 1} {shapes}", values))
    return probes


# --- one case -----------------------------------------------------------------------------------

def evaluate(case: Case, contenders: Sequence[str] = CONTENDERS, workdir: str | None = None,
             failed: Mapping[str, str] | None = None,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every contender on ``case``: ``{"case", "family", "reference", "interface", "results":
    {contender: {"ok", "stage", "reason", "opset", "route", "export_s", "max_diff"}}}``
    (``max_diff``: the largest absolute difference from eager over the probes compared); a broken case gives
    ``{"case_error": ...}`` instead of results. Never raises for a contender's failure.

    ``failed`` maps contenders already known to fail (a crash or a hang in an earlier attempt)
    to the reason: they are not run again. ``progress`` is told each step before it starts
    (``export <contender>``, ``judge <contender>``), so a runner can name the step that crashed."""
    failed = dict(failed or {})
    tell = progress or (lambda step: None)
    row: dict[str, Any] = {"case": case.name, "family": case.family}
    with tempfile.TemporaryDirectory(prefix=f"legacy-case-{case.name}-", dir=workdir) as tmp:
        try:
            probes = _probes(case)
            expected = [eager_outputs(case, values) for _, values in probes]
            leaves = flat_leaves(probes[0][1])
        except Exception as exc:  # noqa: BLE001
            row["case_error"] = f"eager: {type(exc).__name__}: {one_line(str(exc))}"
            return row
        order = [REFERENCE] + [c for c in contenders if c != REFERENCE]
        exports = {}
        for contender in order:
            if contender in failed:
                exports[contender] = {"error": failed[contender], "fatal": True}
                continue
            folder = os.path.join(tmp, contender)
            os.makedirs(folder)
            tell(f"export {contender}")
            exports[contender] = export_with(contender, case, folder)
        ref_export = exports[REFERENCE]
        try:
            if "path" in ref_export:
                ref, row["reference"] = model_interface(ref_export["path"]), "torchscript"
            else:
                ref, row["reference"] = call_interface(case, leaves, expected[0]), "call"
            positions = input_positions(case, ref, leaves)
        except CaseError as exc:
            row["case_error"] = f"interface: {exc}"
            return row
        row["interface"] = {"inputs": ref["inputs"], "outputs": ref["outputs"], "positions": positions}
        ins, outs = call_names(case)
        declared = set(ins) | set(outs)
        row["results"] = {}
        for contender in contenders:
            tell(f"judge {contender}")
            row["results"][contender] = _judge(exports[contender], case, ref, positions, probes, expected, declared)
    return row


def _judge(export: dict[str, Any], case: Case, ref: dict[str, Any], positions: list[int],
           probes: list[tuple[str, tuple[Any, ...]]], expected: list[list[Any]], declared: set[str]) -> dict[str, Any]:
    result: dict[str, Any] = {k: export[k] for k in ("route", "fallback", "export_s") if k in export}
    if "error" in export:
        stage = "crash" if export.get("fatal") else "export"
        return {**result, "ok": False, "stage": stage, "reason": export["error"]}
    got = model_interface(export["path"])
    result["opset"] = got["opset"]
    why = interface_mismatch(ref, got, declared)
    if why:
        return {**result, "ok": False, "stage": "interface", "reason": why}
    diffs: list[float] = []
    why = parity(export["path"], [v[0] for v in got["inputs"]], ref, positions, probes, expected, case, diffs)
    if diffs:
        result["max_diff"] = max(diffs)
    if why:
        return {**result, "ok": False, "stage": "parity", "reason": why}
    return {**result, "ok": True, "stage": "ok", "reason": None}
