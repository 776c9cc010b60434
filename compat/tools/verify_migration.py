"""``torch-onnx-compat verify-migration OLD_LEDGER NEW_LEDGER``: did the migration change a model?

OLD_LEDGER is ``compat run --ledger`` of the original code (the shim), NEW_LEDGER ``compat run
--observe --ledger`` of the migrated code (plain torch, as written). For every call site the
models the two runs wrote are compared: opset per domain, input names in graph order (which name
is bound to which graph position), output names, dtypes and dims (dim_params), single file or
external data, custom domains and nodes, and onnxruntime numerics on the same random inputs at
the recorded example shapes and at another size along every dynamic axis (dim_param) of the
original model. Exit status: 0 every call exports the same model, 1 a difference (or a call
that cannot be compared: an output overwritten since, a call seen in one run only), 2 usage
error.

Call sites are matched across the runs by their file relative to the project root (the
records' ``call_site_rel``) and then, within a file, by the line mapping of the two source files
when both are on disk (the original tree and the migrated copy: the rewriter moves lines), else
by the order of the call sites in the file (a rewrite never adds or drops an export call). The
k-th export of a call site in one run is compared with the k-th in the other (a call site that
serves several models: same order in both runs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from compat import commands
from compat.records.call_states import merge_post_steps, model_path

PROG = commands.VERIFY_MIGRATION
ATOL, RTOL = 1e-4, 1e-3
SAME, DIFFERS, UNVERIFIABLE, ONLY_OLD, ONLY_NEW, BOTH_FAILED = (
    "same", "differs", "cannot compare", "only in the old run", "only in the new run", "both failed")
PASSING = (SAME, BOTH_FAILED)


@dataclass
class Site:
    """One call site's records of one run, in the order they were written."""

    file: str  # relative to the project root where known, else the absolute path
    line: int
    path: str  # the absolute path recorded
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Row:
    old: str | None
    new: str | None
    index: int
    model: str | None
    verdict: str
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_sites(path: str) -> dict[str, dict[int, Site]]:
    """A ledger's records grouped by file (relative to the project root) and line."""
    from compat.records import ledger as ledger_file
    from compat.records.sites import split_site

    out: dict[str, dict[int, Site]] = {}
    seen: dict[str, dict[str, Any]] = {}
    # a post-step's record stands for its call: the file as the step left it (observe.post_step)
    for rec in merge_post_steps(ledger_file.read([path])):
        site = split_site(rec.get("call_site"))
        if site is None:
            continue
        rel = split_site(rec.get("call_site_rel"))
        file = rel[0] if rel and rel[1] == site[1] else site[0]
        found = out.setdefault(file, {}).setdefault(site[1], Site(file, site[1], site[0]))
        found.records.append(rec)
        _mark_overwritten(rec, seen)
    return out


def _mark_overwritten(rec: dict[str, Any], seen: dict[str, dict[str, Any]]) -> None:
    """A later export of the same run writing the same model file overwrote the earlier one's
    (``_overwritten_by``: the later call site); a script that edits its own file is no overwrite."""
    path = model_path(rec)
    if path is None:
        return
    earlier = seen.get(path)
    if earlier is not None:
        earlier["_overwritten_by"] = str(rec.get("call_site") or "?")
    seen[path] = rec


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def pair_sites(old: Mapping[int, Site], new: Mapping[int, Site]) -> list[tuple[Site | None, Site | None]]:
    """The call sites of one file matched across the runs: by the line mapping of the two sources
    when both files are on disk and differ, the rest by their order in the file."""
    pairs: list[tuple[Site | None, Site | None]] = []
    left, right = sorted(old), sorted(new)
    if left and right:
        a, b = old[left[0]].path, new[right[0]].path
        old_text, new_text = (_read_text(a), _read_text(b)) if a != b else (None, None)
        if old_text is not None and new_text is not None and old_text != new_text:
            from migration.ledger import shift_lines

            moved = shift_lines({line: line for line in left}, old_text, new_text) or {}
            for new_line, old_line in sorted(moved.items()):
                if new_line in right and old_line in left:
                    pairs.append((old[old_line], new[new_line]))
                    left.remove(old_line)
                    right.remove(new_line)
    for i in range(max(len(left), len(right))):
        pairs.append((old[left[i]] if i < len(left) else None, new[right[i]] if i < len(right) else None))
    return sorted(pairs, key=lambda p: (p[0] or p[1]).line)  # type: ignore[union-attr]


