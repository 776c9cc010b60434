"""``compat.compare``: export one model on both routes and say whether they give the same model.

Each route's model is checked against eager torch at the example inputs and at generated inputs
with other sizes along every declared dynamic axis (``dynamic_axes`` or ``dynamic_shapes``), so a
model that only works at its example shape is caught. Imports torch, onnx and onnxruntime on use.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from compat.request import ExportRequest
from compat.request.layout import InputLayout, default_probes, input_layout, resized_leaves

ROUTES = ("legacy", "dynamo")
ROUTE_TITLES = {"legacy": "legacy (TorchScript)", "dynamo": "dynamo (torch.export)"}

#: (rtol, atol) per eager output dtype; |onnx - eager| <= atol + rtol * |eager|
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
    "complex64": (1e-4, 1e-4),
}


# --- report -------------------------------------------------------------------------------------

@dataclass
class Check:
    """One route's model at one probe: ``match``, ``mismatch`` or ``error`` (onnxruntime failed)."""

    probe: str
    status: str
    max_abs_diff: float | None = None
    detail: str = ""


@dataclass
class RouteResult:
    """What one route produced and how its model behaved."""

    route: str
    status: str = "failed"
    error: str | None = None
    export_s: float | None = None
    file_bytes: int | None = None
    nodes: int | None = None
    opsets: dict[str, int] = field(default_factory=dict)
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    latency_ms: float | None = None
    warnings: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Probe:
    """One set of inputs: the example, or sizes changed along named dynamic axes."""

    label: str
    sizes: dict[str, int]
    eager_error: str | None = None


@dataclass
class ParityReport:
    """Both routes side by side; ``verdict`` is equivalent, differs, one-route-only or failed."""

    model: str
    verdict: str
    differences: list[str]
    routes: dict[str, RouteResult]
    probes: list[Probe]
    dynamic_axes: dict[str, int]
    tolerances: dict[str, tuple[float, float]]
    call_site: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "call_site": self.call_site,
            "verdict": self.verdict,
            "differences": list(self.differences),
            "routes": {name: asdict(r) for name, r in self.routes.items()},
            "probes": [asdict(p) for p in self.probes],
            "dynamic_axes": dict(self.dynamic_axes),
            "tolerances": {k: list(v) for k, v in self.tolerances.items()},
        }

    def summary(self) -> dict[str, Any]:
        """The compact form the ledger records under ``parity``."""
        return {
            "verdict": self.verdict,
            "output_names_differ": self.output_names_differ,
            "differences": list(self.differences),
            "routes": {
                name: {
                    "status": r.status, "error": r.error, "export_s": _round(r.export_s),
                    "file_bytes": r.file_bytes, "nodes": r.nodes, "latency_ms": _round(r.latency_ms),
                    "failed_probes": [c.probe for c in r.checks if c.status != "match"],
                }
                for name, r in self.routes.items()
            },
        }

    def to_markdown(self) -> str:
        names = [n for n in ROUTES if n in self.routes]
        rows: list[tuple[str, list[str]]] = []

        def row(label: str, fn: Callable[[RouteResult], str]) -> None:
            rows.append((label, [fn(self.routes[n]) for n in names]))

        row("status", lambda r: "ok" if r.ok else f"**failed**: {_short(r.error or '', 120)}")
        row("export time", lambda r: _fmt(r.export_s, "{:.2f} s"))
        row("file size", lambda r: _size(r.file_bytes))
        row("nodes", lambda r: _fmt(r.nodes, "{}"))
        row("opset imports", lambda r: ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in sorted(r.opsets.items())) or "-")
        row("inputs", lambda r: "<br>".join(_io(v) for v in r.inputs) or "-")
        row("outputs", lambda r: "<br>".join(_io(v) for v in r.outputs) or "-")
        row("onnxruntime latency (median)", lambda r: _fmt(r.latency_ms, "{:.3f} ms"))
        for probe in self.probes:
            label = f"numerics: {probe.label}"
            if probe.eager_error:
                rows.append((label, [f"skipped (eager torch failed: {_short(probe.eager_error, 80)})"] * len(names)))
                continue
            rows.append((label, [_check_cell(self.routes[n], probe.label) for n in names]))
        head = f"### Parity of `{self.model}`: **{self.verdict}**"
        if self.call_site:
            head += f"\n\nCall site: `{self.call_site}`"
        lines = [head, "", "| | " + " | ".join(ROUTE_TITLES[n] for n in names) + " |",
                 "|---|" + "---|" * len(names)]
        lines += [f"| {label} | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for label, cells in rows]
        if self.differences:
            lines += ["", "**Differences**", ""] + [f"- {d}" for d in self.differences]
        if self.output_names_differ and not any(d.startswith("outputs names") for d in self.differences):
            named = "; ".join(f"{n} {v}" for n, v in self.output_names.items())
            note = f"Output names differ between routes ({named}): pass `output_names=` to fix them."
            lines += ["", note]
        tol = ", ".join(f"{k} rtol={v[0]:g} atol={v[1]:g}" for k, v in self.tolerances.items())
        lines += ["", f"Tolerances: {tol}.", ""]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_markdown()

    def __repr__(self) -> str:
        routes = ", ".join(f"{name}={r.status}" for name, r in self.routes.items())
        text = f"ParityReport(model={self.model!r}, verdict={self.verdict!r}, routes: {routes}"
        if self.differences:
            text += f", {len(self.differences)} difference(s)"
        if self.output_names_differ:
            text += ", output names differ"
        return text + ")"

    @property
    def output_names(self) -> dict[str, list[str]]:
        """Each exported route's graph output names."""
        return {name: [v["name"] for v in r.outputs] for name, r in self.routes.items() if r.ok}

    @property
    def output_names_differ(self) -> bool:
        """The routes' models name their outputs differently: code that reads outputs by name
        (``session.run(["logits"], ...)``) breaks when the route changes. Exporters generate
        their own names unless ``output_names=`` is given; the verdict counts names only then."""
        names = list(self.output_names.values())
        return len(names) > 1 and any(n != names[0] for n in names[1:])


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(v, digits)


def _fmt(v: Any, pattern: str) -> str:
    return "-" if v is None else pattern.format(v)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} kB" if n < 1024**2 else f"{n / 1024**2:.1f} MB"


