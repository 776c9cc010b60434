"""TorchScript-era export cases (issue 17): which share each way of exporting gets right.

The cases (``benchmarks/legacy_cases/``, 15 families: operators, shape-only and unused inputs,
in-place factories, Python scalars, control flow, RNNs, dynamic axes, pooling/interpolation,
normalization, opset 11-17 calls, legacy options, small conv nets, transformer layers) each
replay one legacy ``torch.onnx.export`` call with four contenders: plain torch's default exporter
(torch.export; legacy keywords it no longer takes fail the call, as a user would see), the
TorchScript exporter (``dynamo=False``), ``compat.export`` auto, and ``compat.export(...,
route="dynamo")``. A contender passes a case when the export returns, the model has the legacy
interface (the TorchScript exporter's graph inputs/outputs for the same call) and onnxruntime
matches eager at the example and at other sizes along the declared dynamic axes (see
``legacy_cases/harness.py``).

Rows (shares, no timing): each contender's share of cases passed; per family compat auto's
passes over the TorchScript exporter's (goal >= 1 on every family); the torch.export route
alone minus the TorchScript exporter in percentage points (goal >= -5). The JSON has every
case's verdict with a one-line reason per failure, and the opset each contender wrote.

Cases run in worker processes (a crash or a hang fails that step's contender, never the run),
each export in a fresh temp folder with a private route-memory folder, torch's output in the
workers' logs. ``python benchmarks/bench_legacy_cases.py [--quick] [--family F ...] [--case NAME
...] [--contender C ...] [--workers N] [--json PATH] [--list]`` (each list option may repeat). The
JSON gives each contender's largest difference from eager (``max_diff``) and the cases where
compat auto is worse than the TorchScript exporter (it fails where that passes, or its model is
farther from eager: ``auto_worse_than_torchscript``; goal: none).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _p in (str(HERE), str(HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

TITLE = "TorchScript-era export cases: share with the legacy interface and eager parity"
WORKERS = 2
SHORT = {"torch_default": "default", "torchscript": "ts", "compat_auto": "auto", "compat_dynamo": "dynamo"}


def _share(passed: int, total: int) -> float:
    return round(passed / total, 4) if total else 0.0


def summarize(rows: list[dict[str, Any]], contenders: tuple[str, ...]) -> dict[str, Any]:
    """Counts, shares, failures and the two goals from the cases' rows."""
    from legacy_cases import FAMILIES

    judged = [r for r in rows if "results" in r]
    families = [f for f in FAMILIES if any(r["family"] == f for r in judged)]
    counts = {f: {c: sum(r["results"][c]["ok"] for r in judged if r["family"] == f) for c in contenders}
              for f in families}
    sizes = {f: sum(1 for r in judged if r["family"] == f) for f in families}
    total = {c: sum(counts[f][c] for f in families) for c in contenders}
    failures = {c: {r["case"]: f"{r['results'][c]['stage']}: {r['results'][c]['reason']}"
                    for r in judged if not r["results"][c]["ok"]} for c in contenders}
    opset_mismatch: dict[str, dict[str, Any]] = {c: {} for c in contenders}
    for r in judged:
        want = r.get("opset_requested")
        for c in contenders:
            got = r["results"][c].get("opset")
            if want and got and got != want:
                opset_mismatch[c][r["case"]] = f"asked {want}, wrote {got}"
    routes: dict[str, int] = {}
    for r in judged:
        if "compat_auto" in r["results"] and r["results"]["compat_auto"]["ok"]:
            route = str(r["results"]["compat_auto"].get("route"))
            routes[route] = routes.get(route, 0) + 1
    return {
        "cases": len(judged), "families": sizes, "counts": counts, "passed": total,
        "auto_worse_than_torchscript": auto_worse_than_torchscript(judged) if {"compat_auto", "torchscript"} <= set(
            contenders) else {},
        "shares": {"all": {c: _share(total[c], len(judged)) for c in contenders},
                   **{f: {c: _share(counts[f][c], sizes[f]) for c in contenders} for f in families}},
        "failures": failures, "case_errors": {r["case"]: r["case_error"] for r in rows if "case_error" in r},
        "opset_not_as_asked": opset_mismatch, "auto_routes_of_passes": routes,
    }


