"""The acceptance check: a torch.export-route model replaces the TorchScript one only if it matches.

Before the dispatcher accepts the torch.export route's model it is run with onnxruntime and
compared with the model in eager torch at the example inputs and at one other size along each
declared dynamic axis (all axes at once: ``layout.joint_probe``; the inputs ``compat.compare``
builds, ``layout.resized_leaves``), and in the other orientation (an image's named height and
width swapped: a portrait image for a landscape example), with the
tolerances of each output's dtype (``numerics``). For a call in the legacy form its interface is
also compared with the one the TorchScript exporter gives the same call, decided from the request
(``graph_inputs.legacy_inputs``) and the model: which inputs exist, their order, names (where
``input_names`` chose them), dtypes and ranks, that none of them is unused (the TorchScript
exporter dropped those), that no Python int/float input it kept was baked in, and the outputs'
count, dtypes, ranks and ``output_names``.

A model that passes but is not close to eager (``IMPRECISE``) makes ``auto`` export on the
TorchScript route too and return the closer of the two (``dispatch._closer_of_both``).

A difference raises ``AcceptanceFailed`` (a ``RouteFailed``): ``auto`` falls back to the
TorchScript route, ``route="dynamo"`` fails naming it. ``acceptance_check=False``,
``TORCH_ONNX_COMPAT_ACCEPTANCE_CHECK=0`` or ``acceptance_check = false`` in pyproject turn it off.

The eager reference runs with ``torch.onnx.is_in_onnx_export()`` true, as the model runs while it
is captured. What the check does not count as a difference: outputs computed from nodes the call's
own translations wrote (registered custom symbolics, a ``custom_translation_table``: the model is
meant to differ there; ``autograd.Function`` symbolics exempt every output), an output eager torch itself does not reproduce
(random ops, Dropout in train mode: eager is run again at that probe and compared with itself),
a probe size the model rejects in eager torch, a model onnxruntime cannot run because it holds
custom-domain operators, a model without its weights (``export_params=False``). Bool inputs are
not compared: the tracer baked the branches a bool flag chooses and dropped the input, as
torch.export bakes it.

Eager runs never change the user's model or inputs: parameters and buffers are copied and put
back (``model_state.values_preserved``), inputs are cloned, the module modes are restored and
the global random state is forked.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from compat.errors import AcceptanceFailed
from compat.policy import config
from compat.request import ExportRequest, Outcome
from compat.request.graph_inputs import LegacyInput, legacy_form, legacy_inputs
from compat.request.layout import (
    InputLayout,
    joint_probe,
    resized_leaves,
    scalar_kind,
    skewed_probe,
)
from compat.routing import model_state, numerics
from compat.routing.capture import Capture
from compat.routing.route_packages import route_module

ROUTE = "dynamo"
PREFIX = "torch.export route"
HINT = (f"To accept the torch.export route's model as it is: acceptance_check=False, or "
        f"{config.ENV_ACCEPTANCE_CHECK}=0")
#: a serialized model larger than this is checked from a file (protobuf's 2 GB limit)
_INLINE_BYTES = 1 << 30
_ONNX_DTYPES = {
    "FLOAT": "float32", "DOUBLE": "float64", "FLOAT16": "float16", "BFLOAT16": "bfloat16",
    "INT64": "int64", "INT32": "int32", "INT16": "int16", "INT8": "int8", "UINT8": "uint8",
    "BOOL": "bool", "COMPLEX64": "complex64", "COMPLEX128": "complex128",
}


def enabled(req: ExportRequest) -> bool:
    """The call's ``acceptance_check``, else the environment, else pyproject, else on."""
    return config.resolve_acceptance_check(req.acceptance_check, req.call_site)


def check(req: ExportRequest, outcome: Outcome) -> None:
    """Check ``outcome`` (the torch.export route's) before it is accepted; its numbers go to
    ``outcome.acceptance``. Raises ``AcceptanceFailed`` naming each difference."""
    if not enabled(req):
        outcome.acceptance = {"status": "off"}
        return
    start = time.perf_counter()
    result = _Check(req, outcome).run()
    result["seconds"] = round(time.perf_counter() - start, 4)
    outcome.acceptance = result
    if result["differences"]:
        raise AcceptanceFailed(ROUTE, result["differences"], result, HINT)


