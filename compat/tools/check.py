"""``python -m compat check MODEL.onnx [--format text|json]``: what an exported model holds and
whether it loads and runs: opsets per domain, IR version, inputs/outputs with their dims,
external data (present, sizes, paths resolvable), custom domains and nodes, onnx's checker and
strict shape inference, and an onnxruntime run on random inputs of the declared shapes.

Exit status: 0 clean, 1 problems found, 2 usage error (no such file, runtime extra missing).
Needs onnx, onnxruntime and numpy, not torch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from typing import Any

from compat import commands

#: domains the ONNX standard defines; anything else in a model's opset imports is custom
STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training")
#: custom domains whose operators onnxruntime itself implements
ORT_DOMAINS = ("com.microsoft", "com.microsoft.nchwc", "com.ms.internal.nhwc")
#: the size a symbolic dim (dim_param) or unknown dim gets in the smoke run
DEFAULT_DIM_SIZE = 2

PROG = commands.CHECK


def _onnx_modules() -> tuple[Any, Any, Any]:
    from compat.errors import RuntimeExtraMissing
    from compat.installed.runtime_extra import EXTRA_HINT

    try:
        import numpy
        import onnx
        import onnxruntime
    except ImportError as exc:
        raise RuntimeExtraMissing(f"{PROG} needs {exc.name or 'onnx'}, not installed: {EXTRA_HINT}") from exc
    return numpy, onnx, onnxruntime


def _value_info(vi: Any, onnx: Any) -> dict[str, Any]:
    t = vi.type
    kind = t.WhichOneof("value")
    if kind != "tensor_type":
        return {"name": vi.name, "type": kind or "unknown", "dims": None}
    tt = t.tensor_type
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name if tt.elem_type else "unknown"
    if not tt.HasField("shape"):
        return {"name": vi.name, "type": dtype, "dims": None}
    dims: list[int | str | None] = []
    for d in tt.shape.dim:
        dims.append(d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None)
    return {"name": vi.name, "type": dtype, "dims": dims}


def _external_data(model: Any, folder: str, onnx: Any) -> dict[str, Any]:
    """Each external data file: tensors in it, bytes they need, its size and whether it exists."""
    from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, uses_external_data

    files: dict[str, dict[str, Any]] = {}
    tensors = 0
    for tensor in _get_all_tensors(model):
        if not uses_external_data(tensor):
            continue
        tensors += 1
        info = ExternalDataInfo(tensor)
        f = files.setdefault(info.location, {"location": info.location, "tensors": 0, "bytes_needed": 0})
        f["tensors"] += 1
        end = (info.offset or 0) + (info.length or 0)
        f["bytes_needed"] = max(f["bytes_needed"], end)
    for f in files.values():
        path = os.path.normpath(os.path.join(folder, f["location"]))
        f["path"] = path
        f["inside_model_folder"] = (not os.path.isabs(f["location"])
                                    and os.path.commonpath([os.path.abspath(folder), os.path.abspath(path)])
                                    == os.path.abspath(folder))
        f["exists"] = os.path.isfile(path)
        f["size"] = os.path.getsize(path) if f["exists"] else None
    return {"tensors": tensors, "files": sorted(files.values(), key=lambda f: f["location"])}


def _custom(model: Any) -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """(custom domains, custom nodes by domain/op with counts, model-local functions)."""
    local = {(f.domain, f.name) for f in model.functions}
    domains = sorted({o.domain for o in model.opset_import if o.domain not in STANDARD_DOMAINS})
    counts: Counter[tuple[str, str]] = Counter()

    def walk(nodes: Any) -> None:
        for node in nodes:
            if node.domain not in STANDARD_DOMAINS and (node.domain, node.op_type) not in local:
                counts[node.domain, node.op_type] += 1
            for attr in node.attribute:
                if attr.HasField("g"):
                    walk(attr.g.node)
                for g in attr.graphs:
                    walk(g.node)

    walk(model.graph.node)
    for f in model.functions:
        walk(f.node)
    nodes = [{"domain": d, "op_type": op, "count": n, "onnxruntime_builtin": d in ORT_DOMAINS}
             for (d, op), n in sorted(counts.items())]
    functions = [{"domain": d, "name": n} for d, n in sorted(local)]
    return domains, nodes, functions


def describe(model: Any, path: str) -> dict[str, Any]:
    """What a loaded ``model`` (read from ``path``, external data not loaded) holds: IR version,
    producer, opsets per domain, inputs (initializers excluded) and outputs with their dims,
    node count, external data, custom domains and nodes, local functions."""
    _, onnx, _ = _onnx_modules()
    folder = os.path.dirname(os.path.abspath(path))
    domains, nodes, functions = _custom(model)
    return {
        "ir_version": model.ir_version,
        "producer": " ".join(p for p in (model.producer_name, model.producer_version) if p),
        "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
        "inputs": [_value_info(v, onnx) for v in model.graph.input
                   if v.name not in {t.name for t in model.graph.initializer}],
        "outputs": [_value_info(v, onnx) for v in model.graph.output],
        "nodes": len(model.graph.node),
        "external_data": _external_data(model, folder, onnx),
        "custom_domains": domains, "custom_nodes": nodes, "local_functions": functions,
    }


def _step(fn: Any) -> dict[str, Any]:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - onnx raises ValidationError, InferenceError, ...
        return {"ok": False, "error": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
    return {"ok": True, "error": None}


_ORT_TYPES = {
    "float": "float32", "double": "float64", "float16": "float16", "int8": "int8", "int16": "int16",
    "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
    "uint64": "uint64", "bool": "bool",
}


def _smoke(path: str, dim_size: int, outputs: list[dict[str, Any]], np: Any, ort: Any) -> dict[str, Any]:
    """Run the model once on CPU with random inputs of the declared shapes."""
    result: dict[str, Any] = {"ok": False, "dim_size": dim_size, "inputs": [], "outputs": [], "error": None}
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 3  # errors only: the result carries what went wrong
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        feeds = {}
        for inp in sess.get_inputs():
            kind = inp.type.removeprefix("tensor(").removesuffix(")")
            if kind not in _ORT_TYPES:
                result["error"] = f"input {inp.name!r} has type {inp.type}: no random value for it"
                return result
            shape = [d if isinstance(d, int) and d >= 0 else dim_size for d in inp.shape]
            dtype = np.dtype(_ORT_TYPES[kind])
            if dtype == np.bool_:
                value = rng.integers(0, 2, size=shape).astype(bool)
            elif dtype.kind in "iu":
                value = rng.integers(0, 2, size=shape).astype(dtype)  # 0/1: valid indices too
            else:
                value = rng.standard_normal(size=shape).astype(dtype)
            feeds[inp.name] = value
            result["inputs"].append({"name": inp.name, "shape": shape, "type": dtype.name})
        values = sess.run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own Fail, InvalidGraph, ...
        result["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        return result
    declared = {o["name"]: o["dims"] for o in outputs}
    for out, value in zip(sess.get_outputs(), values):
        shape = list(getattr(value, "shape", ()))
        entry: dict[str, Any] = {"name": out.name, "shape": shape,
                                 "type": getattr(getattr(value, "dtype", None), "name", type(value).__name__)}
        dims = declared.get(out.name)
        if dims is not None and (len(dims) != len(shape) or any(
                isinstance(d, int) and d != s for d, s in zip(dims, shape))):
            entry["declared"] = dims
        result["outputs"].append(entry)
    result["ok"] = True
    return result


def check(path: str, dim_size: int = DEFAULT_DIM_SIZE) -> dict[str, Any]:
    """Everything ``check`` reports about the model at ``path``, with ``problems`` (empty: clean).

    Raises FileNotFoundError when ``path`` is not a file, RuntimeExtraMissing without onnx."""
    np, onnx, ort = _onnx_modules()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    report: dict[str, Any] = {"path": path, "problems": []}
    problems: list[str] = report["problems"]
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - DecodeError and friends: not an ONNX protobuf
        problems.append(f"not an ONNX model: {type(exc).__name__}: {' '.join(str(exc).split())}")
        return report
    report.update(describe(model, path))
    for f in report["external_data"]["files"]:
        if not f["exists"]:
            problems.append(f"external data file {f['location']!r} is missing (looked for {f['path']})")
        elif f["size"] < f["bytes_needed"]:
            problems.append(f"external data file {f['location']!r} has {f['size']} bytes, "
                            f"its tensors need {f['bytes_needed']}")
        if not f["inside_model_folder"]:
            problems.append(f"external data location {f['location']!r} is outside the model's folder")
    report["checker"] = _step(lambda: onnx.checker.check_model(path))
    if not report["checker"]["ok"]:
        problems.append(f"onnx checker: {report['checker']['error']}")
    with tempfile.TemporaryDirectory() as tmp:
        report["shape_inference"] = _step(lambda: onnx.shape_inference.infer_shapes_path(
            path, os.path.join(tmp, "inferred.onnx"), check_type=True, strict_mode=True, data_prop=True))
    if not report["shape_inference"]["ok"]:
        problems.append(f"strict shape inference: {report['shape_inference']['error']}")
    report["smoke_run"] = _smoke(path, dim_size, report["outputs"], np, ort)
    smoke = report["smoke_run"]
    if not smoke["ok"]:
        problems.append(f"onnxruntime: {smoke['error']}")
    for out in smoke["outputs"]:
        if "declared" in out:
            problems.append(f"output {out['name']!r}: onnxruntime gave shape {out['shape']}, "
                            f"the model declares {_dims(out['declared'])}")
    return report


def _dims(dims: list[int | str | None] | None) -> str:
    if dims is None:
        return "(no shape)"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _verdict(step: dict[str, Any]) -> str:
    return "ok" if step["ok"] else f"FAILED: {step['error']}"


def to_text(report: dict[str, Any]) -> str:
    """The report as a terminal reads it."""
    lines = [f"{report['path']}"]
    if "ir_version" not in report:
        lines += [f"  problem: {p}" for p in report["problems"]]
        return "\n".join(lines) + "\n"
    lines.append(f"  IR version:     {report['ir_version']}" +
                 (f" (producer: {report['producer']})" if report["producer"] else ""))
    lines.append("  opsets:         " + ", ".join(f"{d} {v}" for d, v in report["opsets"].items()))
    for title, key in (("inputs", "inputs"), ("outputs", "outputs")):
        lines.append(f"  {title}:")
        lines += [f"    {v['name']}  {v['type']}  {_dims(v['dims'])}" for v in report[key]] or ["    (none)"]
    ext = report["external_data"]
    if ext["files"]:
        lines.append(f"  external data:  {ext['tensors']} tensor(s) in {len(ext['files'])} file(s)")
        for f in ext["files"]:
            state = (f"{_size(f['size'])}, needs {_size(f['bytes_needed'])}" if f["exists"] else "MISSING")
            lines.append(f"    {f['location']}  ({state})")
    else:
        lines.append("  external data:  none (weights inside the model file)")
    if report["custom_domains"] or report["custom_nodes"]:
        lines.append("  custom domains: " + (", ".join(report["custom_domains"]) or "none"))
        for n in report["custom_nodes"]:
            builtin = " (onnxruntime implements it)" if n["onnxruntime_builtin"] else ""
            lines.append(f"    {n['domain']}::{n['op_type']} x{n['count']}{builtin}")
    else:
        lines.append("  custom domains: none")
    if report["local_functions"]:
        lines.append(f"  local functions: {len(report['local_functions'])}")
    lines.append(f"  onnx checker:   {_verdict(report['checker'])}")
    lines.append(f"  strict shape inference: {_verdict(report['shape_inference'])}")
    smoke = report["smoke_run"]
    if smoke["ok"]:
        outs = ", ".join(f"{o['name']} {_dims(o['shape'])} {o['type']}" for o in smoke["outputs"])
        lines.append(f"  onnxruntime run: ok on random inputs (symbolic dims = {smoke['dim_size']}): {outs}")
    else:
        lines.append(f"  onnxruntime run: FAILED: {smoke['error']}")
    if report["problems"]:
        lines.append(f"{len(report['problems'])} problem(s):")
        lines += [f"  - {p}" for p in report["problems"]]
    else:
        lines.append("no problems found")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from compat.errors import RuntimeExtraMissing

    p = argparse.ArgumentParser(prog=PROG, description="Check an ONNX model: structure, external "
                                "data, onnx checker, strict shape inference, an onnxruntime run.")
    p.add_argument("models", nargs="+", metavar="MODEL.onnx")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--dim-size", type=int, default=DEFAULT_DIM_SIZE, metavar="N",
                   help=f"size of symbolic dims in the onnxruntime run (default {DEFAULT_DIM_SIZE})")
    commands.add_version(p)
    ns = commands.parse_args(p, argv)
    if isinstance(ns, int):
        return ns
    if ns.dim_size < 1:
        print(f"{PROG}: error: --dim-size must be at least 1", file=sys.stderr)
        return 2
    reports = []
    for path in ns.models:
        try:
            reports.append(check(path, ns.dim_size))
        except (FileNotFoundError, RuntimeExtraMissing) as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return 2
    if ns.format == "json":
        sys.stdout.write(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(to_text(r) for r in reports))
    return 1 if any(r["problems"] for r in reports) else 0
