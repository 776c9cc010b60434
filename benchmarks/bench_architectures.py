"""Real architectures on each route (issue 19, item 6): the share of models exported with eager
parity at two sizes, the torch.export route alone against the TorchScript exporter alone.

Models (``benchmarks/_arch_zoo.py``; small configs, random weights, nothing downloaded):
torchvision classification, detection and segmentation, timm transformers, piper's VITS generator
(a TTS model whose output length depends on the predicted durations; piper-tts from the registry,
its ``piper.train.vits`` code as piper's ``export_onnx.py`` exports it) and GRU/LSTM models. Each is
exported as a legacy script would (``input_names``, ``output_names``, ``dynamic_axes``,
``opset_version``) in five columns:

* dynamo: ``compat.export(..., route="dynamo")``, the shim's torch.export route alone;
* legacy: ``compat.export(..., route="legacy")``, the shim's TorchScript route alone;
* torchscript: plain ``torch.onnx.export(..., dynamo=False)``, torch's TorchScript exporter;
* auto: ``compat.export(...)``, the shim's default (torch.export first, TorchScript on failure);
* plain: plain ``torch.onnx.export(...)``, torch's default exporter.

A column succeeds for a model when the export returns and the written file, run in onnxruntime,
matches eager torch at the example size and at the second size along the dynamic axes
(``_arch_check``: tolerances per dtype; detection outputs as sets). Rows: per family and overall,
numerator the torch.export route's count, denominator the TorchScript exporter's (goal >= 1), and
auto against plain torch. No timing, no asserts.

torchvision and timm need a torch build this project's pinned CPU torch is not (its C ops fail to
load), so the measurements run in another venv, ``.venv-torch<BENCH_TORCH>`` (``make bench-venv``:
the version-matrix venv of torch 2.14.1 plus torchvision, timm and piper-tts), built on first use;
this process only starts workers there and reads their JSON lines. Each model's export in each column
runs in a fresh worker process (as a script exports one model; no state of an earlier export); one
that crashes its worker or runs past ``COLUMN_TIMEOUT_S`` fails with that reason.
``python benchmarks/bench_architectures.py [--quick] [--only NAME ...] [--workers N] [--json PATH]``
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BENCH_TORCH = os.environ.get("BENCH_TORCH", "2.14.1")
COLUMNS = ("dynamo", "legacy", "torchscript", "auto", "plain")
LABELS = {"dynamo": "torch.export route (compat, route=dynamo)", "legacy": "compat route=legacy",
          "torchscript": "torch.onnx.export(dynamo=False)", "auto": "compat auto",
          "plain": "torch.onnx.export default"}
COLUMN_TIMEOUT_S = 900


def bench_python() -> Path:
    return ROOT / f".venv-torch{BENCH_TORCH}" / "bin" / "python"


def ensure_venv() -> Path:
    """The benchmark venv's python, brought in step with the project's pins by ``make bench-venv``
    (which does nothing when it is; the first build downloads a few GB: torch's CUDA wheels, which
    run on CPU). If make fails but a built venv is there, that venv is used, with a note."""
    python = bench_python()
    stamp = python.parent.parent / ".bench-installed"
    if not stamp.exists():
        print(f"[bench_architectures] building {python.parent.parent.name} (torch {BENCH_TORCH}, torchvision, "
              "timm, piper-tts) with `make bench-venv`; the first time takes minutes", flush=True)
    proc = subprocess.run(["make", "-C", str(ROOT), "bench-venv", f"BENCH_TORCH={BENCH_TORCH}"],
                          capture_output=True, text=True, check=False)
    if proc.returncode or not stamp.exists():
        if not stamp.exists():
            raise RuntimeError(f"`make bench-venv` failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
        print(f"[bench_architectures] `make bench-venv` failed ({proc.returncode}); measuring in the "
              f"existing {python.parent.parent.name}", flush=True)
    return python


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    for var in ("TORCH_ONNX_COMPAT_ROUTE", "TORCH_ONNX_COMPAT_STRICT", "TORCH_ONNX_COMPAT_LEDGER",
                "TORCH_ONNX_ENABLE_DRAFT_EXPORT"):
        env.pop(var, None)
    env["TORCH_ONNX_COMPAT_CACHE_DIR"] = "off"  # every export decides its routes afresh
    env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "1")
    return env


# --- the worker (runs in the benchmark venv) ---------------------------------------------------

def _export(column: str, model: Any, args: tuple[Any, ...], path: str, case: Any) -> str:
    """Export in ``column``'s way; returns the route that wrote the file."""
    import torch

    legacy = {"input_names": case.input_names, "output_names": case.output_names,
              "dynamic_axes": case.dynamic_axes, "opset_version": case.opset}
    if column in ("torchscript", "plain"):
        torch.onnx.export(model, args, path, **legacy, **({"dynamo": False} if column == "torchscript" else {}))
        return "torchscript" if column == "torchscript" else "default"
    import compat

    compat.export(model, args, path, **legacy, **({} if column == "auto" else {"route": column}))
    outcome = compat.last_outcome()
    return outcome.route if outcome is not None else "?"