#: an example-input difference from eager at or above this (about ten float32 steps; times the
#: largest eager output value above 1) makes ``auto`` also export on the TorchScript route and keep
#: the closer model (``example_difference``). 1e-5 let torch.var/std's 9.8e-5 at outputs near 10
#: through (issue 35); the second export costs a TorchScript trace, a few percent of the
#: torch.export route's own time, and only models this far off pay it.
IMPRECISE = 1e-6
#: the TorchScript route's model replaces the torch.export route's when its difference is at most
#: this share of the other's: clearly closer, not one float step of noise apart
CLEARLY_CLOSER = 0.25


def imprecise(outcome: Outcome) -> float | None:
    """The torch.export-route model's largest difference from eager at the example input when it
    passed the check but at or above ``IMPRECISE``; else None."""
    result = outcome.acceptance or {}
    if result.get("status") != "passed" or not result.get("probes"):
        return None
    first = result["probes"][0]
    diff = first.get("max_abs") if first.get("status") == "match" else None
    scale = max(1.0, first.get("scale") or 0.0)  # float noise grows with the outputs' magnitude
    return diff if diff is not None and diff >= IMPRECISE * scale else None


def example_difference(req: ExportRequest, model: bytes) -> float | None:
    """The largest difference of the serialized ``model`` (the TorchScript route's) from eager torch
    at the example input, each output compared by position; None when it cannot be told (other
    outputs, inputs that do not map, onnxruntime or eager failing)."""
    import torch

    if not isinstance(req.model, torch.nn.Module) or not req.export_params:
        return None
    layout = req.layout
    try:
        sess = numerics.session(model, optimize=False)
        wanted = [i.name for i in sess.get_inputs()]
        kept = [li.leaf for li in legacy_inputs(req)]
        by_name = {layout.names[i]: i for i in kept if layout.names[i]}
        pick = [by_name[w] for w in wanted] if all(w in by_name for w in wanted) else kept
        if len(pick) != len(wanted):
            return None
        got = sess.run(None, {w: _feed(layout.leaves[i]) for w, i in zip(wanted, pick)})
    except Exception:  # noqa: BLE001 - no figure, the torch.export route's model stays
        return None
    outcome = Outcome(route="legacy")
    with _eager_mode(req):
        expected = _Check(req, outcome)._eager(layout.leaves)
    if isinstance(expected, str) or len(expected) != len(got):
        return None
    result = numerics.compare_outputs(got, expected, "the example input", numerics.DEFAULT_TOLERANCES)
    return None if result.status != "match" else result.max_abs_diff