def compare_records(old: Mapping[str, Any], new: Mapping[str, Any], atol: float = ATOL,
                    rtol: float = RTOL) -> tuple[str, list[str], list[str]]:
    """(verdict, differences, notes) of one export in each run."""
    ok_old, ok_new = old.get("status", "ok") == "ok", new.get("status", "ok") == "ok"
    if not ok_old and not ok_new:
        return BOTH_FAILED, [], [f"old: {old.get('error')}", f"new: {new.get('error')}"]
    if not ok_new:
        return DIFFERS, [f"the migrated call failed: {new.get('error')}"], []
    if not ok_old:
        why = f"the original call failed under the shim ({old.get('error')}); the migrated call exports"
        return DIFFERS, [why], []
    problems: list[str] = []
    left: list[str] = []
    paths = {}
    for side, rec in (("old", old), ("new", new)):
        path = model_path(rec)
        if path is None:
            problems.append(f"{side} run: no model file recorded (a ledger written before "
                            "verify-migration existed, or a call whose output was not saved)")
        elif not isinstance(rec.get("output_files"), Mapping):
            problems.append(f"{side} run: no fingerprint of {path} recorded (record it again "
                            f"with {commands.RUN} --ledger)")
        else:
            from compat.records.output_facts import changed_since

            changed = changed_since(rec["output_files"])
            if changed and rec.get("_overwritten_by"):
                problems.append(f"{side} run's output was overwritten by a later export of that run "
                                f"({rec['_overwritten_by']}): {', '.join(changed)}; run the two "
                                "into separate output folders")
            elif changed:  # the script itself edited its file (yolov5 adds metadata): compare that
                left.append(f"the {side} run's script changed {', '.join(changed)} after the export "
                            "(no later export wrote it): compared the file the script left")
        paths[side] = path
    if problems:
        return UNVERIFIABLE, problems, []
    differences, notes, ran = compare_model_files(paths["old"], paths["new"],
                                                  old.get("example_inputs") or [], atol, rtol)
    notes = left + notes
    if differences:
        return DIFFERS, _why_differs(paths["old"], paths["new"]) + differences, notes
    if not ran:  # "same" means onnxruntime ran both models at the chosen shapes
        return UNVERIFIABLE, [("only the graphs' structure was compared: onnxruntime did not run "
                               "both models (see the notes)")], notes
    return SAME, differences, notes


def _why_differs(old_path: str, new_path: str) -> list[str]:
    """The cause of a numeric difference when the models say it: weights drawn anew in each run
    (no seed), or random ops in the graph (train-mode Dropout)."""
    import onnx
    from onnx import numpy_helper

    try:
        a, b = (onnx.load(p, load_external_data=True) for p in (old_path, new_path))
    except Exception:  # noqa: BLE001 - no explanation, the numbers still speak
        return []
    out = []
    random_ops = {"RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike", "Bernoulli"}
    consts = {i.name: numpy_helper.to_array(i) for i in b.graph.initializer if not i.dims}
    train_dropout = [n for n in b.graph.node if n.op_type == "Dropout" and len(n.input) > 2
                     and n.input[2] and bool(consts.get(n.input[2], True))]
    if train_dropout or any(n.op_type in random_ops for n in b.graph.node):
        out.append("outputs are random: the model exports train-mode Dropout (call model.eval() "
                   "before the export)")
    wa = {i.name: numpy_helper.to_array(i) for i in a.graph.initializer}
    wb = {i.name: numpy_helper.to_array(i) for i in b.graph.initializer}
    shaped_a = sorted((w.shape, str(w.dtype)) for w in wa.values() if w.size > 1)
    shaped_b = sorted((w.shape, str(w.dtype)) for w in wb.values() if w.size > 1)
    if shaped_a and shaped_a == shaped_b:
        import numpy as np

        sums_a = sorted(float(np.abs(w.astype(np.float64)).sum()) for w in wa.values() if w.size > 1)
        sums_b = sorted(float(np.abs(w.astype(np.float64)).sum()) for w in wb.values() if w.size > 1)
        if not np.allclose(sums_a, sums_b, rtol=1e-6, atol=1e-9):
            out.append("weights differ between runs: the script does not seed its model")
    return out


# -- the models ------------------------------------------------------------------------------

def _describe(path: str) -> dict[str, Any]:
    import onnx

    from compat.tools.check import describe

    return describe(onnx.load(path, load_external_data=False), path)


def _layout(desc: Mapping[str, Any], path: str) -> str:
    files = desc["external_data"]["files"]
    if not files:
        return "single file"
    base = os.path.basename(path)
    names = ", ".join(f["location"].replace(base, "<f>") for f in files)
    return f"external data ({desc['external_data']['tensors']} tensor(s) in {names})"


