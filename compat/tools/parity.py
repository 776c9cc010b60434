"""``compat.compare``: export one model on both routes and say whether they give the same model.

Each route's model is checked against eager torch at the example inputs and at generated inputs
with other sizes along every declared dynamic axis (``dynamic_axes`` or ``dynamic_shapes``), so a
model that only works at its example shape is caught. Every output at every probe gets numbers:
the max abs and max rel difference of each route against eager and of the two routes against each
other (``ParityReport.numbers``). The verdict says "differs" only for a difference beyond tolerance
or in the interface; dims that differ only in labels (a generated ``Concatoutput0_dim_2`` against a
static ``85``) are ``notes``. Imports torch, onnx and onnxruntime on use.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from compat.request import ExportRequest
from compat.request.layout import InputLayout, default_probes, input_layout, resized_leaves
from compat.routing.numerics import (
    DEFAULT_TOLERANCES,
    NOISE,
    Check,
    compare_outputs,
    diff_stats,
    eager_outputs,
)
from compat.routing.numerics import clean as _clean
from compat.routing.numerics import session as _session
from compat.routing.numerics import to_numpy as _numpy

ROUTES = ("legacy", "dynamo")
ROUTE_TITLES = {"legacy": "legacy (TorchScript)", "dynamo": "dynamo (torch.export)"}
__all__ = ["DEFAULT_TOLERANCES", "Check", "ParityReport", "RouteResult", "compare", "compare_request", "diff_stats"]


# --- report -------------------------------------------------------------------------------------

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
    #: differences that are no finding, e.g. output dims that differ only in their labels
    notes: list[str] = field(default_factory=list)
    #: per probe and output: shape, size and max abs/rel difference legacy vs eager, dynamo vs
    #: eager and legacy vs dynamo (``{"max_abs": .., "max_rel": ..}``, None where not run)
    numbers: list[dict[str, Any]] = field(default_factory=list)
    #: wall time of the whole compare (both exports, onnxruntime runs, eager probes)
    compare_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "call_site": self.call_site,
            "verdict": self.verdict,
            "differences": list(self.differences),
            "notes": list(self.notes),
            "numbers": [dict(n) for n in self.numbers],
            "compare_s": self.compare_s,
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
            "differences": list(self.differences),  # in full: the terminal table shortens them
            "notes": list(self.notes),
            "numbers": [_rounded_numbers(n) for n in self.numbers],
            "compare_s": _round(self.compare_s),
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
        rows_n = [n for n in self.numbers if any(n.get(k) for k in PAIRS)]
        if rows_n:
            lines += ["", "**Numbers** (max abs / max rel difference)", "",
                      "| probe | output | shape | " + " | ".join(PAIR_TITLES[k] for k in PAIRS) + " |",
                      "|---|---|---|" + "---|" * len(PAIRS)]
            lines += [f"| {n['probe']} | {n['output']} | {_dims(n['shape'] or [])} | "
                      + " | ".join(_pair_cell(n.get(k)) for k in PAIRS) + " |" for n in rows_n]
        if self.differences:
            lines += ["", "**Differences**", ""] + [f"- {d}" for d in self.differences]
        if self.notes:
            lines += ["", "**Notes** (no difference)", ""] + [f"- {d}" for d in self.notes]
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


#: the pairs ``numbers`` compares, and their column titles
PAIRS = ("legacy_vs_eager", "dynamo_vs_eager", "legacy_vs_dynamo")
PAIR_TITLES = {"legacy_vs_eager": "legacy vs eager", "dynamo_vs_eager": "dynamo vs eager",
               "legacy_vs_dynamo": "legacy vs dynamo"}


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(v, digits)


def _sig(v: float | None) -> float | None:
    """Four significant digits (a difference of 1e-7 stays 1e-7)."""
    return None if v is None else float(f"{v:.4g}")


def _rounded_numbers(n: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(n)
    for k in PAIRS:
        if isinstance(n.get(k), Mapping):
            out[k] = {name: _sig(v) if isinstance(v, float) else v for name, v in n[k].items()}
    return out


def _pair_cell(stats: Mapping[str, Any] | None) -> str:
    if not stats:
        return "-"
    if "shapes" in stats:
        return "shapes differ: " + " vs ".join(_dims(s) for s in stats["shapes"])
    rel = stats.get("max_rel")
    return f"{stats['max_abs']:.3g} / " + ("-" if rel is None else f"{rel:.3g}")


def _fmt(v: Any, pattern: str) -> str:
    return "-" if v is None else pattern.format(v)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} kB" if n < 1024**2 else f"{n / 1024**2:.1f} MB"


def _short(text: str, limit: int) -> str:
    text = _clean(text)
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
    start = time.perf_counter()
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
        numbers: list[dict[str, Any]] = []
        for probe, (leaves, expected) in zip(probe_list, probe_inputs):
            if expected is None:
                continue
            got: dict[str, list[Any] | None] = {}
            for route, sess in sessions.items():
                check, got[route] = _check(sess, layout, leaves, expected, probe.label, tol)
                results[route].checks.append(check)
            numbers += _probe_numbers(probe.label, expected, results, got)
        _latency(sessions, results, layout, latency_runs)
    named = {"inputs": bool(req.input_names), "outputs": bool(req.output_names)}
    verdict, differences, notes = _verdict(results, probe_list, sizes, named)
    cls = type(req.model)
    return ParityReport(
        model=f"{cls.__module__}.{cls.__qualname__}", verdict=verdict, differences=differences,
        routes=results, probes=probe_list, dynamic_axes=sizes, tolerances=tol,
        call_site=req.call_site, notes=notes, numbers=numbers,
        compare_s=time.perf_counter() - start,
    )


def _export_route(req: ExportRequest, route: str, folder: str) -> tuple[RouteResult, Any]:
    from compat.policy import notices
    from compat.routing import dispatch

    result = RouteResult(route)
    path = os.path.join(folder, f"{route}.onnx")
    filename, _, line = req.call_site.rpartition(":")
    site = notices.CallSite(filename or req.call_site, int(line) if line.isdigit() else 0, "", {})
    # compare checks both models itself, and reports a difference rather than a failed route
    one = req.replace(route=route, dynamo=None, f=path, strict=False, acceptance_check=False)
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
        result.error = _clean(f"onnxruntime cannot load the model: {type(exc).__name__}: {exc}")
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
    return _clean("; ".join(parts))


def _cause_line(cause: BaseException) -> str:
    """The informative line of an exception: torch.export's errors open with a generic banner
    and give the real cause after "Exception summary"."""
    lines = [ln.strip() for ln in NOISE.sub("", str(cause)).splitlines() if ln.strip()]
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


def _eager_probes(req: ExportRequest, layout: InputLayout, probes: list[Probe]) -> list[tuple[list[Any], list[Any] | None]]:
    """(leaves, eager outputs as numpy) per probe, in eval mode under no_grad; mode restored."""
    import torch

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
                probe.eager_error = _clean(f"{type(exc).__name__}: {exc}")
                out.append((leaves, None))
                continue
            out.append((leaves, eager_outputs(result)))
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


def _check(sess: Any, layout: InputLayout, leaves: list[Any], expected: list[Any], probe: str,
           tol: Mapping[str, tuple[float, float]]) -> tuple[Check, list[Any] | None]:
    """The route's model against eager at one probe, and its outputs (None: onnxruntime failed)."""
    try:
        got = sess.run(None, _feeds(sess, layout, leaves))
    except Exception as exc:  # noqa: BLE001 - the finding this compare exists for
        return Check(probe, "error", detail=_clean(f"{type(exc).__name__}: {exc}")), None
    return compare_outputs(got, expected, probe, tol), list(got)