class _Check:
    def __init__(self, req: ExportRequest, outcome: Outcome) -> None:
        self.req = req
        self.outcome = outcome
        self.layout: InputLayout = req.layout
        self.tol = numerics.DEFAULT_TOLERANCES
        self.differences: list[str] = []
        self.details: list[str] = []  # the numbers behind a numeric difference
        self.notes: list[str] = []
        self.probes: list[dict[str, Any]] = []
        #: why numeric differences are expected here (then noted, not failed)
        self.approximate: str | None = None
        #: translations the user chose (custom symbolics, autograd.Function symbolics, a
        #: custom_translation_table): the model is meant to differ from eager torch there
        self.user_translations = sorted({t.code for t in outcome.translations if t.code in ("ONX301", "ONX302")}
                                        | ({"custom_translation_table"} if req.custom_translation_table else set()))
        #: graph outputs the user's translations reach (None: cannot tell which, all of them)
        self.translated_outputs: set[int] | None = None

    def run(self) -> dict[str, Any]:
        import torch

        req = self.req
        if isinstance(req.model, torch.export.ExportedProgram) or not callable(req.model):
            return self._result("skipped", "the model is an ExportedProgram: exported as captured")
        quantized = route_module("dynamo.quantized")  # imported by the route that ran
        if quantized.has_quantized_inputs(self.layout.leaves, None):
            return self._result("skipped", "quantized inputs are fed as (value, scale, zero_point): "
                                "not compared (the TorchScript exporter's interface, kept on purpose)")
        proto = self.outcome.program.model_proto
        graph = proto.graph
        inits = {i.name for i in graph.initializer}
        leaves_of_inputs = self.outcome.input_leaves
        count = len(leaves_of_inputs) if leaves_of_inputs is not None else None
        inputs = [v for v in graph.input if v.name not in inits][:count]
        with _eager_mode(req):
            example = self._eager(self.layout.leaves)
            if isinstance(example, str):
                return self._result("skipped", f"eager torch fails at the example inputs: {example}")
            if quantized.has_quantized_inputs(example, None):
                return self._result("skipped", "quantized outputs are returned as (value, scale, "
                                    "zero_point): not compared (the TorchScript exporter's interface)")
            if quantized.quantized_modules(req.model):
                # QDQ around float ops rounds where the quantized kernels round: a step apart
                self.approximate = "eager-quantized modules: within a quantization step of eager"
            if legacy_form(req):
                self._interface(proto, inputs, leaves_of_inputs, example)
            self._outputs(proto, example)
            if req.output_names:
                self._output_names(proto)
            if not req.export_params:
                self.notes.append("numerics not compared: export_params=False leaves the weights out")
            else:
                self._numerics(proto, inputs, leaves_of_inputs, example)
        return self._result("failed" if self.differences else "passed")

    def _result(self, status: str, note: str | None = None) -> dict[str, Any]:
        if note:
            self.notes.append(note)
        return {"status": status, "differences": list(self.differences), "details": list(self.details),
                "notes": list(self.notes), "probes": list(self.probes)}

    # --- eager torch ---------------------------------------------------------------------------

    def _eager(self, leaves: list[Any]) -> list[Any] | str:
        """Eager outputs at ``leaves`` (cloned: a forward that writes to its inputs changes no
        caller tensor), or the error text when eager torch fails there."""
        import torch

        from compat.installed import torch_internals

        fresh = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in leaves]
        args, kwargs = self.layout.rebuild(fresh)
        try:
            with torch.no_grad():
                # torch.onnx.is_in_onnx_export() true, as while torch.export captured the model
                result = torch_internals.as_onnx_export(self.req.model)(*args, **kwargs)
                return numerics.eager_outputs(result)
        except Exception as exc:  # noqa: BLE001 - a size the model rejects is no finding
            return numerics.clean(f"{type(exc).__name__}: {exc}")

    # --- interface ------------------------------------------------------------------------------

    def _interface(self, proto: Any, inputs: list[Any], leaves: list[int] | None, example: list[Any]) -> None:
        expected = legacy_inputs(self.req)
        by_leaf = {li.leaf: li for li in expected}
        if leaves is None:
            self.notes.append(f"interface not compared: cannot tell which input of the call each graph "
                              f"input takes ({[v.name for v in inputs]})")
            return
        used = _used_names(proto)
        for value, leaf in zip(inputs, leaves):
            want = by_leaf.get(leaf)
            if want is None:
                self.differences.append(f"{PREFIX}: input {value.name!r} is no input of the TorchScript exporter's model")
                continue
            self._compare_input(value, want, used)
        if leaves != sorted(leaves):
            order = [by_leaf[i].name or f"leaf {i}" for i in leaves if i in by_leaf]
            self.differences.append(f"{PREFIX}: inputs in another order than the TorchScript exporter's "
                                    f"(signature order): {order}")
        for want in expected:
            if want.leaf not in leaves and self._baked(want) and self._matters(want, example):
                value = self.layout.leaves[want.leaf]
                self.differences.append(
                    f"{PREFIX}: input {want.describe()} is a graph input of the TorchScript exporter's "
                    f"model; the torch.export route baked its example value {value!r} in")

    def _compare_input(self, value: Any, want: LegacyInput, used: set[str]) -> None:
        dtype, rank = _value_type(value)
        label = repr(value.name)
        if want.name is not None and value.name != want.name:
            self.differences.append(f"{PREFIX}: input {label} takes the input the TorchScript exporter "
                                    f"names {want.name!r} (input_names)")
        if dtype is not None and dtype != want.dtype:
            self.differences.append(f"{PREFIX}: input {label} is {dtype}, the TorchScript exporter's {want.dtype}")
        if rank is not None and rank != want.rank:
            self.differences.append(f"{PREFIX}: input {label} has rank {rank}, the TorchScript exporter's {want.rank}")
        if value.name not in used and want.kind != "int":
            # an unused Python int input is one torch.export specialised (an op's size): kept, as
            # the TorchScript exporter kept it (``legacy_interface``); other unused ints are dropped
            self.differences.append(f"{PREFIX}: input {label} is required but the TorchScript exporter "
                                    "dropped it (unused by the graph)")

    def _baked(self, want: LegacyInput) -> bool:
        """Whether torch.export baked the Python scalar ``want`` in (rather than dropping an
        unused input): every float; an int only at 0 or 1, which torch.export specialises (any
        other int is a dynamic int, missing only when the graph does not use it, as the tracer
        did not when the model branched on it)."""
        value = self.layout.leaves[want.leaf]
        return (want.kind == "float" or (want.kind == "int" and value in (0, 1))
                or _integer_scalar_tensor(value))

    def _matters(self, want: LegacyInput, example: list[Any]) -> bool:
        """Whether eager outputs change with the Python scalar ``want`` (baked by torch.export):
        the TorchScript exporter kept such a scalar as an input."""
        leaves = list(self.layout.leaves)
        value = leaves[want.leaf]
        leaves[want.leaf] = value + 1 if want.kind in ("int", "tensor") else value * 1.5 + 0.5
        other = self._eager(leaves)
        if isinstance(other, str):
            return False  # the model rejects another value: nothing to feed there anyway
        return _differ(other, example, self.tol)

    def _outputs(self, proto: Any, example: list[Any]) -> None:
        outputs = list(proto.graph.output)
        if len(outputs) != len(example):
            self.differences.append(f"{PREFIX}: {len(outputs)} outputs, eager torch gives {len(example)}")
            return
        for k, (value, ref) in enumerate(zip(outputs, example)):
            dtype, rank = _value_type(value)
            want = str(ref.dtype).replace("torch.", "")
            if ref.is_complex():
                continue  # the exporter gives complex outputs as real pairs
            if dtype is not None and dtype != want:
                self.differences.append(f"{PREFIX}: output {k} is {dtype}, eager torch's {want}")
            if rank is not None and rank != ref.dim():
                self.differences.append(f"{PREFIX}: output {k} has rank {rank}, eager torch's {ref.dim()}")

    def _output_names(self, proto: Any) -> None:
        names = [v.name for v in proto.graph.output]
        wanted = list(self.req.output_names or ())[: len(names)]
        if names[: len(wanted)] != wanted:
            self.differences.append(f"{PREFIX}: outputs named {names}, output_names gives {wanted}")

    # --- numerics -------------------------------------------------------------------------------

    def _numerics(self, proto: Any, inputs: list[Any], leaves: list[int] | None, example: list[Any]) -> None:
        if leaves is None:
            leaves = _positional_leaves(self.layout, len(inputs))
            if leaves is None:
                return  # reported by the interface check, or nothing to map by
        try:
            sess = _session(proto)
        except Exception as exc:  # noqa: BLE001 - reported below
            text = numerics.clean(f"{type(exc).__name__}: {exc}")
            custom = sorted({o.domain for o in proto.opset_import} - {"", "ai.onnx", "ai.onnx.ml", "com.microsoft"})
            if custom:
                self.notes.append(f"numerics not compared: onnxruntime cannot run the custom domains "
                                  f"{custom} ({text[:200]})")
            else:
                self.differences.append(f"{PREFIX}: onnxruntime cannot load the model: {text}")
            return
        names = [v.name for v in inputs]
        if self.user_translations:
            self.translated_outputs = _translated_outputs(proto, self.outcome.translations, self.req)
        sizes = self.layout.axis_sizes()
        example_sizes = ", ".join(f"{n}={s}" for n, s in sizes.items())
        others = joint_probe(sizes)
        others += _turned_probe(self.layout, sizes)
        if self.outcome.baked:
            # a draft capture baked values of the example: a size one larger, of the same
            # proportions, may still take them
            others += skewed_probe(sizes)
        probes: list[tuple[str, dict[str, int]]] = [("the example input", {})]
        probes += [(", ".join(f"{n}={s}" for n, s in p.items()) + f" (example {example_sizes})", p)
                   for p in others]
        for n, (label, sizes_at) in enumerate(probes):
            call_leaves = self.layout.leaves if not sizes_at else resized_leaves(self.layout, sizes_at, seed=n)
            expected = example if not sizes_at else self._eager(call_leaves)
            if isinstance(expected, str):
                self.probes.append({"probe": label, "status": "skipped", "eager_error": expected[:300]})
                continue
            feeds = {name: _feed(call_leaves[leaf]) for name, leaf in zip(names, leaves)}
            try:
                got = sess.run(None, feeds)
            except Exception as exc:  # noqa: BLE001 - the finding
                text = numerics.clean(f"{type(exc).__name__}: {exc}")
                self.probes.append({"probe": label, "status": "error", "detail": text[:500]})
                self.differences.append(f"{PREFIX}: onnxruntime fails at {label}: {text[:300]}")
                continue
            result = numerics.compare_outputs(got, expected, label, self.tol)
            if result.status != "match":
                self._drop_nondeterministic(result, call_leaves, expected)
            entry = {"probe": label, "status": result.status, "max_abs": _sig(result.max_abs_diff),
                     "max_rel": _sig(result.max_rel_diff)}
            if not sizes_at:
                entry["scale"] = _sig(_scale(expected))
            self.probes.append(entry)
            for k, problem in result.problems.items():
                if self.approximate:
                    self.notes.append(f"{_headline(k, result, label)}: noted, not failed ({self.approximate})")
                    continue
                if self.user_translations and (self.translated_outputs is None or k in self.translated_outputs):
                    self.notes.append(f"{_headline(k, result, label)}: not a difference, the call's own "
                                      f"translations ({', '.join(self.user_translations)}) apply")
                    continue
                self.differences.append(f"{PREFIX}: {_headline(k, result, label)}")
                self.details.append(f"at {label}: {problem}")
            if result.status != "match" and not result.problems:
                self.differences.append(f"{PREFIX}: at {label}: {result.detail}")

    def _drop_nondeterministic(self, result: numerics.Check, leaves: list[Any], expected: list[Any]) -> None:
        """Forget differences in outputs eager torch itself does not reproduce at these inputs."""
        again = self._eager(leaves)
        if isinstance(again, str) or len(again) != len(expected):
            return
        for k in list(result.problems):
            if _differ([again[k]], [expected[k]], self.tol):
                del result.problems[k]
                self.notes.append(f"output {k} at {result.probe} is not reproducible in eager torch "
                                  "(random ops or train-mode Dropout): not compared")
        if not result.problems and "outputs, eager torch gives" not in result.detail:
            result.status, result.detail = "match", ""


