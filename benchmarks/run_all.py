"""``make bench``: run every ``benchmarks/bench_*.py`` module's ``run()`` in one process, print a
compact table of the side-by-side ratios and write ``benchmarks/results/bench.json``. No asserts.

``python benchmarks/run_all.py [--quick] [--only NAME ...] [--json PATH]``
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

#: benchmarks other issues deliver; a missing one is reported, not an error
EXPECTED = (
    "bench_dispatch",
    "bench_memory",
    "bench_latency",
    "bench_migrate",
    "bench_transformer",
    "bench_hf",
    "bench_opsets",
    "bench_model_state",
    "bench_validate",
    "bench_convert_opset",
    "bench_legacy_cases",
    "bench_architectures",
    "bench_layers",
    "bench_dynamo_overhead",
    "bench_acceptance",
    "bench_baked",
    "bench_real_symbolics",
)


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _call(run: Any, quick: bool) -> Any:
    params = inspect.signature(run).parameters
    return run(quick=True) if quick and "quick" in params else run()


def rows_of(result: Any) -> list[tuple[str, float, str]]:
    """(name, ratio, note) rows of a result's ``ratios`` list; the note names the target and the
    numerator / denominator."""
    if not isinstance(result, dict) or not isinstance(result.get("ratios"), list):
        return []
    rows = []
    for r in result["ratios"]:
        if isinstance(r, dict) and isinstance(r.get("ratio"), (int, float)):
            target = f"target {r['target']}  " if r.get("target") else ""
            rows.append((r["name"], r["ratio"], f"{target}[{r.get('numerator')} / {r.get('denominator')}]"))
    return rows


def facts_of(result: Any) -> list[tuple[str, bool]]:
    """Yes/no findings a benchmark reports beside its ratios (e.g. ``runs_other_sizes_legacy``)."""
    if not isinstance(result, dict):
        return []
    return [(k, v) for k, v in result.items() if isinstance(v, bool)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="run every benchmarks/bench_*.py and collect the ratios")
    p.add_argument("--quick", action="store_true", help="fewer repetitions where a benchmark supports it")
    p.add_argument("--only", nargs="*", metavar="NAME", help="e.g. bench_memory")
    p.add_argument("--json", metavar="PATH", default=str(HERE / "results" / "bench.json"))
    ns = p.parse_args(argv)
    found = {path.stem: path for path in sorted(HERE.glob("bench_*.py"))}
    names = [n for n in (*EXPECTED, *sorted(set(found) - set(EXPECTED))) if not ns.only or n in ns.only]
    results: dict[str, Any] = {}
    table: list[tuple[str, str, float, str]] = []
    facts: list[tuple[str, str, bool]] = []
    start = time.perf_counter()
    for name in names:
        if name not in found:
            print(f"[{name}] not present: skipped", flush=True)
            results[name] = {"skipped": "not present"}
            continue
        print(f"[{name}] running ...", flush=True)
        t = time.perf_counter()
        try:
            result = _call(_load(found[name]).run, ns.quick)
        except Exception as exc:  # noqa: BLE001 - one broken benchmark must not hide the others
            traceback.print_exc()
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        elapsed = time.perf_counter() - t
        print(f"[{name}] done in {elapsed:.0f} s", flush=True)
        results[name] = result
        table += [(name, *row) for row in rows_of(result)]
        facts += [(name, *fact) for fact in facts_of(result)]
    total = time.perf_counter() - start
    print("\nside-by-side ratios (timings: medians of alternating runs in this process; bench_opsets and "
          "bench_hf: counts of models with parity)")
    width = max((len(r[1]) for r in table), default=20)
    for bench, row, value, note in table:
        print(f"  {bench:<18} {row:<{width}}  {value:>8.3f}  {note}")
    if facts:
        print("\nfindings")
        for bench, key, value in facts:
            print(f"  {bench:<18} {key:<{width}}  {'yes' if value else 'no':>8}")
    print(f"\n{len(table)} ratio(s) from {sum(1 for r in results.values() if 'ratios' in r or rows_of(r))} "
          f"benchmark(s) in {total:.0f} s")
    out = Path(ns.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"python": platform.python_version(), "platform": platform.platform(), "total_s": round(total, 1),
            "quick": ns.quick, "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
    try:
        import torch

        meta["torch"] = torch.__version__
        meta["threads"] = torch.get_num_threads()
    except ImportError:
        pass
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2, default=str) + "\n")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
