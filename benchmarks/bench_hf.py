"""Old Hugging Face export scripts: plain torch vs the shim vs the migrated script (issue 11).

transformers 4.27's ``export_pytorch`` (``tests/hf/fixtures/hf_convert_427.py``, unchanged: opset
11-14, ``dynamic_axes`` from the OnnxConfig, ``do_constant_folding=True``, a trailing kwargs dict)
on 17 tiny random-init transformers-5 models. A model counts as a success for a column when the
export returns and the written file matches eager torch in onnxruntime at the example shape and
at another size along its dynamic axes. Columns:

* plain: torch 2.13's own ``torch.onnx.export`` (nothing patched);
* shim: the same call under ``compat.patch()``;
* migrated: the documented gradual upgrade: the shim column's runs write a ledger
  (``TORCH_ONNX_COMPAT_LEDGER``), then ``python -m compat.migrate --write --ledger <it>`` rewrites a
  temp copy of the script, which is run as it is. The migration keeps a call site on
  ``compat.export`` where the ledger shows the shim doing what plain torch cannot; the column is
  labelled for what ran: "migrated (plain torch)" when the rewritten script calls no compat API,
  and then its workers cannot import compat at all (so it is plain torch, not assumed to be),
  else "migrated (via compat.export)";
* dynamo: the shim column's call with ``TORCH_ONNX_COMPAT_ROUTE=dynamo`` (the torch.export route
  only, as ``route="dynamo"``; issue 35's figure: at least 16 of the 17).

Rows (counts of successes, no timing): numerator shim, denominator plain; numerator migrated,
denominator shim (the row's name says which migrated column ran); numerator dynamo, denominator
the number of models. Findings: the shim is never
worse than plain torch, the migrated script never worse than the shim, and it writes the opset
the shim wrote (a migration must not change the model).

Each column runs in its own worker processes (compat is never imported in plain torch's), two at
a time, each exporting several models: one torch + transformers import per worker instead of one
per model. The shim column goes first, plain torch's while the migration runs, the migrated
script's last. A model that runs past
``MODEL_TIMEOUT_S`` (or crashes its worker) is recorded as failed and a fresh worker goes on with
the rest, so one hang cannot stall ``make bench``. No asserts.
``python benchmarks/bench_hf.py [--quick] [--only NAME ...] [--columns COLUMN ...] [--workers N]``
(``--columns dynamo``: the route="dynamo" figure alone).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures as cf
import contextlib
import importlib.abc
import importlib.util
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "hf" / "fixtures"
SCRIPT = "hf_convert_427.py"
COLUMNS = ("plain", "shim", "migrated", "dynamo")
#: columns that share worker processes, each model's columns in this order; in this order too:
#: the migration needs the shim column's ledger
GROUPS = (("shim",), ("plain",), ("dynamo",), ("migrated",))
#: the route each column's workers export on (TORCH_ONNX_COMPAT_ROUTE; others: cleared, auto)
COLUMN_ROUTES = {"dynamo": "dynamo"}
MODEL_TIMEOUT_S = 300
QUICK = ("bert", "gpt2", "t5-encoder", "vit")
LEDGER = "shim-ledger.jsonl"  # written by the shim column's workers, read by the migration
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
SHIM = ("compat", "torch_onnx_compat")  # the shim's package in the checkout, and installed


def calls_compat(text: str) -> bool:
    """Whether a (migrated) script imports the shim (it cannot call ``compat.export`` without)."""
    for node in ast.walk(ast.parse(text)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        if any(n.partition(".")[0] in SHIM for n in names):
            return True
    return False


class _NoCompat(importlib.abc.MetaPathFinder):
    """Refuses imports of the shim: the migrated column, when labelled plain torch, is."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in SHIM:
            raise ImportError(f"{name}: the 'migrated (plain torch)' column runs without the shim")


def _models() -> list[str]:
    sys.path.insert(0, str(FIXTURES))
    import hf_zoo

    return list(hf_zoo.SPECS)