def _dims(dims: Sequence[Any] | None) -> str:
    return "(no shape)" if dims is None else "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def structure_differences(a: Mapping[str, Any], b: Mapping[str, Any], path_a: str, path_b: str) -> list[str]:
    """What differs between two ``_describe`` results (old ``a``, migrated ``b``)."""
    out: list[str] = []
    if a["opsets"] != b["opsets"]:
        out.append(f"opset per domain: {a['opsets']} -> {b['opsets']}")
    for kind in ("inputs", "outputs"):
        names_a, names_b = [v["name"] for v in a[kind]], [v["name"] for v in b[kind]]
        if names_a != names_b:
            what = "input names by graph position" if kind == "inputs" else "output names"
            out.append(f"{what}: {names_a} -> {names_b}")
        by_b = {v["name"]: v for v in b[kind]}
        for v in a[kind]:
            w = by_b.get(v["name"])
            if w is None:
                continue
            if v["type"] != w["type"]:
                out.append(f"{kind[:-1]} {v['name']!r} dtype: {v['type']} -> {w['type']}")
            if v["dims"] != w["dims"]:
                out.append(f"{kind[:-1]} {v['name']!r} dims: {_dims(v['dims'])} -> {_dims(w['dims'])}")
    layout_a, layout_b = _layout(a, path_a), _layout(b, path_b)
    if layout_a != layout_b:
        out.append(f"layout: {layout_a} -> {layout_b}")
    if a["custom_domains"] != b["custom_domains"]:
        out.append(f"custom domains: {a['custom_domains']} -> {b['custom_domains']}")
    nodes_a = {(n["domain"], n["op_type"]): n["count"] for n in a["custom_nodes"]}
    nodes_b = {(n["domain"], n["op_type"]): n["count"] for n in b["custom_nodes"]}
    if nodes_a != nodes_b:
        def fmt(nodes: Mapping[tuple[str, str], int]) -> str:
            return ", ".join(f"{d}::{op} x{n}" for (d, op), n in sorted(nodes.items())) or "none"

        out.append(f"custom nodes: {fmt(nodes_a)} -> {fmt(nodes_b)}")
    return out


def _aligned_shapes(inputs: Sequence[Mapping[str, Any]], examples: Sequence[Any]) -> tuple[dict[str, list[int]], bool]:
    """Concrete shapes of the model's ``inputs`` at the recorded example: each graph input takes
    a recorded tensor not taken yet of its rank whose fixed dims agree and whose sizes agree with
    those of the dim_params already bound, of its dtype where one is, the next in the recorded
    order first (a dict of keyword inputs is recorded in the dict's order, the graph takes them
    in forward()'s); (shapes by name, all found)."""
    tensors = [e for e in examples if isinstance(e, Mapping) and isinstance(e.get("shape"), list)]
    shapes: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}  # dim_param -> size bound so far
    taken: set[int] = set()
    found = True
    j = 0
    for v in inputs:
        dims = v["dims"] or []

        def fits(k: int, dims: Sequence[Any] = dims) -> bool:
            shape = tensors[k]["shape"]
            return k not in taken and len(shape) == len(dims) and all(
                d == s if isinstance(d, int) else sizes.get(d, s) == s if isinstance(d, str) else True
                for d, s in zip(dims, shape))

        order = [*range(j, len(tensors)), *range(j)]
        usable = [k for k in order if fits(k)]
        typed = [k for k in usable if tensors[k].get("dtype") == v["type"]]
        k = (typed or usable or [None])[0]
        if k is not None:
            shapes[v["name"]] = list(tensors[k]["shape"])
            sizes.update((d, s) for d, s in zip(dims, tensors[k]["shape"]) if isinstance(d, str))
            taken.add(k)
            j = k + 1
        else:
            from compat.tools.check import DEFAULT_DIM_SIZE

            found = False
            shapes[v["name"]] = [d if isinstance(d, int) and d >= 0 else sizes.get(d, DEFAULT_DIM_SIZE)
                                 for d in dims]
    return shapes, found


def _feeds(inputs: Sequence[Mapping[str, Any]], shapes: Mapping[str, list[int]], seed: int) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    feeds = {}
    for v in inputs:
        dtype = np.dtype(v["type"])  # numpy's name of the ONNX element type (check.describe)
        shape = shapes[v["name"]]
        if dtype == np.bool_:
            feeds[v["name"]] = rng.integers(0, 2, size=shape).astype(bool)
        elif dtype.kind in "iu":
            feeds[v["name"]] = rng.integers(0, 2, size=shape).astype(dtype)  # 0/1: valid indices
        else:
            feeds[v["name"]] = rng.standard_normal(size=shape).astype(dtype)
    return feeds