def _probe_numbers(probe: str, expected: list[Any], results: Mapping[str, RouteResult],
                   got: Mapping[str, list[Any] | None]) -> list[dict[str, Any]]:
    """One row per eager output at one probe: each route against eager, and the routes against
    each other (``max_rel`` there is relative to the dynamo route's values)."""
    rows = []
    for k, e in enumerate(expected):
        e_np = _numpy(e)
        row: dict[str, Any] = {"probe": probe, "output": k, "name": None, "shape": list(e_np.shape),
                               "size": int(e_np.size), **{pair: None for pair in PAIRS}}
        for route in ROUTES:
            r = results.get(route)
            if r is not None and r.ok and k < len(r.outputs) and row["name"] is None:
                row["name"] = r.outputs[k]["name"]
            outs = got.get(route)
            if outs is not None and k < len(outs):
                row[f"{route}_vs_eager"] = _pair(outs[k], e_np)
        a, b = got.get("legacy"), got.get("dynamo")
        if a is not None and b is not None and k < len(a) and k < len(b):
            row["legacy_vs_dynamo"] = _pair(a[k], b[k])
        rows.append(row)
    return rows


def _pair(a: Any, b: Any) -> dict[str, Any]:
    if tuple(a.shape) != tuple(b.shape):
        return {"shapes": [list(a.shape), list(b.shape)]}
    return diff_stats(a, b)


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
             named: Mapping[str, bool] | None = None) -> tuple[str, list[str], list[str]]:
    """(verdict, differences, notes)."""
    ok = [r for r in results.values() if r.ok]
    if not ok:
        return "failed", [f"{r.route}: {r.error}" for r in results.values()], []
    diffs: list[str] = []
    if len(ok) == 1:
        bad = next(r for r in results.values() if not r.ok)
        diffs.append(f"only the {ok[0].route} route exports; {bad.route} failed: {bad.error or ''}")
    example = ", ".join(f"{n}={s}" for n, s in sizes.items())
    for r in ok:
        for c in r.checks:
            where = c.probe if c.probe == "example inputs" else f"{c.probe} (example: {example})"
            if c.status == "error":
                diffs.append(f"{r.route} route's model fails in onnxruntime at {where}: {c.detail}")
            elif c.status == "mismatch":
                diffs.append(f"{r.route} route's model differs from eager torch at {where}: {c.detail}")
    if len(ok) == 1:
        return "one-route-only", diffs, []
    interface, notes = _interface_diffs(results["legacy"], results["dynamo"], named or {})
    diffs += interface
    return ("differs" if diffs else "equivalent"), diffs, notes