def migrate_copy(folder: Path, ledger: Path) -> dict[str, Any]:
    """Copy the fixtures to ``folder`` and run ``compat.migrate --write --ledger ledger`` on the
    script there (``folder`` ends in the fixtures' folder name, so the ledger's call sites match)."""
    shutil.copytree(FIXTURES, folder, ignore=shutil.ignore_patterns("__pycache__"))
    script = folder / SCRIPT
    before = script.read_text()
    ledger_args = ["--ledger", str(ledger)] if ledger.exists() else []
    proc = subprocess.run(
        [sys.executable, "-m", "compat.migrate", "--write", *ledger_args, str(script)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    after = script.read_text()
    return {"exit_code": proc.returncode, "changed": after != before, "ledger": bool(ledger_args),
            "through_compat": calls_compat(after),
            "stderr": proc.stderr[-500:]}


def _worker(columns: list[str], migrated: str, out_dir: str, results: str, names: list[str]) -> None:
    """``columns`` for each of ``names``, in this one process: a JSON line per model and column to
    ``results``, a ``start`` line before each so the parent can tell what hung or crashed."""
    sys.path.insert(0, str(FIXTURES))
    import hf_zoo

    warnings.simplefilter("ignore")

    def plain(name: str, path: str) -> None:
        hf_zoo.export(name, path)

    def migrated_script(name: str, path: str) -> None:
        model, config = hf_zoo.build(name)
        module.export_pytorch(None, model, config, config.default_onnx_opset, Path(path))

    def shim(name: str, path: str) -> None:
        import compat

        with compat.patch():
            hf_zoo.export(name, path)

    if "migrated" in columns:
        if not calls_compat(Path(migrated).read_text()):
            sys.meta_path.insert(0, _NoCompat())
        spec = importlib.util.spec_from_file_location("hf_convert_427_migrated", migrated)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    runs = {"plain": plain, "migrated": migrated_script, "shim": shim, "dynamo": shim}
    for name in names:
        for column in columns:
            if "torch._dynamo" in sys.modules:  # every export starts from a new process's compile caches
                sys.modules["torch._dynamo"].reset()
            _append(results, {"event": "start", "model": name, "column": column})
            path = os.path.join(out_dir, f"{name}-{column}.onnx")
            start = time.perf_counter()
            try:
                with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
                    runs[column](name, path)
                ok, detail = hf_zoo.parity(name, path)
            except Exception as exc:  # noqa: BLE001 - a failed export is a measured result
                text = _ANSI.sub("", str(exc)).strip()
                summary = text.partition("## Exception summary")[2].strip() or text  # torch's real cause
                first = (summary.splitlines() or [""])[0]
                ok, detail = False, f"{type(exc).__name__}: {first[:200]}"
            _append(results, {"model": name, "column": column, "ok": ok, "detail": detail[:300],
                              "seconds": round(time.perf_counter() - start, 2),
                              "opset": _opset(path) if ok else None})


def _append(results: str, row: dict[str, Any]) -> None:
    with open(results, "a") as fh:
        fh.write(json.dumps(row) + "\n")


def _opset(path: str) -> int | None:
    import onnx

    imports = onnx.load(path, load_external_data=False).opset_import
    return next((i.version for i in imports if i.domain in ("", "ai.onnx")), None)


def _worker_env(ledger: Path | None = None, route: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for var in ("TORCH_ONNX_COMPAT_ROUTE", "TORCH_ONNX_COMPAT_STRICT", "TORCH_ONNX_COMPAT_LEDGER"):
        env.pop(var, None)
    env["TORCH_ONNX_COMPAT_CACHE_DIR"] = "off"  # every run decides its routes afresh
    if ledger is not None:
        env["TORCH_ONNX_COMPAT_LEDGER"] = str(ledger)
    if route is not None:
        env["TORCH_ONNX_COMPAT_ROUTE"] = route
    return env


def _run_chunk(columns: tuple[str, ...], names: list[str], migrated: Path, tmp: Path,
               tag: str) -> list[dict[str, Any]]:
    """``columns`` for ``names`` in one worker process. A model that runs past ``MODEL_TIMEOUT_S``
    (or takes the process down) fails in its columns not done yet; a fresh worker goes on with the
    models after it."""
    out_dir = tmp / "out"
    out_dir.mkdir(exist_ok=True)
    rows: list[dict[str, Any]] = []
    todo = list(names)
    attempt = 0
    while todo:
        attempt += 1
        results = tmp / f"{'-'.join(columns)}-{tag}-{attempt}.jsonl"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", ",".join(columns), str(migrated),
               str(out_dir), str(results), *todo]
        env = _worker_env(tmp / LEDGER if "shim" in columns else None,
                          next((COLUMN_ROUTES[c] for c in columns if c in COLUMN_ROUTES), None))
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        note, seen, since = "", 0, time.monotonic()
        while proc.poll() is None:
            time.sleep(0.5)
            lines = results.read_text().splitlines() if results.exists() else []
            if len(lines) != seen:
                seen, since = len(lines), time.monotonic()
            elif time.monotonic() - since > MODEL_TIMEOUT_S:
                os.killpg(proc.pid, signal.SIGKILL)  # the worker and anything it started
                proc.wait()
                note = f"timed out after {MODEL_TIMEOUT_S} s"
        events = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
        done = [e for e in events if "event" not in e]
        rows += done
        started = [e["model"] for e in events if e.get("event") == "start"]
        if not started:  # died before its first model: give up on all of them
            rows += [_failed(n, c, "worker died") for n in todo for c in columns]
            break
        finished = {r["model"] for r in done if r["column"] == columns[-1]}
        current = started[-1]
        if current not in finished:  # the model the worker was on when it hung or died
            have = {r["column"] for r in done if r["model"] == current}
            rows += [_failed(current, c, note or "worker died") for c in columns if c not in have]
            finished.add(current)
        todo = [n for n in todo if n not in finished]
    return rows


def _failed(name: str, column: str, detail: str) -> dict[str, Any]:
    return {"model": name, "column": column, "ok": False, "detail": detail, "seconds": None, "opset": None}


def _chunks(names: list[str], parts: int) -> list[list[str]]:
    """``names`` split round-robin into ``parts`` lists (none empty)."""
    return [c for c in (names[i::parts] for i in range(parts)) if c]


def run(quick: bool = False, only: list[str] | None = None, workers: int = 2,
        columns: tuple[str, ...] = COLUMNS) -> dict[str, Any]:
    """Export every model in each of ``columns`` (the migrated column needs the shim's); successes
    per column and their ratios."""
    unknown = sorted(set(columns) - set(COLUMNS))
    if unknown or ("migrated" in columns and "shim" not in columns):
        raise ValueError(f"columns={columns!r}: choose from {COLUMNS}; 'migrated' needs 'shim'")
    names = list(only or (QUICK if quick else _models()))
    groups = [g for g in GROUPS if set(g) <= set(columns)]
    start, cpu0 = time.perf_counter(), _children_cpu()
    with tempfile.TemporaryDirectory(prefix="bench-hf-") as tmp_s:
        tmp = Path(tmp_s)
        migrated = tmp / "migrated" / FIXTURES.name / SCRIPT
        # one torch + transformers import per worker, not per model; each group split in ``workers``
        # parts, started group by group (the pool runs them in that order)
        chunks = _chunks(names, workers)
        with cf.ThreadPoolExecutor(max_workers=workers) as pool, \
                cf.ThreadPoolExecutor(max_workers=1) as migrator:
            futures = {group: [pool.submit(_run_chunk, group, chunk, migrated, tmp, str(i))
                               for i, chunk in enumerate(chunks)] for group in groups if "migrated" not in group}

            def migrate_after_shim() -> dict[str, Any]:
                if "migrated" not in columns:
                    return {"skipped": "the migrated column was not asked for", "through_compat": True}
                cf.wait([f for group, fs in futures.items() if "shim" in group for f in fs])
                return migrate_copy(migrated.parent, tmp / LEDGER)

            migration_future = migrator.submit(migrate_after_shim)

            def run_migrated(group: tuple[str, ...], chunk: list[str], tag: str) -> list[dict[str, Any]]:
                migration_future.result()
                return _run_chunk(group, chunk, migrated, tmp, tag)

            for group in groups:
                if "migrated" in group:
                    futures[group] = [pool.submit(run_migrated, group, chunk, str(i))
                                      for i, chunk in enumerate(chunks)]
            per_task = [f.result() for fs in futures.values() for f in fs]
        migration = migration_future.result()
    order = {n: i for i, n in enumerate(names)}
    rows = sorted((r for task_rows in per_task for r in task_rows),
                  key=lambda r: (order[r["model"]], COLUMNS.index(r["column"])))
    ok = {c: sorted(r["model"] for r in rows if r["column"] == c and r["ok"]) for c in columns}
    count = {c: len(v) for c, v in ok.items()}

    def ratio(a: str, b: str) -> float:
        return count[a] / count[b] if count[b] else float(count[a] > 0)

    worse = sorted(set(ok.get("plain", ())) - set(ok.get("shim", ())))
    migrated_worse = sorted(set(ok.get("shim", ())) - set(ok.get("migrated", ())))
    opsets = {(r["model"], r["column"]): r["opset"] for r in rows if r["ok"]}
    other_opset = sorted(n for n in names if (n, "shim") in opsets and (n, "migrated") in opsets
                         and opsets[n, "shim"] != opsets[n, "migrated"])
    migrated_label = "migrated (via compat.export)" if migration["through_compat"] else "migrated (plain torch)"
    ratios = []
    if {"shim", "plain"} <= set(columns):
        ratios.append({"name": "shim/plain successes", "ratio": round(ratio("shim", "plain"), 3), "target": ">= 1",
                       "numerator": "shim: models with parity", "denominator": "plain: models with parity"})
    if "migrated" in columns:
        ratios.append({"name": f"{migrated_label}/shim successes", "ratio": round(ratio("migrated", "shim"), 3),
                       "target": ">= 1", "numerator": f"{migrated_label}: models with parity",
                       "denominator": "shim: models with parity"})
    if "dynamo" in columns:
        ratios.append({"name": f"route=dynamo successes / models ({count['dynamo']}/{len(names)})",
                       "ratio": round(count["dynamo"] / len(names), 3) if names else 0.0,
                       "target": f">= {len(names) - 1}/{len(names)}",
                       "numerator": "dynamo: models with parity on route='dynamo'",
                       "denominator": "models"})
    return {
        "benchmark": "hf",
        "title": f"transformers 4.27 export_pytorch on {len(names)} transformers-5 models "
                 "(export + onnxruntime parity at two shapes)",
        "models": len(names),
        "successes": count,
        "columns": list(columns),
        "ratios": ratios,
        "migrated_column": migrated_label,
        "shim_never_worse_than_plain": not worse,
        "migrated_never_worse_than_shim": not migrated_worse,
        "shim_worse_than_plain_on": worse,
        "migrated_worse_than_shim_on": migrated_worse,
        "migrated_writes_the_shims_opset": not other_opset,
        "migrated_opset_differs_from_shim_on": other_opset,
        "migration": migration,
        "rows": rows,
        "seconds": round(time.perf_counter() - start, 1),
        "cpu_seconds": round(_children_cpu() - cpu0, 1),
        "workers": workers,
    }


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished worker processes of this process."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _print(result: dict[str, Any]) -> None:
    print(result["title"])
    by_model: dict[str, dict[str, Any]] = {}
    for r in result["rows"]:
        by_model.setdefault(r["model"], {})[r["column"]] = r
    columns = result["columns"]
    print(f"  {'model':<16} " + " ".join(f"{c:>10}" for c in columns) + f"   (migrated: {result['migrated_column']})")
    for model, cols in by_model.items():
        cells = [("ok@" + str(cols[c]["opset"])) if cols[c]["ok"] else "FAIL" for c in columns]
        print(f"  {model:<16} " + " ".join(f"{c:>10}" for c in cells))
    print("  successes: " + ", ".join(f"{c} {n}/{result['models']}" for c, n in result["successes"].items()))
    for r in result["ratios"]:
        print(f"  {r['name']}: {r['ratio']:.3f} (target {r['target']})")
    for r in result["rows"]:
        if not r["ok"]:
            print(f"  {r['model']}/{r['column']}: {r['detail']}")
    print(f"  migrate --write: {result['migration']}")
    print(f"  {result['seconds']} s wall, {result['cpu_seconds']} CPU s in workers ({result['workers']} at a time)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    p.add_argument("--only", nargs="*", metavar="MODEL")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--workers", type=int, default=2, help="worker processes at a time (default 2)")
    p.add_argument("--columns", nargs="+", choices=COLUMNS, default=list(COLUMNS),
                   help="columns to run (default all; 'dynamo' alone: the route='dynamo' figure)")
    p.add_argument("--worker", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.worker:
        columns, migrated, out_dir, results, *names = ns.worker
        _worker(columns.split(","), migrated, out_dir, results, names)
        return 0
    result = run(quick=ns.quick, only=ns.only, workers=ns.workers, columns=tuple(ns.columns))
    _print(result)
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