#: a model counts as less precise than another when its largest difference from eager is more
#: than this many times the other's and above ``PRECISION_FLOOR`` (float32 rounding noise)
PRECISION_FACTOR, PRECISION_FLOOR = 4.0, 1e-6


def auto_worse_than_torchscript(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Cases where compat auto is worse than the TorchScript exporter: it fails where the
    TorchScript exporter passes, or both pass and auto's model is farther from eager."""
    worse = {}
    for r in rows:
        auto, ts = r["results"]["compat_auto"], r["results"]["torchscript"]
        if ts["ok"] and not auto["ok"]:
            worse[r["case"]] = f"auto fails ({auto['stage']}: {auto['reason']}); TorchScript passes"
        elif ts["ok"] and auto["ok"]:
            a, t = auto.get("max_diff"), ts.get("max_diff")
            if a is not None and t is not None and a > PRECISION_FLOOR and a > PRECISION_FACTOR * t:
                worse[r["case"]] = (f"auto's model differs from eager by {a:.3g}, TorchScript's by {t:.3g} "
                                    f"(auto took route {auto.get('route')})")
    return worse


def _ratio_rows(summary: dict[str, Any], contenders: tuple[str, ...]) -> list[dict[str, Any]]:
    from legacy_cases.harness import TITLES

    n, rows = summary["cases"], []
    for c in contenders:
        rows.append({"name": f"share passed: {TITLES[c]}", "ratio": summary["shares"]["all"][c], "target": None,
                     "numerator": f"{TITLES[c]}: cases passed ({summary['passed'][c]})",
                     "denominator": f"cases ({n})"})
    if {"compat_auto", "torchscript"} <= set(contenders):
        worst = None
        for family, count in summary["counts"].items():
            auto, ts = count["compat_auto"], count["torchscript"]
            value = auto / ts if ts else (1.0 if auto == 0 else float(auto))
            rows.append({"name": f"{family}: compat auto / TorchScript", "ratio": round(value, 3), "target": ">= 1",
                         "numerator": f"auto: {auto}/{summary['families'][family]}",
                         "denominator": f"TorchScript: {ts}/{summary['families'][family]}"})
            worst = value if worst is None else min(worst, value)
        rows.append({"name": "worst family: compat auto / TorchScript", "ratio": round(worst or 0.0, 3),
                     "target": ">= 1", "numerator": "compat auto: cases passed",
                     "denominator": "TorchScript: cases passed"})
    if {"compat_dynamo", "torchscript"} <= set(contenders):
        gap = 100 * (summary["shares"]["all"]["compat_dynamo"] - summary["shares"]["all"]["torchscript"])
        rows.append({"name": "torch.export route alone - TorchScript (points)", "ratio": round(gap, 2),
                     "target": ">= -5", "numerator": "compat route=dynamo: % passed",
                     "denominator": "TorchScript: % passed (difference, not a ratio)"})
    return rows


def print_table(summary: dict[str, Any], contenders: tuple[str, ...], stream: Any = None) -> None:
    from legacy_cases.harness import TITLES

    stream = stream or sys.stdout
    width = max(len(TITLES[c]) for c in contenders) + 2
    print(f"\n{TITLE}", file=stream)
    print(f"  {'family':<16}{'cases':>6}" + "".join(f"{TITLES[c]:>{width}}" for c in contenders), file=stream)
    for family, size in summary["families"].items():
        cells = [f"{summary['counts'][family][c]} ({100 * summary['shares'][family][c]:.0f}%)" for c in contenders]
        print(f"  {family:<16}{size:>6}" + "".join(f"{cell:>{width}}" for cell in cells), file=stream)
    cells = [f"{summary['passed'][c]} ({100 * summary['shares']['all'][c]:.1f}%)" for c in contenders]
    print(f"  {'all':<16}{summary['cases']:>6}" + "".join(f"{cell:>{width}}" for cell in cells), file=stream)
    if summary["case_errors"]:
        print(f"  not judged (the case itself failed): {summary['case_errors']}", file=stream)


def _progress(total: int, contenders: tuple[str, ...]) -> Any:
    done = [0]

    def show(row: dict[str, Any]) -> None:
        done[0] += 1
        if "results" in row:
            verdicts = "  ".join(f"{SHORT.get(c, c)} {'ok' if row['results'][c]['ok'] else row['results'][c]['stage']}"
                                 for c in contenders)
        else:
            verdicts = f"not judged: {row.get('case_error')}"
        print(f"  [{done[0]:>3}/{total}] {row['case']:<40} {verdicts}", flush=True)

    return show


def run(quick: bool = False, families: list[str] | None = None, cases: list[str] | None = None,
        workers: int | None = None, contenders: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Replay the cases (``quick``: the quick subset) with every contender; ``workers=0`` runs
    them in this process (no crash isolation)."""
    import legacy_cases
    from legacy_cases.harness import CONTENDERS, evaluate
    from legacy_cases.runner import run_cases

    contenders = tuple(contenders or CONTENDERS)
    selected = legacy_cases.select(names=cases, families=families, quick=quick)
    requested = {c.name: c.kwargs.get("opset_version") for c in selected}
    workers = WORKERS if workers is None else workers
    show = _progress(len(selected), contenders)
    start = time.perf_counter()
    if workers == 0:
        rows = []
        for case in selected:
            rows.append(evaluate(case, contenders))
            show(rows[-1])
    else:
        rows = run_cases([c.name for c in selected], workers=workers, contenders=contenders, on_result=show)
    for row in rows:
        row["opset_requested"] = requested.get(row["case"])
    summary = summarize(rows, contenders)
    print_table(summary, contenders)
    ratios = _ratio_rows(summary, contenders)
    result: dict[str, Any] = {"benchmark": "legacy_cases", "title": TITLE, "subset": "quick" if quick else "all",
                              "contenders": list(contenders), "total_s": round(time.perf_counter() - start, 1),
                              "ratios": ratios, **summary, "results": rows}
    if {"compat_auto", "torchscript"} <= set(contenders):
        result["auto_at_least_torchscript_every_family"] = all(
            count["compat_auto"] >= count["torchscript"] for count in summary["counts"].values())
    if {"compat_dynamo", "torchscript"} <= set(contenders):
        shares = summary["shares"]["all"]
        result["dynamo_route_within_5_points_of_torchscript"] = shares["compat_dynamo"] >= shares["torchscript"] - 0.05
    return result


def main(argv: list[str] | None = None) -> int:
    from legacy_cases import FAMILIES

    p = argparse.ArgumentParser(description=TITLE)
    p.add_argument("--quick", action="store_true", help="the quick subset (about one case per family)")
    p.add_argument("--family", nargs="+", action="extend", metavar="F",
                   help=f"only these families (repeatable): {', '.join(FAMILIES)}")
    p.add_argument("--case", nargs="+", action="extend", metavar="NAME", help="only these cases (repeatable)")
    p.add_argument("--contender", nargs="+", action="extend", metavar="C", choices=SHORT,
                   help=f"only these contenders (repeatable; default all): {', '.join(SHORT)}")
    p.add_argument("--workers", type=int, default=WORKERS, help="worker processes (0: in this process)")
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    ns = p.parse_args(argv)
    if ns.list:
        import legacy_cases

        for case in legacy_cases.select(names=ns.case, families=ns.family, quick=ns.quick):
            print(f"{case.family:<16} {case.name:<40} {case.note}")
        return 0
    contenders = tuple(c for c in SHORT if c in ns.contender) if ns.contender else None
    result = run(quick=ns.quick, families=ns.family, cases=ns.case, workers=ns.workers, contenders=contenders)
    print()
    for r in result["ratios"]:
        target = f"  (target {r['target']})" if r.get("target") else ""
        print(f"  {r['name']:<52} {r['ratio']:>8.3f}{target}")
    worse = result.get("auto_worse_than_torchscript", {})
    if {"compat_auto", "torchscript"} <= set(result["contenders"]):
        print(f"\ncompat auto worse than the TorchScript exporter ({len(worse)}):")
        for case, why in worse.items():
            print(f"  {case:<40} {why}")
    for contender, failed in result["failures"].items():
        if failed:
            print(f"\nfailed with {contender} ({len(failed)}):")
            for case, why in failed.items():
                print(f"  {case:<40} {why}")
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