_NOISE = re.compile(r"\x1b\[[0-9;]*m|/onnxruntime_src/\S+ \S+\([^)]*\)\s*")


def _short(text: str, limit: int) -> str:
    text = " ".join(_NOISE.sub("", text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _io(v: Mapping[str, Any]) -> str:
    dims = ", ".join("?" if d is None else str(d) for d in v["dims"])
    return f"`{v['name']}`: {v['dtype']}[{dims}]"


def _check_cell(r: RouteResult, probe: str) -> str:
    if not r.ok:
        return "-"
    for c in r.checks:
        if c.probe == probe:
            if c.status == "match":
                return f"ok (max abs diff {c.max_abs_diff:.2g})"
            if c.status == "mismatch":
                return f"**differs**: {_short(c.detail, 100)}"
            return f"**fails**: {_short(c.detail, 100)}"
    return "-"


def compare(
    model: Any,
    args: Any = (),
    *,
    tolerances: Mapping[str, tuple[float, float]] | None = None,
    probes: Sequence[Mapping[str, int]] | None = None,
    latency_runs: int = 20,
    workdir: str | os.PathLike[str] | None = None,
    **export_options: Any,
) -> ParityReport:
    """Export ``model`` on the TorchScript and torch.export routes and compare the two models.

    ``export_options`` are ``torch.onnx.export`` keywords (any historical spelling; ``f``,
    ``dynamo`` and ``route`` are ignored). ``tolerances`` maps a dtype name to ``(rtol, atol)``
    and is merged over ``DEFAULT_TOLERANCES``; ``probes`` overrides the generated sizes, e.g.
    ``[{"batch": 3}, {"seq": 7}]``. Models go to ``workdir`` (default: a temp folder, removed).
    """
    from compat.policy import notices
    from compat.request import normalize

    for name in ("f", "dynamo", "route", "fallback"):
        export_options.pop(name, None)
    site = notices.find_call_site()
    req = normalize.normalize(model, args, None, _call_site=str(site), _entry="compat.compare",
                              **export_options)
    return compare_request(req, tolerances=tolerances, probes=probes, latency_runs=latency_runs,
                           workdir=workdir)


def compare_request(
    req: ExportRequest,
    *,
    tolerances: Mapping[str, tuple[float, float]] | None = None,
    probes: Sequence[Mapping[str, int]] | None = None,
    latency_runs: int = 20,
    workdir: str | os.PathLike[str] | None = None,
) -> ParityReport:
    """``compare`` for an already normalised request (what ``compat run --compare`` uses)."""
    tol = {**DEFAULT_TOLERANCES, **(tolerances or {})}
    layout = input_layout(req)
    sizes = layout.axis_sizes()
    for p in probes or ():
        unknown = sorted(set(p) - set(sizes))
        if unknown:
            from compat.errors import CompatValueError

            raise CompatValueError(
                f"probes: {unknown} name no dynamic axis of this call (known: {sorted(sizes) or 'none'})")
    probe_list = [Probe("example inputs", {})] + [
        Probe(", ".join(f"{n}={s}" for n, s in p.items()), dict(p))
        for p in (default_probes(sizes) if probes is None else probes)
    ]
    with contextlib.ExitStack() as stack:
        folder = os.fspath(workdir) if workdir is not None else stack.enter_context(
            tempfile.TemporaryDirectory(prefix="compat-compare-"))
        os.makedirs(folder, exist_ok=True)
        results: dict[str, RouteResult] = {}
        sessions: dict[str, Any] = {}
        for route in ROUTES:
            results[route], sess = _export_route(req, route, folder)
            if sess is not None:
                sessions[route] = sess
        probe_inputs = _eager_probes(req, layout, probe_list)
        for route, sess in sessions.items():
            for probe, (leaves, expected) in zip(probe_list, probe_inputs):
                if expected is not None:
                    results[route].checks.append(_check(sess, layout, leaves, expected, probe.label, tol))
        _latency(sessions, results, layout, latency_runs)
    named = {"inputs": bool(req.input_names), "outputs": bool(req.output_names)}
    verdict, differences = _verdict(results, probe_list, sizes, named)
    cls = type(req.model)
    return ParityReport(
        model=f"{cls.__module__}.{cls.__qualname__}", verdict=verdict, differences=differences,
        routes=results, probes=probe_list, dynamic_axes=sizes, tolerances=tol,
        call_site=req.call_site,
    )


def _export_route(req: ExportRequest, route: str, folder: str) -> tuple[RouteResult, Any]:
    from compat.policy import notices
    from compat.routing import dispatch

    result = RouteResult(route)
    path = os.path.join(folder, f"{route}.onnx")
    filename, _, line = req.call_site.rpartition(":")
    site = notices.CallSite(filename or req.call_site, int(line) if line.isdigit() else 0, "", {})
    one = req.replace(route=route, dynamo=None, f=path, strict=False)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # compare's own exports: no ledger record, no observers (no nested compare)
            dispatch.run(one, site, ledger=None, observers=())
        except Exception as exc:  # noqa: BLE001 - a failing route is a result, not an error
            result.error = _error_text(exc)
    result.export_s = time.perf_counter() - start
    result.warnings = sorted({getattr(w.message, "code", "") for w in caught} - {""})
    if result.error is not None:
        return result, None
    try:
        _describe(result, path)
        sess = _session(path)
    except Exception as exc:  # noqa: BLE001 - e.g. onnxruntime rejects the model
        result.error = _short(f"onnxruntime cannot load the model: {type(exc).__name__}: {exc}", 600)
        return result, None
    result.status = "ok"
    return result, sess


def _error_text(exc: BaseException) -> str:
    """The route's failure class and the first line of its cause (not torch's whole essay)."""
    from compat.errors import ExportFailed, RouteFailed

    failures = list(exc.failures.values()) if isinstance(exc, ExportFailed) else [exc]
    parts = []
    for err in failures:
        if isinstance(err, RouteFailed):
            cause = err.cause
            first = _cause_line(cause) if cause is not None else ""
            parts.append(f"{err.reason}" + (f" ({type(cause).__name__}: {first})" if cause is not None else ""))
        else:
            parts.append(f"{type(err).__name__}: {err}")
    return _short("; ".join(parts), 400)


def _cause_line(cause: BaseException) -> str:
    """The informative line of an exception: torch.export's errors open with a generic banner
    and give the real cause after "Exception summary"."""
    lines = [ln.strip() for ln in _NOISE.sub("", str(cause)).splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("## Exception summary") and i + 1 < len(lines):
            return lines[i + 1]
    return lines[0] if lines else ""


def _describe(result: RouteResult, path: str) -> None:
    import onnx

    folder, name = os.path.split(path)
    result.file_bytes = sum(
        os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder) if n.startswith(name)
    )
    proto = onnx.load(path, load_external_data=False)
    g = proto.graph
    inits = {i.name for i in g.initializer}
    result.nodes = len(g.node)
    result.opsets = {o.domain: o.version for o in proto.opset_import}
    result.inputs = [_value_info(v) for v in g.input if v.name not in inits]
    result.outputs = [_value_info(v) for v in g.output]


def _value_info(v: Any) -> dict[str, Any]:
    import onnx

    t = v.type.tensor_type
    dims: list[Any] = []
    for d in t.shape.dim:
        dims.append(d.dim_param if d.HasField("dim_param") else d.dim_value if d.HasField("dim_value") else None)
    dtype = onnx.TensorProto.DataType.Name(t.elem_type).lower() if t.elem_type else "?"
    return {"name": v.name, "dtype": {"float": "float32", "double": "float64"}.get(dtype, dtype), "dims": dims}


def _session(path: str) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # failures are reported, not logged
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _eager_probes(req: ExportRequest, layout: InputLayout, probes: list[Probe]) -> list[tuple[list[Any], list[Any] | None]]:
    """(leaves, eager outputs as numpy) per probe, in eval mode under no_grad; mode restored."""
    import torch

    from compat.installed import torch_internals

    model = req.model
    modes = [(m, m.training) for m in model.modules()] if isinstance(model, torch.nn.Module) else []
    out: list[tuple[list[Any], list[Any] | None]] = []
    try:
        if modes:
            model.eval()
        for n, probe in enumerate(probes):
            leaves = layout.leaves if not probe.sizes else resized_leaves(layout, probe.sizes, seed=n)
            args, kwargs = layout.rebuild(leaves)
            try:
                with torch.no_grad():
                    result = model(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - sizes the model itself rejects are no finding
                probe.eager_error = _short(f"{type(exc).__name__}: {exc}", 300)
                out.append((leaves, None))
                continue
            flat = [t.detach().cpu() for t in torch_internals.tree_leaves(result) if isinstance(t, torch.Tensor)]
            out.append((leaves, flat))
    finally:
        for m, mode in modes:
            m.training = mode
    return out


def _feeds(sess: Any, layout: InputLayout, leaves: list[Any]) -> dict[str, Any]:
    """Map graph inputs to tensor leaves by name, else by position."""
    wanted = [i.name for i in sess.get_inputs()]
    tensors = layout.tensor_indices()
    by_name = {layout.names[i]: i for i in tensors if layout.names[i]}
    if all(w in by_name for w in wanted):
        pick = [by_name[w] for w in wanted]
    elif len(wanted) == len(tensors):
        pick = tensors
    else:
        raise ValueError(f"cannot map graph inputs {wanted} to the call's {len(tensors)} tensor inputs")
    return {w: _numpy(leaves[i]) for w, i in zip(wanted, pick)}


def _numpy(t: Any) -> Any:
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.float().numpy()
    return t.numpy()


def _check(sess: Any, layout: InputLayout, leaves: list[Any], expected: list[Any], probe: str,
           tol: Mapping[str, tuple[float, float]]) -> Check:
    import numpy as np

    try:
        got = sess.run(None, _feeds(sess, layout, leaves))
    except Exception as exc:  # noqa: BLE001 - the finding this compare exists for
        return Check(probe, "error", detail=_short(f"{type(exc).__name__}: {exc}", 300))
    if len(got) != len(expected):
        return Check(probe, "mismatch", detail=f"{len(got)} outputs, eager torch gives {len(expected)}")
    worst = 0.0
    for k, (g, e) in enumerate(zip(got, expected)):
        e_np = _numpy(e)
        if tuple(g.shape) != tuple(e_np.shape):
            return Check(probe, "mismatch", worst,
                         f"output {k} has shape {list(g.shape)}, eager torch {list(e_np.shape)}")
        rtol, atol = tol.get(str(e.dtype).replace("torch.", ""), (0.0, 0.0))
        if e_np.size == 0:
            continue
        if e_np.dtype == np.bool_ or not np.issubdtype(e_np.dtype, np.number):
            bad = int(np.count_nonzero(g != e_np))
            if bad:
                return Check(probe, "mismatch", worst, f"output {k}: {bad} of {e_np.size} values differ")
            continue
        g64, e64 = g.astype(np.float64), e_np.astype(np.float64)
        diff = np.abs(g64 - e64)
        nan_ok = np.isnan(g64) == np.isnan(e64)
        diff = np.where(np.isnan(diff) & nan_ok, 0.0, diff)
        worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
        if not nan_ok.all() or not (diff <= atol + rtol * np.abs(e64)).all():
            return Check(probe, "mismatch", worst,
                         f"output {k}: max abs diff {float(np.nanmax(diff)):.3g} (rtol={rtol:g}, atol={atol:g})")
    return Check(probe, "match", worst)


def _latency(sessions: Mapping[str, Any], results: Mapping[str, RouteResult], layout: InputLayout, runs: int) -> None:
    """Median onnxruntime latency at the example inputs, routes alternating run by run."""
    if runs <= 0:
        return
    feeds: dict[str, Any] = {}
    for route, sess in list(sessions.items()):
        try:
            feeds[route] = _feeds(sess, layout, layout.leaves)
            for _ in range(2):
                sess.run(None, feeds[route])
        except Exception:  # noqa: BLE001 - already reported by the example check
            feeds.pop(route, None)
    times: dict[str, list[float]] = {r: [] for r in feeds}
    for _ in range(runs):
        for route, feed in feeds.items():
            t = time.perf_counter()
            sessions[route].run(None, feed)
            times[route].append(time.perf_counter() - t)
    for route, ts in times.items():
        results[route].latency_ms = statistics.median(ts) * 1e3


def _verdict(results: Mapping[str, RouteResult], probes: list[Probe], sizes: Mapping[str, int],
             named: Mapping[str, bool] | None = None) -> tuple[str, list[str]]:
    ok = [r for r in results.values() if r.ok]
    if not ok:
        return "failed", [f"{r.route}: {r.error}" for r in results.values()]
    diffs: list[str] = []
    if len(ok) == 1:
        bad = next(r for r in results.values() if not r.ok)
        diffs.append(f"only the {ok[0].route} route exports; {bad.route} failed: {_short(bad.error or '', 300)}")
    example = ", ".join(f"{n}={s}" for n, s in sizes.items())
    for r in ok:
        for c in r.checks:
            where = c.probe if c.probe == "example inputs" else f"{c.probe} (example: {example})"
            if c.status == "error":
                diffs.append(f"{r.route} route's model fails in onnxruntime at {where}: {c.detail}")
            elif c.status == "mismatch":
                diffs.append(f"{r.route} route's model differs from eager torch at {where}: {c.detail}")
    if len(ok) == 1:
        return "one-route-only", diffs
    diffs += _interface_diffs(results["legacy"], results["dynamo"], named or {})
    return ("differs" if diffs else "equivalent"), diffs


def _interface_diffs(a: RouteResult, b: RouteResult, named: Mapping[str, bool]) -> list[str]:
    """Names, dtypes and shapes of the graphs' inputs/outputs. Input dim names must match; for
    outputs only static sizes and which axes are dynamic (exporters name inferred dims freely).
    Names count only where the caller chose them (``input_names``/``output_names``): each
    exporter generates its own otherwise."""
    out: list[str] = []
    for kind in ("inputs", "outputs"):
        va, vb = getattr(a, kind), getattr(b, kind)
        na, nb = [v["name"] for v in va], [v["name"] for v in vb]
        if len(na) != len(nb) or (named.get(kind) and na != nb):
            out.append(f"{kind} names: {a.route} {na}, {b.route} {nb}")
        for x, y in zip(va, vb):
            label = f"{kind[:-1]} {x['name']!r}" if x["name"] == y["name"] else f"{kind[:-1]} {x['name']!r}/{y['name']!r}"
            if x["dtype"] != y["dtype"]:
                out.append(f"{label} dtype: {a.route} {x['dtype']}, {b.route} {y['dtype']}")
            dx, dy = x["dims"], y["dims"]
            if kind == "outputs":
                dx, dy = [_shape_kind(d) for d in dx], [_shape_kind(d) for d in dy]
            if dx != dy:
                out.append(f"{label} shape: {a.route} {_dims(x['dims'])}, {b.route} {_dims(y['dims'])}")
    return out


def _shape_kind(d: Any) -> Any:
    return d if isinstance(d, int) and d > 0 else "dynamic"


def _dims(dims: list[Any]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
