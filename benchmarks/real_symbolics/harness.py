"""Export each real-symbolic case on one exporter and judge it against the TorchScript exporter's.

Modes: ``torchscript`` (torch's TorchScript exporter, the reference) and ``dynamo``
(``compat.export(..., route="dynamo")``; hidden or not is the process's
``TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT``). ``python -m real_symbolics.harness --mode M --out DIR``
(from benchmarks/) writes ``DIR/<case>.onnx`` and ``DIR/results.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .case import Case, applied, symbolic_names
from .cases import CASES

#: node kinds both exporters emit around a symbolic in their own ways
_PLUMBING = {"Constant", "Identity", "Cast", "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat",
             "Reshape", "Slice", "ConstantOfShape", "Expand"}


def export(case: Case, mode: str, path: Path) -> dict[str, Any]:
    """Export ``case`` with ``mode``'s exporter to ``path``: {"ok", "error", "names"}."""
    import torch

    setup = case.build()
    names = sorted(symbolic_names(setup))
    options: dict[str, Any] = {"opset_version": setup.opset}
    if setup.custom_opsets:
        options["custom_opsets"] = setup.custom_opsets
    try:
        with applied(setup), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if mode == "torchscript":
                torch.onnx.export(setup.model.eval(), setup.args, str(path), dynamo=False, **options)
            else:
                import compat

                compat.export(setup.model.eval(), setup.args, str(path), route="dynamo", **options)
    except Exception as exc:  # noqa: BLE001 - the verdict records it
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000], "names": names}
    return {"ok": True, "names": names}


def custom_nodes(proto: Any) -> list[tuple[Any, ...]]:
    import onnx

    out = []
    for node in proto.graph.node:
        if node.domain not in ("", "ai.onnx"):
            attrs = {}
            for a in node.attribute:
                v = onnx.helper.get_attribute_value(a)
                v = v.decode() if isinstance(v, bytes) else v
                if isinstance(v, float):
                    v = round(v, 5)
                if isinstance(v, list):
                    v = [round(x, 5) if isinstance(x, float) else x for x in v]
                attrs[a.name] = v if not hasattr(v, "dims") else "tensor"
            out.append((node.domain, node.op_type, json.dumps(attrs, sort_keys=True, default=str),
                        len(node.input), len(node.output)))
    return out


def op_kinds(proto: Any) -> set[tuple[str, str]]:
    return {(n.domain or "", n.op_type) for n in proto.graph.node if n.op_type not in _PLUMBING}


def run_ort(proto: Any, args: tuple[Any, ...]) -> list[np.ndarray] | None:
    """Outputs at the example inputs, or None where onnxruntime cannot run the model."""
    import onnxruntime as ort

    try:
        sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - custom ops of another runtime: structure only
        return None
    tensors = [a for a in args if hasattr(a, "numpy")]
    feeds = {i.name: t.numpy() for i, t in zip(sess.get_inputs(), tensors)}
    try:
        return sess.run(None, feeds)
    except Exception:  # noqa: BLE001
        return None


def judge(case: Case, reference: dict[str, Any], ours: dict[str, Any], ref_path: Path, our_path: Path) -> dict[str, Any]:
    """match / differ / refused / silent / no-reference, with the reason."""
    import onnx

    if not reference["ok"]:
        return {"verdict": "no-reference", "reason": reference["error"][:300]}
    if not ours["ok"]:
        named = [n for n in ours["names"] if n in ours["error"]]
        return {"verdict": "refused" if named else "differ",
                "reason": ("names " + ", ".join(named) + ": " if named else "unnamed failure: ") + ours["error"][:400]}
    ref, new = onnx.load(str(ref_path)), onnx.load(str(our_path))
    ref_custom, new_custom = custom_nodes(ref), custom_nodes(new)
    kinds_missing = op_kinds(ref) - op_kinds(new)
    if ref_custom and not new_custom or ref_custom and not {c[:2] for c in ref_custom} <= {c[:2] for c in new_custom}:
        return {"verdict": "silent", "reason": f"exported without the custom node(s) {[c[:2] for c in ref_custom]}"}
    if ref_custom != new_custom:
        return {"verdict": "differ", "reason": f"custom nodes {new_custom} != TorchScript's {ref_custom}"}
    if kinds_missing:
        verdict = "silent" if not ref_custom else "differ"
        return {"verdict": verdict, "reason": f"no {sorted(kinds_missing)} as the TorchScript exporter's model has"}
    setup = case.build()
    if not setup.compare_values:
        return {"verdict": "match", "reason": "same nodes (a random model: values not compared)"}
    want, got = run_ort(ref, setup.args), run_ort(new, setup.args)
    if want is not None:
        if got is None:
            return {"verdict": "differ", "reason": "onnxruntime runs the TorchScript exporter's model, not ours"}
        if len(want) != len(got) or any(w.shape != g.shape or not np.allclose(w, g, rtol=1e-4, atol=1e-5)
                                        for w, g in zip(want, got)):
            return {"verdict": "differ", "reason": "onnxruntime values differ from the TorchScript exporter's model"}
        return {"verdict": "match", "reason": "same custom nodes and onnxruntime values"}
    return {"verdict": "match", "reason": "same custom nodes (domain, op, attributes, arity)"}


def run(mode: str, out: Path, only: list[str] | None = None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for case in CASES:
        if only and case.name not in only:
            continue
        missing = case.missing()
        if missing:
            results[case.name] = {"ok": False, "skipped": missing}
            continue
        try:
            results[case.name] = export(case, mode, out / f"{case.name}.onnx")
        except Exception as exc:  # noqa: BLE001 - a case that cannot even be built
            results[case.name] = {"ok": False, "case_error": f"{type(exc).__name__}: {exc}",
                                  "trace": traceback.format_exc()[-1500:]}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("torchscript", "dynamo"), required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--case", nargs="*")
    a = p.parse_args(argv)
    run(a.mode, Path(a.out), a.case)


if __name__ == "__main__":
    sys.exit(main())
