"""Real third-party symbolics (issue 31): which export as the TorchScript exporter exports them.

The cases (``benchmarks/real_symbolics/``: mmcv and mmdeploy ops from their pinned wheels,
onnxruntime's contrib ops, torchvision's ops, transformers' XSoftmax/XDropout) are exported by
three contenders, each in its own process: the TorchScript exporter (the reference),
``compat.export(..., route="dynamo")`` with TorchScript present, and the same with
``TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT=1``. Each result is judged against the reference: *match*
(same custom nodes - domain, op, attributes, arity -, the reference's op kinds, and the same
onnxruntime values where onnxruntime runs the model), *differ*, *refused* (the export failed
naming the symbolic) or *SILENT skip* (exported without the symbolic's nodes, no error). Cases
whose package is absent are skipped; cases the TorchScript exporter itself cannot export on
this torch are counted apart (no reference). Targets: hidden >= 40/45 match, 0 silent; present
>= 41/45. ``python benchmarks/bench_real_symbolics.py [--case NAME ...] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _p in (str(HERE), str(HERE.parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

TITLE = "real third-party symbolics: match with the TorchScript exporter, TorchScript present and hidden"
CONTENDERS = {"torchscript": ("torchscript", {}), "present": ("dynamo", {}),
              "hidden": ("dynamo", {"TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT": "1"})}
VERDICTS = ("match", "differ", "refused", "silent")


def _worker(contender: str, out: Path, only: list[str] | None) -> dict[str, Any]:
    mode, extra = CONTENDERS[contender]
    env = {**os.environ, **extra}
    if contender != "hidden":
        env.pop("TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT", None)
    cmd = [sys.executable, "-m", "real_symbolics.harness", "--mode", mode, "--out", str(out)]
    if only:
        cmd += ["--case", *only]
    proc = subprocess.run(cmd, cwd=HERE, env=env, capture_output=True, text=True, timeout=3600, check=False)
    results = out / "results.json"
    if not results.exists():
        raise RuntimeError(f"{contender} worker failed: {proc.stderr[-2000:]}")
    return json.loads(results.read_text())


def summarize(judged: dict[str, dict[str, dict[str, str]]], skipped: dict[str, str],
              no_reference: dict[str, str]) -> dict[str, Any]:
    counts = {c: {v: sum(1 for j in judged.values() if j[c]["verdict"] == v) for v in VERDICTS}
              for c in ("present", "hidden")}
    n = len(judged)
    return {
        "cases": n + len(skipped) + len(no_reference), "judged": n, "counts": counts,
        "skipped": skipped, "no_reference": no_reference,
        "not_matching": {c: {name: f"{j[c]['verdict']}: {j[c]['reason']}" for name, j in judged.items()
                             if j[c]["verdict"] != "match"} for c in ("present", "hidden")},
        "ratios": [
            {"name": f"real symbolics matching the TorchScript exporter's model, {c}",
             "ratio": round(counts[c]["match"] / n, 4) if n else 0.0,
             "target": ">= 40/45" if c == "hidden" else ">= 41/45",
             "numerator": f"{counts[c]['match']} match", "denominator": f"{n} cases with a reference",
             "reps": 1} for c in ("hidden", "present")],
        "no_silent_skip_hidden": counts["hidden"]["silent"] == 0,
        "no_silent_skip_present": counts["present"]["silent"] == 0,
    }


def run(quick: bool = False, only: list[str] | None = None) -> dict[str, Any]:
    from real_symbolics import sources
    from real_symbolics.cases import CASES
    from real_symbolics.harness import judge

    sources.fetch()
    with tempfile.TemporaryDirectory(prefix="bench-real-symbolics-") as tmp:
        outs = {c: Path(tmp) / c for c in CONTENDERS}
        results = {c: _worker(c, outs[c], only) for c in CONTENDERS}
        judged, skipped, no_reference = {}, {}, {}
        for case in CASES:
            ref = results["torchscript"].get(case.name)
            if ref is None:
                continue
            if "skipped" in ref or "case_error" in ref:
                skipped[case.name] = ref.get("skipped") or ref["case_error"]
                continue
            if not ref["ok"]:
                no_reference[case.name] = ref["error"][:300]
                continue
            row = {}
            for c in ("present", "hidden"):
                ours = results[c][case.name]
                if "case_error" in ours:
                    row[c] = {"verdict": "differ", "reason": ours["case_error"]}
                    continue
                row[c] = judge(case, ref, ours, outs["torchscript"] / f"{case.name}.onnx",
                               outs[c] / f"{case.name}.onnx")
            judged[case.name] = row
    return {"title": TITLE, **summarize(judged, skipped, no_reference), "verdicts": judged}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=TITLE)
    p.add_argument("--case", nargs="*")
    p.add_argument("--json", metavar="PATH")
    a = p.parse_args(argv)
    result = run(only=a.case)
    print(TITLE)
    print(f"  cases: {result['cases']}, with a TorchScript reference: {result['judged']}, "
          f"skipped (package absent): {len(result['skipped'])}, no reference: {len(result['no_reference'])}")
    for c in ("present", "hidden"):
        k = result["counts"][c]
        print(f"  {c:<8} match {k['match']:>3}  differ {k['differ']:>3}  refused-by-name {k['refused']:>3}  "
              f"SILENT skip {k['silent']:>3}")
    for c, rows in result["not_matching"].items():
        for name, why in rows.items():
            print(f"    {c} {name}: {why[:200]}")
    for name, why in {**result["skipped"], **result["no_reference"]}.items():
        print(f"    not judged {name}: {why[:160]}")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