def _interface_diffs(a: RouteResult, b: RouteResult, named: Mapping[str, bool]) -> tuple[list[str], list[str]]:
    """(differences, notes) in the names, dtypes and shapes of the graphs' inputs/outputs. Input
    dim names must match. An output dim that is static on one route and a label (or unknown) on
    the other, or labelled differently, is a note: exporters name inferred dims freely, and the
    probes check the sizes themselves. Names count only where the caller chose them
    (``input_names``/``output_names``): each exporter generates its own otherwise."""
    out: list[str] = []
    notes: list[str] = []
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
            if kind == "outputs" and [_shape_kind(d) for d in dx] == [_shape_kind(d) for d in dy]:
                continue  # two generated labels (or unknowns) for the same dynamic axis
            if dx == dy:
                continue
            shapes = f"{label} shape: {a.route} {_dims(dx)}, {b.route} {_dims(dy)}"
            if kind == "outputs" and _labels_only(dx, dy):
                notes.append(f"{shapes}: the dims differ only in their labels (a generated name "
                             "or unknown against a static size), not a difference: the probes "
                             "check the sizes themselves")
            else:
                out.append(shapes)
    return out, notes


def _labels_only(dx: list[Any], dy: list[Any]) -> bool:
    """Same rank, and no position where both are static sizes that differ."""
    return len(dx) == len(dy) and all(
        x == y or not (_static(x) and _static(y)) for x, y in zip(dx, dy))


def _static(d: Any) -> bool:
    return isinstance(d, int) and d > 0


def _shape_kind(d: Any) -> Any:
    return d if _static(d) else "dynamic"


def _dims(dims: list[Any]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