# --- helpers ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _eager_mode(req: ExportRequest) -> Iterator[None]:
    """The model in the mode the export captured it in, its weights, modes and the global random
    state put back after; its outputs flatten like the route's graph outputs."""
    import torch

    model = req.model
    with contextlib.ExitStack() as stack:
        # what the forward prints while it is checked is not the export's output: dropped
        stack.enter_context(Capture(enabled=not req.verbose))
        stack.enter_context(torch.random.fork_rng(devices=[]))
        stack.enter_context(route_module("dynamo").output_pytrees(model))
        if isinstance(model, torch.nn.Module):
            stack.enter_context(model_state.values_preserved(model))
            modes = [(m, m.training) for m in model.modules()]
            stack.callback(lambda: [setattr(m, "training", flag) for m, flag in modes])
            if req.training == "EVAL":
                model.eval()
            elif req.training == "TRAINING":
                model.train()
        yield


def _turned_probe(layout: InputLayout, sizes: dict[str, int]) -> list[dict[str, int]]:
    """One probe in the other orientation: the last two axes of an input of rank 3 or more (an
    image's height and width), both named, with their example sizes swapped, when they differ. A model whose sizes follow the
    aspect ratio (torchvision's detection transform) computes other sizes and indices for a
    portrait image than for the landscape example; probes that keep the example's proportions
    never feed one."""
    for leaf, axes in layout.axes.items():
        rank = layout.leaves[leaf].dim()
        if rank < 3 or rank - 2 not in axes or rank - 1 not in axes:
            continue  # no image: [batch, sequence] has no orientation
        a, b = axes[rank - 2], axes[rank - 1]
        if a != b and sizes.get(a) != sizes.get(b):
            return [{a: sizes[b], b: sizes[a]}]
    return []