def _opset(path: str) -> int | None:
    import onnx

    imports = onnx.load(path, load_external_data=False).opset_import
    return next((i.version for i in imports if i.domain in ("", "ai.onnx")), None)


def _feeds(sess: Any, case: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    """The flattened tensors of ``args`` under ``case.input_names``, only those the graph takes
    (an exporter may drop an input the graph does not use)."""
    from _arch_check import leaves

    values = dict(zip(case.input_names, (a for _, a in leaves(args))))
    taken = [i.name for i in sess.get_inputs()]
    missing = [n for n in taken if n not in values]
    if missing:
        raise ValueError(f"graph inputs {missing} are not among input_names {case.input_names}")
    return {n: values[n] for n in taken}


def _parity(case: Any, path: str, refs: list[Any]) -> tuple[bool, str]:
    from _arch_check import compare
    from _onnx import session

    try:
        sess = session(path)
    except Exception as exc:  # noqa: BLE001 - an invalid model is a measured result
        return False, f"onnxruntime cannot load the model: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    notes = []
    for i, ref in enumerate(refs):
        where = ("example", "second size")[i] + f" {case.sizes[i]}"
        try:
            got = sess.run(None, _feeds(sess, case, case.inputs(i)))
        except Exception as exc:  # noqa: BLE001 - a model fixed to the example's shape fails here
            return False, f"{where}: onnxruntime fails: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        ok, why = compare(ref, got, case.detection)
        if not ok:
            return False, f"{where}: {why}"
        notes.append(f"{where}: {why}" if why else "")
    return True, "; ".join(n for n in notes if n)


def _worker(name: str, column: str, out_dir: str, results: str) -> None:
    """The model ``name`` in ``column``: JSON lines to ``results``, the eager facts, a ``start``
    line before the export (so the parent can tell a crash in it) and the result."""
    import contextlib as ctx
    import logging
    import warnings

    import torch
    from _arch_check import leaves, reason
    from _arch_zoo import by_name

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    case = by_name()[name]
    with torch.no_grad():
        model = case.build()
        refs = [leaves(model(*case.inputs(i))) for i in range(2)]
    info: dict[str, Any] = {"event": "eager", "model": name, "torch": torch.__version__}
    if case.detection:
        info["eager_detections"] = [int(next(a for k, a in ref if k.endswith("['boxes']")).shape[0]) for ref in refs]
    _append(results, info)
    _append(results, {"event": "start", "model": name, "column": column})
    path = os.path.join(out_dir, "model.onnx")
    start = time.perf_counter()
    route, opset = None, None
    try:
        with open(os.devnull, "w") as null, ctx.redirect_stdout(null):
            route = _export(column, case.build(), case.inputs(0), path, case)
        opset = _opset(path)
        ok, detail = _parity(case, path, refs)
        stage = "parity"
    except Exception as exc:  # noqa: BLE001 - a failed export is a measured result
        ok, detail, stage = False, reason(exc), "export"
    _append(results, {"model": name, "column": column, "ok": ok, "stage": None if ok else stage,
                      "detail": detail[:400], "route": route, "opset": opset,
                      "seconds": round(time.perf_counter() - start, 1)})


def _append(results: str, row: dict[str, Any]) -> None:
    with open(results, "a") as fh:
        fh.write(json.dumps(row) + "\n")


# --- the parent ----------------------------------------------------------------------------------

def _run_column(python: Path, name: str, column: str, tmp: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """One model in one column, in a fresh worker process (a script exports one model: no state of
    an earlier export in the process); past ``COLUMN_TIMEOUT_S``, or if the worker dies, the column
    fails with that reason. Returns the row and the worker's eager facts."""
    folder = Path(tempfile.mkdtemp(prefix="export-", dir=tmp))
    results, log = folder / "results.jsonl", folder / "worker.log"
    cmd = [str(python), str(Path(__file__).resolve()), "--worker", name, column, str(folder), str(results)]
    note = ""
    with open(log, "w") as log_fh:
        proc = subprocess.Popen(cmd, stdout=log_fh, stderr=subprocess.STDOUT, env=_env(), cwd=str(ROOT),
                                start_new_session=True)
        try:
            proc.wait(timeout=COLUMN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker and anything it started
            proc.wait()
            note = f"timed out after {COLUMN_TIMEOUT_S} s"
    events = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    eager = next((e for e in events if e.get("event") == "eager"), {})
    row = next((e for e in events if "event" not in e), None)
    if row is None:
        tail = " ".join(log.read_text().strip().splitlines()[-1:]) if log.exists() else ""
        stage = "while exporting" if any(e.get("event") == "start" for e in events) else "before exporting"
        row = _failed(name, column, note or f"worker died {stage} (exit {proc.returncode}): {tail[:300]}")
    shutil.rmtree(folder, ignore_errors=True)
    return row, eager


def _failed(name: str, column: str, detail: str) -> dict[str, Any]:
    return {"model": name, "column": column, "ok": False, "stage": "export", "detail": detail, "route": None,
            "opset": None, "seconds": None}


def _list(python: Path, quick: bool) -> list[dict[str, Any]]:
    proc = subprocess.run([str(python), str(Path(__file__).resolve()), "--list", *(["--quick"] if quick else [])],
                          capture_output=True, text=True, env=_env(), cwd=str(ROOT), check=False, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"listing the models failed in {python}: {proc.stderr.strip()[-800:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _ratio(num: int, den: int) -> float:
    return round(num / den, 3) if den else float(num >= den)


def run(quick: bool = False, only: list[str] | None = None, workers: int = 2) -> dict[str, Any]:
    """Every model in every column (``quick``: one model per family); counts per family and column,
    their ratios, and per failing model and column a one-line reason."""
    python = ensure_venv()
    start = time.perf_counter()
    listed = _list(python, quick and not only)
    models = [m for m in listed if not only or m["name"] in only]
    eager: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-arch-") as tmp_s, \
            cf.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {(m["name"], c): pool.submit(_run_column, python, m["name"], c, Path(tmp_s))
                   for m in models for c in COLUMNS}
        for m in models:
            for c in COLUMNS:
                row, facts = futures[m["name"], c].result()
                rows.append(row)
                eager.setdefault(m["name"], {}).update(facts)
            print(f"  {m['name']}: " + " ".join(f"{r['column']}={'ok' if r['ok'] else 'FAIL'}"
                                                for r in rows if r["model"] == m["name"]), flush=True)
    torch_version = next((e.get("torch") for e in eager.values() if e.get("torch")), f"{BENCH_TORCH}?")
    families = list(dict.fromkeys(m["family"] for m in models))
    family_of = {m["name"]: m["family"] for m in models}
    ok = {(family_of[r["model"]], r["column"]): 0 for r in rows}
    for r in rows:
        ok[family_of[r["model"]], r["column"]] += bool(r["ok"])
    totals = {f: sum(1 for m in models if m["family"] == f) for f in families}
    count = {c: sum(ok.get((f, c), 0) for f in families) for c in COLUMNS}

    def row(label: str, a: str, b: str, num: int, den: int, n: int, target: str) -> dict[str, Any]:
        return {"name": label, "ratio": _ratio(num, den), "target": target,
                "numerator": f"{a} {num}/{n}", "denominator": f"{b} {den}/{n}"}

    ratios = [row(f"{f}: torch.export route / TorchScript", "dynamo", "torchscript", ok.get((f, "dynamo"), 0),
                  ok.get((f, "torchscript"), 0), totals[f], ">= 1") for f in families]
    n = len(models)
    ratios += [row("all: torch.export route / TorchScript", "dynamo", "torchscript", count["dynamo"],
                   count["torchscript"], n, ">= 1"),
               row("all: compat auto / plain torch.onnx.export", "auto", "plain", count["auto"], count["plain"], n,
                   ">= 1"),
               row("all: compat auto / TorchScript", "auto", "torchscript", count["auto"], count["torchscript"], n,
                   ">= 1")]
    passed = {c: {r["model"] for r in rows if r["column"] == c and r["ok"]} for c in COLUMNS}
    result = {
        "benchmark": "architectures",
        "title": f"real architectures, {n} models, measured with torch {torch_version} in {python.parent.parent.name} "
                 "(export + onnxruntime parity at two sizes)",
        "torch": torch_version,
        "models": models,
        "successes": count,
        "by_family": {f: {c: ok.get((f, c), 0) for c in COLUMNS} | {"models": totals[f]} for f in families},
        "ratios": ratios,
        "dynamo_never_worse_than_torchscript": not passed["torchscript"] - passed["dynamo"],
        "auto_never_worse_than_plain": not passed["plain"] - passed["auto"],
        "legacy_same_as_torchscript": passed["legacy"] == passed["torchscript"],
        "eager": eager,
        "rows": rows,
        "seconds": round(time.perf_counter() - start, 1),
        "workers": workers,
    }
    print(format_table(result), flush=True)
    return result


def format_table(result: dict[str, Any]) -> str:
    """The per-model table (ok / FAIL per column), the per-family counts and each failure's reason."""
    out = [result["title"], "  columns: " + "; ".join(f"{c} = {LABELS[c]}" for c in COLUMNS)]
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for r in result["rows"]:
        cells.setdefault(r["model"], {})[r["column"]] = r
    width = max((len(m) for m in cells), default=10) + 2
    out.append(f"  {'model':<{width}}{'family':<16}" + "".join(f"{c:>13}" for c in COLUMNS))
    family = {m["name"]: m["family"] for m in result["models"]}
    for model, cols in cells.items():
        marks = []
        for c in COLUMNS:
            r = cols.get(c, {})
            mark = "ok" if r.get("ok") else ("FAIL-export" if r.get("stage") == "export" else "FAIL-parity")
            if c == "auto" and r.get("ok") and r.get("route"):
                mark += f"({r['route'][:6]})"
            marks.append(mark)
        out.append(f"  {model:<{width}}{family[model]:<16}" + "".join(f"{m:>13}" for m in marks))
    out.append("  per family (models with parity at both sizes):")
    for f, counts in result["by_family"].items():
        out.append(f"    {f:<16}" + "  ".join(f"{c} {counts[c]}/{counts['models']}" for c in COLUMNS))
    out.append("    " + f"{'all':<16}" + "  ".join(f"{c} {result['successes'][c]}/{len(result['models'])}"
                                                   for c in COLUMNS))
    for name, e in result["eager"].items():
        if e.get("eager_detections"):
            out.append(f"  {name}: eager detections {e['eager_detections'][0]} at the example, "
                       f"{e['eager_detections'][1]} at the second size")
    out.append("  failures:")
    for r in result["rows"]:
        if not r["ok"]:
            out.append(f"    {r['model']} / {r['column']}: {r['detail']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one model per family")
    p.add_argument("--only", nargs="*", metavar="MODEL")
    p.add_argument("--workers", type=int, default=2, help="models exported at a time (default 2)")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--list", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker", nargs=4, metavar="ARG", help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.worker:
        _worker(*ns.worker)
        return 0
    if ns.list:
        from _arch_zoo import cases

        with contextlib.redirect_stdout(sys.stderr):
            listed = [{"name": c.name, "family": c.family, "sizes": c.sizes, "notes": c.notes}
                      for c in cases() if c.quick or not ns.quick]
        print(json.dumps(listed))
        return 0
    result = run(quick=ns.quick, only=ns.only, workers=ns.workers)
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
