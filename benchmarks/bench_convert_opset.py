"""``compat.convert_opset`` against ``onnx.version_converter.convert_version``: which share of the
opset bench's models (``bench_opsets.CASES``) each brings down from opset 18 to each opset 11..17,
and how long each takes, side by side.

Both start from the same file: the model as plain torch writes it (``torch.onnx.export(...,
dynamo=True, opset_version=18)``, input ``x`` with the case's dynamic axes). A conversion counts
only when the written model imports the asked opset, passes ``onnx.checker.check_model`` and
gives eager torch's output in onnxruntime (rtol 1e-3, atol 1e-4) at the example size and at
another size along the dynamic axes: a model that "converts" but fails any of these is a
failure. Rows: per opset, the count of ``convert_opset`` over the count of the version
converter (goal >= 1); and the median time of one pass over every (model, opset) that both
convert (load, convert; compat's side also runs onnx's checker and strict shape inference on its
result) as ``convert_opset`` / ``convert_version``, alternated in this process
(``_timing.alternate``). No asserts. Run: ``.venv/bin/python benchmarks/bench_convert_opset.py
[--quick]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench_opsets as models  # the opset bench's model set and its parity check
import torch
from _timing import alternate, ratio

OPSETS = tuple(range(11, 18))
WAYS = ("convert_opset", "onnx_converter")


def _export_18(case: models.Case, model: torch.nn.Module, path: str) -> None:
    """The model as plain torch 2.13 writes it at opset 18 (what a user brings to a converter)."""
    shapes = ({axis: name for axis, name in case.axes.items()},)
    with models._quiet(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (case.example(),), path, dynamo=True, opset_version=18, input_names=["x"],
                          output_names=["y"], dynamic_shapes=shapes)


def _ours(base: str, opset: int, out: str) -> str:
    import compat

    with models._quiet():
        compat.convert_opset(base, opset, out)
    return out


def _onnx(base: str, opset: int, out: str) -> str:
    import onnx
    import onnx.version_converter

    with models._quiet():
        converted = onnx.version_converter.convert_version(onnx.load(base), opset)
        onnx.save(converted, out)
    return out


def _verdict(make: Any, model: torch.nn.Module, case: models.Case, opset: int) -> tuple[bool, str | None]:
    """(whether a model was written, None when it passes the checker and has parity else why not)."""
    import onnx

    try:
        path = make()
    except Exception as exc:  # noqa: BLE001 - a failed conversion is "no parity"
        first = (str(exc).strip().splitlines() or [""])[0]
        return False, f"{type(exc).__name__}: {first[:120]}"
    try:
        onnx.checker.check_model(path)
    except Exception as exc:  # noqa: BLE001 - ValidationError and friends
        return True, f"checker: {' '.join(str(exc).split())[:120]}"
    return True, models._parity(path, model, case, opset)


def _timing(pairs: list[tuple[str, int]], quick: bool) -> list[dict[str, Any]]:
    """One row: a pass converting every (file, opset) pair that both sides convert (whatever the
    parity), ``convert_opset`` (which also checks its result) / ``convert_version``."""
    import onnx
    import onnx.version_converter

    import compat

    if not pairs:
        return []

    def ours() -> None:
        for base, opset in pairs:
            compat.convert_opset(base, opset)

    def theirs() -> None:
        for base, opset in pairs:
            onnx.version_converter.convert_version(onnx.load(base), opset)

    with models._quiet():
        times = alternate({"convert_opset": ours, "onnx_converter": theirs}, reps=3 if quick else 5)
    row = ratio(times, "convert_opset", "onnx_converter", "time_convert_opset_over_onnx_converter")
    row["pairs"] = len(pairs)
    return [row]


def run(quick: bool = False) -> dict[str, Any]:
    cases = [c for c in models.CASES if not quick or c.name in models.QUICK]
    opsets = OPSETS if not quick else (11, 13, 17)
    passed = {(way, opset): 0 for way in WAYS for opset in opsets}
    failures: dict[str, dict[str, str]] = {}
    both: list[tuple[str, int]] = []  # (file, opset) that both sides convert
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-convert-opset-") as tmp:
        for case in cases:
            torch.manual_seed(0)
            model = case.make().eval()
            base = os.path.join(tmp, f"{case.name}-18.onnx")
            try:
                _export_18(case, model, base)
            except Exception as exc:  # noqa: BLE001
                for opset in opsets:
                    for way in WAYS:
                        failures.setdefault(f"{way}@{opset}", {})[case.name] = f"export at 18: {type(exc).__name__}"
                continue
            for opset in opsets:
                out = os.path.join(tmp, f"{case.name}-{opset}")
                makers = {"convert_opset": lambda b=base, o=opset, p=out: _ours(b, o, p + "-ours.onnx"),
                          "onnx_converter": lambda b=base, o=opset, p=out: _onnx(b, o, p + "-onnx.onnx")}
                converted = 0
                for way, make in makers.items():
                    written, why = _verdict(make, model, case, opset)
                    if why is None:
                        passed[way, opset] += 1
                    else:
                        failures.setdefault(f"{way}@{opset}", {})[case.name] = why
                    converted += written
                if converted == len(makers):
                    both.append((base, opset))
        timing = _timing(both, quick)
    n = len(cases)
    ratios = []
    for opset in opsets:
        ours, theirs = passed["convert_opset", opset], passed["onnx_converter", opset]
        ratios.append({"name": f"share_convert_opset_over_onnx_converter@{opset}",
                       "ratio": round(ours / theirs, 3) if theirs else float(ours or 1),
                       "target": ">= 1", "numerator": "convert_opset: models with parity",
                       "denominator": "onnx version converter: models with parity",
                       "counts": {"convert_opset": ours, "onnx_converter": theirs, "models": n}})
    ratios += timing
    return {
        "models": [c.name for c in cases],
        "shares": {f"opset{o}": {w: round(passed[w, o] / n, 3) for w in WAYS} for o in opsets},
        "failures": failures,
        "total_s": round(time.perf_counter() - start, 1),
        "ratios": ratios,
        "convert_opset_at_least_onnx_converter_every_opset": all(
            passed["convert_opset", o] >= passed["onnx_converter", o] for o in opsets),
    }


def main() -> None:
    res = run(quick="--quick" in sys.argv)
    print(f"bench_convert_opset: {len(res['models'])} models {res['models']}, share with parity per opset")
    print(f"  {'opset':<8}" + "".join(f"{w:>16}" for w in WAYS))
    for key, row in res["shares"].items():
        print(f"  {key:<8}" + "".join(f"{row[w]:>16.2f}" for w in WAYS))
    for r in res["ratios"]:
        extra = f"  (target {r['target']})" if r.get("target") else f"  ({r.get('pairs')} model/opset pairs)"
        print(f"  {r['name']:<48} {r['ratio']:>7.3f}{extra}")
    for key, why in res["failures"].items():
        print(f"  no parity {key}: {why}")


if __name__ == "__main__":
    main()