def _translated_outputs(proto: Any, translations: list[Any], req: ExportRequest) -> set[int] | None:
    """Indices of the graph outputs computed from a node the user's translations wrote (a
    registered symbolic, a ``custom_translation_table`` entry: the node's ``fx_node`` metadata
    names the op); None when some translation's nodes cannot be told apart (an
    ``autograd.Function`` symbolic), so every output stays exempt."""
    if any(t.code == "ONX302" for t in translations):
        return None
    # every overload of a registered op; exactly the overloads of the table
    targets = tuple({f"target=torch.ops.{t.option.replace('::', '.')}." for t in translations
                     if t.code == "ONX301" and "::" in t.option}
                    | {f"target=torch.ops.{op}]"  # aten.relu.default: name() drops .default
                       for op in (req.custom_translation_table or {}) if hasattr(op, "name")})
    if not targets:
        return None
    tainted: set[str] = set()
    for node in proto.graph.node:  # topological order
        meta = {p.key: p.value for p in node.metadata_props}
        written = any(t in meta.get("pkg.torch.onnx.fx_node", "") for t in targets)
        if written or tainted.intersection(node.input) or _subgraph_reads(node, tainted):
            tainted.update(o for o in node.output if o)
    return {k for k, value in enumerate(proto.graph.output) if value.name in tainted}