def _session(path: str) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _error(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def _resized(inputs: Sequence[Mapping[str, Any]], shapes: Mapping[str, list[int]], param: str,
             size: int) -> dict[str, list[int]]:
    return {v["name"]: [size if d == param else s for d, s in zip(v["dims"] or [], shapes[v["name"]])]
            for v in inputs}


def _numbers(sess_a: Any, sess_b: Any, inputs_a: Sequence[Mapping[str, Any]], names_b: list[str],
             shapes: Mapping[str, list[int]], seed: int, where: str, atol: float, rtol: float,
             differences: list[str], notes: list[str]) -> bool:
    """Run both models on the same inputs; append what differs. True when both ran."""
    import numpy as np

    from compat.tools.parity import diff_stats

    feeds = _feeds(inputs_a, shapes, seed)
    try:
        ref = sess_a.run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - onnxruntime's own error classes
        notes.append(f"{where}: the original model does not run either ({_error(exc)})")
        return False
    names_a = [v["name"] for v in inputs_a]
    feeds_b = feeds if sorted(names_b) == sorted(names_a) else dict(zip(names_b, feeds.values()))
    try:
        got = sess_b.run(None, feeds_b)
    except Exception as exc:  # noqa: BLE001
        differences.append(f"{where}: the migrated model fails in onnxruntime ({_error(exc)})")
        return False
    if len(got) != len(ref):
        differences.append(f"{where}: {len(ref)} outputs -> {len(got)}")
        return True
    for i, (r, g) in enumerate(zip(ref, got)):
        r, g = np.asarray(r), np.asarray(g)
        if r.shape != g.shape:
            differences.append(f"{where}: output {i} shape {list(r.shape)} -> {list(g.shape)}")
            continue
        stats = diff_stats(g, r)
        scale = float(np.abs(r.astype(np.float64)).max()) if r.size and r.dtype.kind in "fiub" else 0.0
        if stats["max_abs"] > atol + rtol * scale or stats.get("nan_mismatches"):
            differences.append(f"{where}: output {i} max abs difference {stats['max_abs']:.3g}"
                               + (f", {stats['nan_mismatches']} NaN mismatch(es)"
                                  if stats.get("nan_mismatches") else ""))
    return True


def compare_models(old_path: str, new_path: str, examples: Sequence[Any], atol: float = ATOL,
                   rtol: float = RTOL) -> tuple[list[str], list[str]]:
    """(differences, notes) between the original run's model and the migrated run's."""
    differences, notes, _ = compare_model_files(old_path, new_path, examples, atol, rtol)
    return differences, notes


def compare_model_files(old_path: str, new_path: str, examples: Sequence[Any], atol: float = ATOL,
                        rtol: float = RTOL) -> tuple[list[str], list[str], bool]:
    """``compare_models`` plus whether onnxruntime ran both models at the recorded shapes."""
    a, b = _describe(old_path), _describe(new_path)
    differences = structure_differences(a, b, old_path, new_path)
    notes: list[str] = []
    try:
        sess_a = _session(old_path)
    except Exception as exc:  # noqa: BLE001
        notes.append(f"numerics not compared: onnxruntime cannot load the original model ({_error(exc)})")
        return differences, notes, False
    try:
        sess_b = _session(new_path)
    except Exception as exc:  # noqa: BLE001
        differences.append(f"onnxruntime cannot load the migrated model ({_error(exc)})")
        return differences, notes, False
    names_b = [i.name for i in sess_b.get_inputs()]
    if len(names_b) != len(a["inputs"]):
        differences.append(f"numerics not compared: {len(a['inputs'])} inputs -> {len(names_b)}")
        return differences, notes, False
    shapes, found = _aligned_shapes(a["inputs"], examples)
    if not found:
        notes.append("the recorded example inputs do not match the graph inputs: dynamic dims "
                     "run at size 2")
    ran = _numbers(sess_a, sess_b, a["inputs"], names_b, shapes, 0, "at the recorded shapes", atol,
                   rtol, differences, notes)
    params = list(dict.fromkeys(d for v in a["inputs"] for d in (v["dims"] or []) if isinstance(d, str)))
    for n, param in enumerate(params, 1):
        size = 1 + max(s for v in a["inputs"] for d, s in zip(v["dims"] or [], shapes[v["name"]]) if d == param)
        _numbers(sess_a, sess_b, a["inputs"], names_b, _resized(a["inputs"], shapes, param, size), n,
                 f"at {param}={size}", atol, rtol, differences, notes)
    return differences, notes, ran


# -- the two runs ----------------------------------------------------------------------------

def verify(old_ledger: str, new_ledger: str, atol: float = ATOL, rtol: float = RTOL) -> list[Row]:
    """One row per export of either run, matched as the module docstring says."""
    old, new = read_sites(old_ledger), read_sites(new_ledger)
    rows: list[Row] = []
    for file in sorted(set(old) | set(new)):
        for a, b in pair_sites(old.get(file, {}), new.get(file, {})):
            recs_a, recs_b = (a.records if a else []), (b.records if b else [])
            for k in range(max(len(recs_a), len(recs_b))):
                ra = recs_a[k] if k < len(recs_a) else None
                rb = recs_b[k] if k < len(recs_b) else None
                model = (ra or rb or {}).get("model")
                row = Row(a.label if a else None, b.label if b else None, k + 1, model, SAME)
                if ra is None or rb is None:
                    row.verdict = ONLY_NEW if ra is None else ONLY_OLD
                    row.differences.append("no matching export in the other run (a call the "
                                           "migrated code no longer makes, or makes more often)")
                else:
                    if ra.get("model") != rb.get("model"):
                        row.notes.append(f"model {ra.get('model')} -> {rb.get('model')}")
                    try:
                        row.verdict, row.differences, notes = compare_records(ra, rb, atol, rtol)
                        row.notes += notes
                    except Exception as exc:  # noqa: BLE001 - an unreadable model is a finding
                        row.verdict, row.differences = UNVERIFIABLE, [f"cannot read a model: {_error(exc)}"]
                rows.append(row)
    return rows


def summary(rows: Sequence[Row]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r.verdict] = out.get(r.verdict, 0) + 1
    return out


def to_text(rows: Sequence[Row], old_ledger: str, new_ledger: str) -> str:
    counts = summary(rows)
    head = ", ".join(f"{n} {v}" for v, n in counts.items()) or "no export call in either ledger"
    title = (f"{PROG}: {old_ledger} (original, shim) vs {new_ledger} (migrated, plain torch): "
             f"{len(rows)} export(s): {head}")
    lines = [title]
    table = [("call site (old -> new)", "#", "model", "verdict", "differences")]
    for r in rows:
        site = (f"{r.old} -> {r.new.rpartition(':')[2]}" if r.old and r.new and
                r.old.rpartition(":")[0] == r.new.rpartition(":")[0] else f"{r.old or '-'} -> {r.new or '-'}")
        verdict = r.verdict if r.verdict in PASSING else r.verdict.upper()
        details = r.differences or [f"note: {n}" for n in r.notes[:1]] or [""]
        table.append((site, str(r.index), r.model or "-", verdict, details[0]))
        table += [("", "", "", "", d) for d in details[1:]]
        if r.differences:
            table += [("", "", "", "", f"note: {n}") for n in r.notes]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4])
    return "\n".join(line.rstrip() for line in lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog=PROG, description="Compare the models of the original code under the shim (OLD_LEDGER, "
        f"`{commands.RUN} --ledger`) with those of the migrated code on plain torch (NEW_LEDGER, "
        f"`{commands.RUN} --observe --ledger`), call site by call site. Exit 1 on any difference.")
    p.add_argument("old", metavar="OLD_LEDGER")
    p.add_argument("new", metavar="NEW_LEDGER")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--atol", type=float, default=ATOL, help=f"absolute tolerance (default {ATOL})")
    p.add_argument("--rtol", type=float, default=RTOL,
                   help=f"tolerance relative to the largest output value (default {RTOL})")
    commands.add_version(p)
    ns = commands.parse_args(p, argv)
    if isinstance(ns, int):
        return ns
    for path in (ns.old, ns.new):
        if not os.path.isfile(path):
            print(f"{PROG}: error: no such ledger: {path}", file=sys.stderr)
            return 2
    from compat.errors import CompatError
    from compat.tools.check import _onnx_modules

    try:
        _onnx_modules()
    except CompatError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    rows = verify(ns.old, ns.new, ns.atol, ns.rtol)
    ok = bool(rows) and all(r.verdict in PASSING for r in rows)  # nothing compared proves nothing
    if ns.format == "json":
        data = {"old_ledger": ns.old, "new_ledger": ns.new, "summary": summary(rows), "ok": ok,
                "rows": [asdict(r) for r in rows]}
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        sys.stdout.write(to_text(rows, ns.old, ns.new))
    return 0 if ok else 1
