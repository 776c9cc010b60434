"""The real-symbolic cases through the rewriter's translation (issue 32): each case's symbolic
source -> an onnxscript translation in a generated module -> torch.onnx.export(dynamo=True,
custom_translation_table=...), judged against the TorchScript exporter's model (same custom
nodes with their attributes, custom opsets; same onnxruntime values where it runs them).

A symbolic is read from its file as the rewriter reads it (``ast``, never run for the
translation); the case's model is run, as any export does. A ``register_custom_op_symbolic``
symbolic translates the aten op's node. An ``autograd.Function``'s becomes one ``torch.library``
op for the measurement: its tensor arguments are the op's inputs, its other arguments constants
of the call, its fake returns the forward's output shapes at the example (the rewriter's own
op, ``function_ops.py``, needs a self-contained forward, which the compiled-extension ops of
mmcv do not have).

``python -m real_symbolics.translated --out DIR`` (from benchmarks/): prints the counts and
writes ``DIR/translated.json``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import inspect
import json
import sys
import textwrap
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .case import Case, Setup
from .cases import CASES
from .harness import export, judge


def _source_def(fn: Any) -> tuple[ast.FunctionDef, str, frozenset[str]]:
    """``fn``'s def as its file holds it, the file, and the names of the file's defs."""
    fn = inspect.unwrap(fn)
    path = inspect.getsourcefile(fn)
    text = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(text)
    line = fn.__code__.co_firstlineno
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    found = next((n for n in defs if n.name == fn.__name__ and (
        n.lineno == line or any(d.lineno == line for d in n.decorator_list))), None)
    if found is None:
        found = next(n for n in defs if n.name == fn.__name__)
    return found, path, frozenset(n.name for n in defs)


def _translation(fn: Any, name: str, key: str | None, folder: Path, opset: int) -> tuple[Any, str]:
    """(the imported generated module, '') or (None, why the symbolic has no translation),
    migrated for the installed torch (the rewriter's default ``--target-torch``)."""
    from compat import torch_apis
    from migration import generated, symbolic_translate

    func, path, local = _source_def(fn)
    defs = {n.name: n for n in ast.walk(ast.parse(Path(path).read_text())) if isinstance(n, ast.FunctionDef)}
    tree = ast.parse(Path(path).read_text())
    torch_names = symbolic_translate.torch_symbolic_names(tree)
    imports = symbolic_translate.module_imports(tree)
    own = symbolic_translate.OwnModule.of(tree, fn.__module__)
    tr = symbolic_translate.translate(func, name, local, torch_names, imports, opset, own)
    if not tr.ok:
        return None, "; ".join(map(str, tr.blockers))
    entries = symbolic_translate.entries(tr, path, func.lineno, key,
                                         target=torch_apis.default_target())
    todo, seen = list(tr.helpers), set()
    while todo:
        helper = todo.pop()
        if helper in seen:
            continue
        seen.add(helper)
        sub = symbolic_translate.translate(defs[helper], helper, local, torch_names, imports, opset,
                                           own)
        if not sub.ok:
            return None, "helper " + "; ".join(map(str, sub.blockers))
        todo += sub.helpers
        entries += symbolic_translate.entries(sub, path, defs[helper].lineno, None)
    module = folder / f"{name}_onnx.py"
    module.unlink(missing_ok=True)
    text = generated.render(str(module), entries)
    generated.write(str(module), text)
    spec = importlib.util.spec_from_file_location(f"translated_{name}", module)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, ""


@contextlib.contextmanager
def _captured_registrations(setup: Setup) -> Iterator[list[tuple[str, Any, int]]]:
    """The ``register_custom_op_symbolic`` calls a package's own ``register()`` makes."""
    import torch

    seen: list[tuple[str, Any, int]] = list(setup.registrations)
    real = torch.onnx.register_custom_op_symbolic

    def record(name: str, fn: Any, opset: int) -> None:
        seen.append((name, fn, opset))
        real(name, fn, opset)

    torch.onnx.register_custom_op_symbolic = record
    try:
        yield seen
    finally:
        torch.onnx.register_custom_op_symbolic = real


def _function_op(cls: type, index: int, symbolic_mod: Any, symbolic_name: str, setup: Setup
                 ) -> tuple[dict, Any]:
    """``cls.apply`` replaced by one custom op (tensor inputs; the other arguments constants of
    the call) whose translation calls the symbolic's with every argument; the op table."""
    import torch

    original = cls.apply
    calls: list[tuple[list[Any], Any]] = []

    def probe(*args: Any) -> Any:
        out = original(*args)
        calls.append((list(args), out))
        return out

    restore = _restorer(cls, "apply")
    cls.apply = probe
    try:
        with torch.no_grad():
            setup.model.eval()(*setup.args)
    finally:
        restore()
    (args, out), *_ = calls
    tensor_at = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    ret = "torch.Tensor" if not isinstance(out, (tuple, list)) else \
        "tuple[" + ", ".join(["torch.Tensor"] * len(outs)) + "]"
    params = ", ".join(f"t{i}: torch.Tensor" for i in range(len(tensor_at)))
    name = f"h32bench::op{index}"
    ns: dict[str, Any] = {"torch": torch}
    exec(textwrap.dedent(f"""
        def impl({params}) -> {ret}:
            return apply_all(({", ".join(f"t{i}" for i in range(len(tensor_at)))},))
        def fake({params}):
            return make_fake()
    """), ns)  # noqa: S102 - the benchmark's own signature

    def merged(tensors: tuple) -> list[Any]:
        full = list(args)
        for i, t in zip(tensor_at, tensors):
            full[i] = t
        return full

    ns["apply_all"] = lambda tensors: original(*merged(tensors))
    shapes = [(o.shape, o.dtype) for o in outs]
    ns["make_fake"] = lambda: (tuple(torch.empty(s, dtype=d) for s, d in shapes)
                               if isinstance(out, (tuple, list)) else torch.empty(shapes[0][0], dtype=shapes[0][1]))
    op = torch.library.custom_op(name, ns["impl"], mutates_args=())
    op.register_fake(ns["fake"])
    translation = getattr(symbolic_mod, symbolic_name)

    def translate(*tensors: Any) -> Any:
        return translation(*merged(tensors))

    cls.apply = staticmethod(lambda *a: op(*[a[i] for i in tensor_at]))
    return {getattr(torch.ops.h32bench, f"op{index}").default: translate}, restore


def _restorer(cls: type, attr: str) -> Callable[[], None]:
    """Puts ``cls``'s own ``attr`` back as it is now: deleted when ``cls`` only inherits it.
    (Assigning the inherited ``cls.apply`` back would pin a bound method on the class, which
    hides a later patch of ``torch.autograd.Function.apply``, the shim's, from every later
    export of the class.)"""
    had, value = attr in cls.__dict__, cls.__dict__.get(attr)

    def restore() -> None:
        if had:
            setattr(cls, attr, value)
        elif attr in cls.__dict__:
            delattr(cls, attr)

    return restore


def run_case(case: Case, index: int, folder: Path) -> dict[str, Any]:
    import onnx
    import torch

    from migration.symbolic_plan import table_key

    setup = case.build()
    ref = folder / f"{case.name}.ref.onnx"
    reference = export(case, "torchscript", ref)
    table: dict = {}
    restore = None
    fn_cls = None
    if setup.symbolic is not None and not setup.registrations and setup.register is None:
        fn_cls = next((c for c, _ in setup.symbolic_overrides), None)
        if fn_cls is None:
            fn_cls = getattr(setup.symbolic, "__self__", None) or _owner(setup.symbolic)
        mod, why = _translation(setup.symbolic, f"sym{index}", None, folder, setup.opset)
        if mod is None:
            return {"verdict": "blocked", "reason": why}
        if not reference["ok"]:  # the TorchScript exporter fails on it: nothing to compare
            return judge(case, reference, {"ok": True, "names": []}, ref, ref)
        undo = [_restorer(c, "symbolic") for c, _ in setup.symbolic_overrides]
        for c, fn in setup.symbolic_overrides:
            c.symbolic = fn
        table, restore_apply = _function_op(fn_cls, index, mod, f"sym{index}", setup)
        restore = lambda: [f() for f in (restore_apply, *undo)]
    else:
        with _captured_registrations(setup) as regs:
            if setup.register is not None:
                setup.register()
        if setup.unregister is not None:
            setup.unregister()
        # the TorchScript exporter applies, per op, the registration of the highest opset up to
        # the export's
        chosen: dict[str, tuple[str, Any, int]] = {}
        for name, fn, opset in regs:
            if opset <= setup.opset and (name not in chosen or opset >= chosen[name][2]):
                chosen[name] = (name, fn, opset)
        called = None
        for n, (name, fn, opset) in enumerate(chosen.values()):
            key = table_key(name)
            mod, why = _translation(fn, f"sym{index}_{n}", key, folder, opset)
            if mod is None:
                # a package registers several ops; one the model does not call decides nothing
                called = _called_ops(setup) if called is None else called
                if key in called:
                    return {"verdict": "blocked", "reason": f"{name}: {why}"}
                continue
            table.update(mod.translation_table())
    path = folder / f"{case.name}.new.onnx"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(setup.model.eval(), setup.args, dynamo=True,
                                        custom_translation_table=table, verbose=False,
                                        opset_version=max(18, setup.opset))
        onnx.save(program.model_proto, str(path))
    except Exception as exc:  # noqa: BLE001 - the verdict records it
        return {"verdict": "differ", "reason": f"export failed: {type(exc).__name__}: {str(exc)[-400:]}"}
    finally:
        if restore is not None:
            restore()
    return judge(case, reference, {"ok": True, "names": []}, ref, path)


def _called_ops(setup: Setup) -> set[str]:
    """The ``namespace::name`` of each op in the model's torch.export graph."""
    import torch

    program = torch.export.export(setup.model.eval(), setup.args)
    return {f"{t.namespace}::{t._opname}" for t in (n.target for n in program.graph.nodes)
            if isinstance(t, torch._ops.OpOverload)}


def _owner(fn: Any) -> Any:
    module = sys.modules[fn.__module__]
    owner_name = fn.__qualname__.rsplit(".", 1)[0]
    obj = module
    for part in owner_name.split("."):
        obj = getattr(obj, part)
    return obj


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--case", nargs="*")
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(out))
    results: dict[str, Any] = {}
    for index, case in enumerate(CASES):
        if a.case and case.name not in a.case:
            continue
        missing = case.missing()
        if missing:
            results[case.name] = {"verdict": "skipped", "reason": missing}
            continue
        try:
            results[case.name] = run_case(case, index, out)
        except Exception as exc:  # noqa: BLE001 - a case that cannot be measured
            results[case.name] = {"verdict": "error", "reason": f"{type(exc).__name__}: {exc}"[:400],
                                  "trace": traceback.format_exc()[-1200:]}
        print(f"{case.name}: {results[case.name]['verdict']} {results[case.name].get('reason', '')[:160]}",
              flush=True)
    counts: dict[str, int] = {}
    for r in results.values():
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    print(json.dumps(counts))
    (out / "translated.json").write_text(json.dumps({"counts": counts, "cases": results}, indent=1))


if __name__ == "__main__":
    main()