def _subgraph_reads(node: Any, names: set[str]) -> bool:
    """Whether a subgraph of ``node`` (If/Loop/Scan) reads one of ``names`` from the outer scope."""
    for attr in node.attribute:
        for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            if any(names.intersection(n.input) or _subgraph_reads(n, names) for n in sub.node):
                return True
    return False


def _session(proto: Any) -> Any:
    """A session that runs a few times: basic graph optimizations only (quicker to build)."""
    if proto.ByteSize() < _INLINE_BYTES:
        return numerics.session(proto.SerializeToString(), optimize=False)
    import onnx

    with tempfile.TemporaryDirectory(prefix="compat-accept-") as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save_model(proto, path, save_as_external_data=True, location="model.onnx.data")
        return numerics.session(path, optimize=False)


def _feed(value: Any) -> Any:
    import numpy as np

    kind = scalar_kind(value)
    if kind is not None:
        return np.array(value, dtype={"int": np.int64, "float": np.float64, "bool": np.bool_}[kind])
    return numerics.to_numpy(value)


def _scale(outputs: list[Any]) -> float:
    """The largest finite magnitude among floating-point eager ``outputs`` (0 without any)."""
    import torch

    values = [t.detach().abs().float() for t in outputs if t.is_floating_point() and t.numel()]
    finite = [v[torch.isfinite(v)] for v in values]
    return max((float(v.max()) for v in finite if v.numel()), default=0.0)


def _integer_scalar_tensor(value: Any) -> bool:
    """A 0-d integer tensor (an index the TorchScript exporter kept as an input; a draft capture
    bakes its value)."""
    import torch

    return (isinstance(value, torch.Tensor) and value.dim() == 0
            and not value.is_floating_point() and not value.is_complex() and value.dtype != torch.bool)


def _positional_leaves(layout: InputLayout, count: int) -> list[int] | None:
    tensors = layout.tensor_indices()
    return tensors if len(tensors) == count else None


def _used_names(proto: Any) -> set[str]:
    """Names read by a node (subgraphs included) or returned by the graph."""
    used = {o.name for o in proto.graph.output}

    def walk(graph: Any) -> None:
        for node in graph.node:
            used.update(node.input)
            for attr in node.attribute:
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    walk(sub)

    walk(proto.graph)
    return used


def _value_type(value: Any) -> tuple[str | None, int | None]:
    import onnx

    t = value.type.tensor_type
    dtype = _ONNX_DTYPES.get(onnx.TensorProto.DataType.Name(t.elem_type)) if t.elem_type else None
    rank = len(t.shape.dim) if t.HasField("shape") else None
    return dtype, rank


def _differ(a: list[Any], b: list[Any], tol: Any) -> bool:
    """Whether two lists of eager outputs differ beyond tolerance (or in shape)."""
    if len(a) != len(b):
        return True
    got = [numerics.to_numpy(t) for t in a]
    return numerics.compare_outputs(got, b, "", tol).status != "match"


def _headline(k: int, result: numerics.Check, label: str) -> str:
    entry = next((e for e in result.outputs if e["output"] == k), {})
    if "onnx_shape" in entry:
        return f"output {k} has shape {entry['onnx_shape']}, eager torch {entry['shape']} at {label}"
    return f"output {k} differs from eager by {entry.get('max_abs', float('nan')):.3g} at {label}"


def _sig(v: float | None) -> float | None:
    return None if v is None else float(f"{v:.4g}")
