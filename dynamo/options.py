"""Translate the legacy options of an ``ExportRequest`` into the torch.export exporter's terms.

Each legacy option is either given its old meaning here (recorded as a ``Translation``), or the
call is refused before export with ``RouteFailed`` (``capabilities.legacy_only_reasons`` lists
those, so the auto dispatcher never gets here with them).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compat import catalog_facts as facts
from compat.catalog import INPUT_BINDING, NOT_PARAMETERS, SIZE_ONE_TILED
from compat.errors import CompatTypeError, CompatValueError, OpsetNotReached, RouteFailed
from compat.request import TRAINING_MODES, ExportRequest, Translation

from . import capabilities, cdist, cross_default_dim, dynamic_shapes, legacy_interface, training

ROUTE = "dynamo"
#: options without an ONX1xx catalog entry (export_params, keep_initializers_as_inputs, verbose,
#: opset_version) are recorded under the default-exporter change
NO_CODE = "ONX001"


@dataclass
class Plan:
    """Arguments for ``torch.onnx.export(..., dynamo=True)`` and what to do around it.

    ``translation_table`` is merged into ``custom_translation_table``; ``post_process`` callables
    take the ONNXProgram, in order, before it is saved (the saved file then needs no extra
    ``program.save`` arguments besides ``external_data``)."""

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] | None
    export_kwargs: dict[str, Any]
    translations: list[Translation] = field(default_factory=list)
    model_mode: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    post_process: list[Callable[[Any], None]] = field(default_factory=list)
    translation_table: dict[Any, Any] = field(default_factory=dict)
    #: the legacy interface of a legacy-form call; after export, which call leaf each input takes
    interface: legacy_interface.Interface | None = None
    #: entered around the export call (capture and torch's decomposition step)
    contexts: list[Callable[[], contextlib.AbstractContextManager[Any]]] = field(default_factory=list)
    #: what the route exports instead of ``req.model`` (None: the model itself)
    model: Any = None

    def record(self, code: str, option: str, action: str) -> None:
        self.translations.append(Translation(code, option, action))


def plan(req: ExportRequest) -> Plan:
    """The torch.export call that gives every legacy option of ``req`` its legacy meaning."""
    refuse_legacy_only(req)
    refuse_for_exported_program(req)
    given = req.given
    args, kwargs = dynamic_shapes.export_inputs(req)
    legacy = legacy_interface.in_signature_order(req)
    out = Plan(
        args=args,
        kwargs=kwargs,
        export_kwargs={
            # legacy verbose=None/False printed nothing; the new exporter's None means chatty
            "verbose": bool(req.verbose),
            # a legacy-form call's inputs are named after export, counted as the TorchScript
            # exporter counted them (legacy_interface)
            "input_names": list(req.input_names) if req.input_names and not legacy else None,
            "output_names": list(req.output_names) if req.output_names else None,
            "opset_version": req.opset_version,
            "dynamic_shapes": req.dynamic_shapes,
            "report": req.report,
            "optimize": req.optimize,
            "verify": req.verify,
            "profile": req.profile,
            "dump_exported_program": req.dump_exported_program,
            "artifacts_dir": req.artifacts_dir,
        },
    )
    out.interface = legacy_interface.plan(req, out.record)
    out.post_process.append(out.interface.post_process)  # first: the others find inputs by name
    _dynamic_ints(req, out)
    _dynamic_axes(req, out)
    _binding(req, out)
    _training(req, out)
    _constant_folding(req, out)
    _custom_opsets(req, out)
    _initializers(req, out)
    _torch_defaults(out)
    _rnn_loops(out)
    _packed_sequences(req, out)
    _overloads_by_schema(out)
    _rnn_weights_read_live(req, out)
    _lstm_decomposed(req, out)
    _missing_decompositions(out)
    _opset(req, out)
    _verbose(req, out)
    _operator_export_type(req, out)
    _eager_quantized(req, out)
    _buffer_hooks_removed(req, out)
    for option in ("operator_export_type", "export_modules_as_functions", "autograd_inlining"):
        value = getattr(req, option)
        if option in given and facts.disposition(option, value).kind == "dropped":  # type: ignore[union-attr]
            out.record(facts.OPTION_CODES[option], option,
                       f"{option}={facts.show(option, value)} is what the torch.export route does; dropped")
    return out


def refuse_legacy_only(req: ExportRequest) -> None:
    """``route='dynamo'`` with an option only the TorchScript exporter honours: a clear error."""
    reasons = capabilities.legacy_only_reasons(req)
    if reasons:
        code, reason = reasons[0]
        raise RouteFailed(
            ROUTE,
            f"{code}: needs the TorchScript exporter",
            CompatValueError(f"{reason}; use route='legacy' (dynamo=False) or route='auto'"),
        )


def refuse_for_exported_program(req: ExportRequest) -> None:
    """Legacy options that would change how the model is captured cannot apply to an
    ``ExportedProgram``: it was captured already. Refused before export, with what to do instead."""
    if not _is_exported_program(req.model):
        return
    if req.training == "TRAINING":
        raise CompatValueError(
            "training=TRAINING cannot switch an ExportedProgram to train mode: its mode was fixed "
            "when it was captured. Capture the program with the model in train mode "
            "(model.train() before torch.export.export), or pass the nn.Module"
        )
    if req.training == "EVAL" and "training" in req.given and training.captured_in_train_mode(req.model):
        raise CompatValueError(
            "training=EVAL cannot switch an ExportedProgram to eval mode: it was captured in train "
            "mode. Capture the program with the model in eval mode (model.eval() before "
            "torch.export.export), or pass the nn.Module"
        )
    if req.dynamic_axes is not None:
        raise CompatValueError(
            "dynamic_axes cannot change an ExportedProgram's shapes: capture it with dynamic_shapes, "
            "or pass the nn.Module"
        )


def _is_exported_program(model: Any) -> bool:
    import torch

    return isinstance(model, torch.export.ExportedProgram)


def _dynamic_axes(req: ExportRequest, out: Plan) -> None:
    if not req.dynamic_axes:  # None or {}: nothing to translate (the catalog's "dropped")
        return
    if req.dynamic_shapes is not None:
        out.record("ONX101", "dynamic_axes", "ignored: dynamic_shapes was given and takes precedence")
        return
    sp = dynamic_shapes.translate(req)
    out.args, out.kwargs = sp.args, sp.kwargs
    out.export_kwargs["dynamic_shapes"] = sp.dynamic_shapes
    names = sorted({a.name for a in sp.input_axes} | {n for axes in sp.output_axes.values() for n in axes.values()})
    action = (f"translated to dynamic_shapes (Dim.AUTO per axis; an axis the model fixes is exported "
              f"static and noted); dim_params named {names}")
    if sp.enlarged:
        action += f"; {SIZE_ONE_TILED} {dynamic_shapes.CAPTURE_SIZE} for capture on {sp.enlarged}"
    if sp.unmatched:
        action += f"; keys naming no input/output ignored with a warning: {sp.unmatched}"
    singles = {p.name for p in req.params or () if dynamic_shapes._default_name(p)}
    odd = sorted({a.key for a in sp.input_axes} - singles)
    if odd:
        action += f"; {NOT_PARAMETERS}: {odd}"
    out.record("ONX101", "dynamic_axes", action)
    sp.on_note = functools.partial(out.record, "ONX101", "dynamic_axes")
    out.post_process.append(sp.rename)


def _dynamic_ints(req: ExportRequest, out: Plan) -> None:
    """Python int inputs of a legacy-form call as dynamic ints (int64 scalar graph inputs)."""
    ints = legacy_interface.int_leaves(req)
    if not ints:
        return
    if req.dynamic_axes is None:
        out.export_kwargs["dynamic_shapes"] = dynamic_shapes.dynamic_ints(req)
    params = [(p.name, p.value) for p in req.params or ()]
    names = [name for name, value in params if legacy_interface.scalar_kind(value) == "int"] or ints
    out.record(legacy_interface.CODE, legacy_interface.OPTION,
               f"Python int inputs {names} exported as dynamic ints (int64 scalar graph inputs), as the "
               "TorchScript exporter kept them; one the model branches on is baked as it was traced")


def _torch_defaults(out: Plan) -> None:
    """Translations that give an op torch's own default where torch's ONNX one differs."""
    out.translation_table.update(cross_default_dim.translation_table())
    out.translation_table.update(cdist.translation_table())  # torch has none: the route failed
    out.post_process.append(functools.partial(cross_default_dim.record_uses, record=out.record))


def _rnn_loops(out: Plan) -> None:
    """With a dynamic axis, RNNs loop over the sequence in the graph (``rnn_decompositions``):
    LSTM and GRU on a torch whose ONNX exporter does not do so in its decomposition step itself
    (2.15's patch covers only those two), Elman RNNs on every torch. An LSTM or GRU traced with a
    dynamic sequence on a torch without torch's own loop for it (before 2.13 for LSTM, 2.11 for GRU) is refused there."""
    from . import rnn_decompositions, torch_internals

    if out.export_kwargs.get("dynamic_shapes"):
        elman_only = torch_internals.torch_patches_rnn_decompositions()
        uses = rnn_decompositions.Uses()
        out.contexts.append(functools.partial(rnn_decompositions.while_loop_decompositions,
                                              elman_only=elman_only, uses=uses))
        out.translation_table.update(rnn_decompositions.translation_table())

        def record(program: Any) -> None:
            # the ONNX RNN translation of rnn_tanh/rnn_relu keeps the op whole: its use counts too
            whole = any(n.op_type == "RNN" for n in program.model.graph.all_nodes())
            if uses.count or whole:
                out.record(NO_CODE, rnn_decompositions.OPTION, rnn_decompositions.ACTION)

        out.post_process.append(record)


def _packed_sequences(req: ExportRequest, out: Plan) -> None:
    """Packed sequences through LSTM/GRU as ONNX RNN nodes with ``sequence_lens``
    (``packed_sequences``), recorded when a packed RNN ran."""
    from . import packed_sequences, rnn_decompositions

    if not packed_sequences.needed(out.model if out.model is not None else req.model):
        return
    uses = rnn_decompositions.Uses()
    out.contexts.append(functools.partial(packed_sequences.packed_rnns, uses=uses))
    out.translation_table.update(packed_sequences.translation_table())

    def record(program: Any) -> None:
        if uses.count:
            out.record(NO_CODE, packed_sequences.OPTION, packed_sequences.ACTION)

    out.post_process.append(record)


#: the ledger's translation when torch's type promotion needed the shim's overload matching
#: (compat.catalog.SHIM_ONLY_TRANSLATIONS)
OVERLOAD_OPTION = "model"
OVERLOAD_ACTION = ("operator overloads re-matched by schema after type promotion (torch 2.9 to 2.12's pass "
                   "fails on a parameter times a Python scalar: 'Expected same OpOverload packet, "
                   "got prim.device != aten.mul')")


def _overloads_by_schema(out: Plan) -> None:
    """On a torch whose type-promotion pass misfinds overloads (``torch_caps``' probe: 2.9), the
    overload is matched by schema as later torches do (``torch_internals``), recorded when used."""
    from compat.installed import torch_caps

    from . import torch_internals

    if not torch_caps.type_promotion_misfinds_overloads():
        return
    _recorded_when_used(out, torch_internals.overloads_matched_by_schema, OVERLOAD_OPTION,
                        OVERLOAD_ACTION)


def _rnn_weights_read_live(req: ExportRequest, out: Plan) -> None:
    """On a torch whose export refuses a forward's tensor-attribute assignment (``torch_caps``'
    probe: 2.9), RNNs read their weights live instead of re-flattening them, recorded
    when an RNN read them."""
    import torch

    from compat.installed import torch_caps

    from . import rnn_decompositions

    model = out.model if out.model is not None else req.model
    if not isinstance(model, torch.nn.Module) or not any(
            isinstance(m, torch.nn.RNNBase) for m in model.modules()):
        return
    if not torch_caps.export_refuses_tensor_attribute_assignment():
        return
    _recorded_when_used(out, rnn_decompositions.flat_weights_read_live,
                        rnn_decompositions.WEIGHTS_OPTION, rnn_decompositions.WEIGHTS_ACTION)


def _lstm_decomposed(req: ExportRequest, out: Plan) -> None:
    """Without dynamic shapes, on a torch without a while_loop body for LSTM that torch cannot export as an ONNX LSTM node (before 2.13), an
    LSTM is decomposed at capture into its cells (torch's ONNX LSTM node is wrong there),
    recorded when one was. With dynamic shapes ``_rnn_loops`` registers the same kernel."""
    import torch

    from . import rnn_decompositions

    model = out.model if out.model is not None else req.model
    if out.export_kwargs.get("dynamic_shapes") or not isinstance(model, torch.nn.Module) or not any(
            isinstance(m, torch.nn.LSTM) for m in model.modules()):
        return
    if not rnn_decompositions.lstm_missing_loop():
        return
    _recorded_when_used(out, rnn_decompositions.lstm_decomposed,
                        rnn_decompositions.WEIGHTS_OPTION, rnn_decompositions.UNROLLED_ACTION)


def _missing_decompositions(out: Plan) -> None:
    """Decompositions this torch lacks and later torches have (``missing_decompositions``),
    registered while the export runs, recorded when one ran."""
    from . import missing_decompositions

    names = missing_decompositions.missing()
    if not names:
        return
    _recorded_when_used(out, functools.partial(missing_decompositions.registered, names),
                        missing_decompositions.OPTION, missing_decompositions.ACTION)


def _buffer_hooks_removed(req: ExportRequest, out: Plan) -> None:
    """On a torch whose failed capture leaves a buffer-assignment hook holding the model
    (``torch_caps``' probe: 2.9 to 2.12), the hooks holding the captured module are removed after
    the export, so a model whose export failed is not kept alive by torch."""
    import torch

    from compat.installed import torch_caps

    from . import torch_internals

    model = out.model if out.model is not None else req.model
    if not isinstance(model, torch.nn.Module) or not torch_caps.export_leaks_buffer_assignment_hook():
        return
    out.contexts.append(functools.partial(torch_internals.buffer_assignment_hooks_removed, model))


def _recorded_when_used(out: Plan, context: Any, option: str, action: str) -> None:
    """``context(uses)`` open while the export runs; the ledger records ``option``/``action``
    when it counted a use."""
    from . import rnn_decompositions

    uses = rnn_decompositions.Uses()
    out.contexts.append(functools.partial(context, uses))

    def record(program: Any) -> None:
        if uses.count:
            out.record(NO_CODE, option, action)

    out.post_process.append(record)


def _binding(req: ExportRequest, out: Plan) -> None:
    """Note where ``input_names`` fall on other forward() parameters than plain torch's
    ``torch.onnx.export(..., dynamo=True)`` would put them: it names the graph inputs in the
    order the call gives them (a trailing dict of keyword inputs in the dict's order), this route
    in the order of the call it passes (forward()'s when ``dynamic_axes`` was translated)."""
    if not req.input_names or req.params is None:
        return
    args, kwargs = tuple(req.args), req.kwargs
    if not kwargs and args and isinstance(args[-1], dict):  # torch.onnx.export's own reading
        args, kwargs = args[:-1], args[-1]
    count = len(req.input_names)
    plain = _leaf_owners(req, args, kwargs)[:count]
    here = _leaf_owners(req, out.args, out.kwargs)[:count]
    if plain != here:
        pairs = ", ".join(f"{n}: {p}" for n, p in zip(req.input_names, here))
        out.record("ONX001", "input_names",
                   f"{INPUT_BINDING} ({pairs}); plain torch would bind them to {plain}")


def _leaf_owners(req: ExportRequest, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None) -> list[str]:
    """The forward() parameter (``name``, ``name[i]`` inside a structure) of each tensor leaf of
    ``(args, kwargs)``, in the order torch.export makes them graph inputs."""
    import torch

    from . import torch_internals

    positional = [p.name for p in req.params or () if p.kind == "pos"]
    named = [(positional[i] if i < len(positional) else f"*args[{i - len(positional)}]", v)
             for i, v in enumerate(args)]
    named += list((kwargs or {}).items())
    out: list[str] = []
    for name, value in named:
        leaves = [x for x in torch_internals.tree_leaves(value) if isinstance(x, torch.Tensor)]
        out += [name] if len(leaves) == 1 and isinstance(value, torch.Tensor) else \
            [f"{name}[{i}]" for i in range(len(leaves))]
    return out


def _training(req: ExportRequest, out: Plan) -> None:
    if req.training not in TRAINING_MODES:
        raise CompatValueError(f"training={req.training!r}: expected EVAL, PRESERVE or TRAINING")
    out.model_mode = functools.partial(training.model_mode, req.model, req.training)
    train = training.exports_train_mode(req.model, req.training)
    if _is_exported_program(req.model):
        if train:
            out.translation_table.update(training.translation_table())
        mode = "train" if train else "eval"
        action = (f"an ExportedProgram keeps the mode it was captured in ({mode})"
                  + ("; BatchNorm exported with batch statistics" if train else ""))
    elif train:
        out.translation_table.update(training.translation_table())
        action = (
            "model captured in train mode (restored after); BatchNorm exported with batch statistics, "
            "Dropout with training_mode=True"
        )
    elif req.training == "EVAL":
        action = "model captured in eval mode (its own mode restored after)"
    else:
        action = "model captured in its own (eval) mode"
    if "training" in req.given or train:
        out.record("ONX102", "training", f"training={req.training}: {action}")


def _constant_folding(req: ExportRequest, out: Plan) -> None:
    if "do_constant_folding" not in req.given and req.do_constant_folding:
        return
    if req.do_constant_folding:
        out.record("ONX104", "do_constant_folding", "True is the torch.export route's default (optimize=True); dropped")
    elif "optimize" in req.given and req.optimize:
        out.record("ONX104", "do_constant_folding", "False overridden by the explicit optimize=True")
    else:
        out.export_kwargs["optimize"] = False
        out.record(
            "ONX104",
            "do_constant_folding",
            "False: optimize=False, so parameters stay un-folded initializers under their own names",
        )


def _custom_opsets(req: ExportRequest, out: Plan) -> None:
    opsets = req.custom_opsets
    if opsets is None:
        return
    if not isinstance(opsets, Mapping):
        raise CompatTypeError(f"custom_opsets must be a dict of domain -> version, got {type(opsets).__name__}")
    for domain, version in opsets.items():
        if not isinstance(domain, str) or isinstance(version, bool) or not isinstance(version, int):
            raise CompatTypeError(f"custom_opsets[{domain!r}]: expected a str domain and an int version, got {version!r}")
        if domain in ("", "ai.onnx"):
            raise CompatValueError("custom_opsets cannot set the default ONNX domain; use opset_version")
    if not opsets:
        return
    fixed = dict(opsets)

    def set_opsets(program: Any) -> None:
        program.model.opset_imports.update(fixed)
        for fn in program.model.functions.values():
            for domain, version in fixed.items():
                if domain in fn.opset_imports:
                    fn.opset_imports[domain] = version

    out.post_process.append(set_opsets)
    out.record("ONX105", "custom_opsets", f"opset imports set to {fixed}")


def _initializers(req: ExportRequest, out: Plan) -> None:
    keep = bool(req.keep_initializers_as_inputs)
    if req.export_params and not keep:
        if "keep_initializers_as_inputs" in req.given:
            out.record(NO_CODE, "keep_initializers_as_inputs", "False is the torch.export route's default; dropped")
        return
    names = weight_names(req.model)
    # Parameters are inputs now: optimizing before they are marked as inputs would fold them into
    # derived constants (no longer named, fed or overridable), so the optimizer runs afterwards.
    optimize = bool(out.export_kwargs.get("optimize"))
    out.export_kwargs["optimize"] = False
    out.post_process.append(functools.partial(
        initializers_as_inputs, names=names, drop_data=not req.export_params, optimize=optimize))
    unfolded = "; the graph is optimized after, without folding them" if optimize else ""
    if not req.export_params:
        out.record(NO_CODE, "export_params",
                   "False: parameters and buffers become graph inputs without data, as in the legacy "
                   f"exporter; other constants keep their data{unfolded}")
    else:
        out.record(NO_CODE, "keep_initializers_as_inputs",
                   "True: parameters and buffers also listed as graph inputs (overridable), as in the "
                   f"legacy exporter; other constants stay plain initializers{unfolded}")


def weight_names(model: Any) -> frozenset[str]:
    """Names the exporter gives the initializers of ``model``'s parameters and buffers (their
    fully qualified names, tied aliases included)."""
    import torch

    if isinstance(model, torch.export.ExportedProgram):
        sig = model.graph_signature
        return frozenset((*sig.parameters, *sig.buffers))
    if isinstance(model, torch.nn.Module):
        return frozenset(
            [n for n, _ in model.named_parameters(remove_duplicate=False)]
            + [n for n, _ in model.named_buffers(remove_duplicate=False)]
        )
    return frozenset()


def initializers_as_inputs(program: Any, names: frozenset[str], drop_data: bool, optimize: bool) -> None:
    """List the parameter/buffer initializers (``names``) as graph inputs, as the legacy
    ``keep_initializers_as_inputs=True`` did; with ``drop_data`` also drop their data (legacy
    ``export_params=False``). Every other initializer (constants the exporter made) keeps its data
    and is not an input, so the model needs no feeds beyond its inputs and weights. With
    ``optimize``, run the exporter's optimizer afterwards (it does not fold graph inputs)."""
    graph = program.model.graph
    present = {v.name for v in graph.inputs}
    weights = [v for name, v in graph.initializers.items() if name in names]
    graph.inputs.extend(v for v in weights if v.name not in present)
    if optimize:
        program.optimize()
        graph = program.model.graph
    if drop_data:
        for name in [n for n in graph.initializers if n in names]:
            graph.initializers.pop(name)


def _opset(req: ExportRequest, out: Plan) -> None:
    """Below the opset torch builds at, build there and bring the graph down with compat's own
    down-conversion (``dynamo.downconvert``); an opset it cannot reach raises ``OpsetNotReached``
    carrying the model at the lowest opset it could reach."""
    wanted = req.opset_version
    from compat.installed import torch_caps

    built = torch_caps.torchlib_min_opset()
    if wanted is None or wanted >= built:
        out.post_process.append(_fit_pool_sizes)
        return
    out.export_kwargs["opset_version"] = built

    def convert(program: Any) -> None:
        from . import downconvert

        result = downconvert.downconvert(program.model, wanted)
        program.model = result.model
        if not result.complete:
            raise OpsetNotReached(
                ROUTE, wanted, result.reached, program,
                CompatValueError(f"opset_version={wanted}: {result.reason()}"),
                blockers=tuple(sorted({g.op for g in result.gaps if g.op != "the model"})),
            )
        out.record(NO_CODE, "opset_version", f"{wanted}: {result.describe()}")

    out.post_process.append(convert)


def _fit_pool_sizes(program: Any) -> None:
    """Without a down-conversion, ceil_mode pools still get the pads that make the opset's shape
    rule give torch's size (below opset 22 it counts a last window starting in the padding)."""
    from . import downconvert

    downconvert.fit_pool_sizes(program.model)


def _operator_export_type(req: ExportRequest, out: Plan) -> None:
    """ONNX_ATEN_FALLBACK, ONNX_FALLTHROUGH, ONNX_ATEN: operators written as the TorchScript
    exporter wrote them (``aten_fallback``); each one is named in the ledger."""
    from . import aten_fallback

    if req.operator_export_type not in aten_fallback.MODES:
        return
    session = aten_fallback.session(req)
    out.contexts.append(session.active)
    out.record(aten_fallback.CODE, aten_fallback.OPTION, aten_fallback.MEANING[req.operator_export_type])

    def record(program: Any) -> None:
        for action in session.actions():
            out.record(aten_fallback.CODE, aten_fallback.OPTION, action)

    out.post_process.append(record)


def _eager_quantized(req: ExportRequest, out: Plan) -> None:
    """Eager-quantized modules and inputs: QDQ stand-ins (``quantized``)."""
    from . import quantized

    quantized.plan(req, out)


def _verbose(req: ExportRequest, out: Plan) -> None:
    if not req.verbose:
        return

    def show(program: Any) -> None:
        print(program.model)

    out.post_process.append(show)
    out.record(NO_CODE, "verbose", "True: exporter progress and the ONNX graph are printed")
