"""The one home of the private torch internals the torch.export route touches.

The custom-symbolics adapter's pieces are listed in ``compat.installed.torch_caps``
(``SYMBOLICS_INTERNALS``: torch's symbolic registry and the new exporter's tracer), the route's
others in ``ROUTE_INTERNALS`` here: ``autograd.Function`` and ``torch.library`` internals the opaque-Function session uses, symbolic-shape queries, and ``torch.utils._pytree``.
``check()`` names whatever a torch upgrade moved; ``tests/symbolics/test_torch_internals.py`` and
``tests/dynamo/test_route_internals.py`` fail loudly on that torch. A piece that is gone when
used raises ``TorchInternalsMoved`` (never a silent default). Nothing here imports onnx or
onnxscript at module import.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from compat.installed import torch_caps
from compat.installed.torch_internals import lookup as _get
from compat.installed.torch_internals import moved as _moved
from compat.installed.torch_internals import need as _need
from compat.installed.torch_internals import remove_hooks_holding

#: the route's other private torch pieces: (module, dotted attribute)
ROUTE_INTERNALS: tuple[tuple[str, str], ...] = (
    ("torch._ops", "OpOverload"),
    ("torch", "ops.aten.add.Tensor._schema"),
    ("torch", "Tensor._is_view"),
    ("torch.autograd.function", "_SingleLevelFunction.setup_context"),
    ("torch.fx.experimental.symbolic_shapes", "free_unbacked_symbols"),
    ("torch.library", "Library._destroy"),
    ("torch.utils._pytree", "tree_leaves"),
    ("torch.utils._pytree", "tree_flatten"),
    ("torch.utils._pytree", "tree_unflatten"),
    ("torch.utils._pytree", "SUPPORTED_NODES"),
    ("torch.utils._pytree", "_deregister_pytree_node"),
    # the RNN while_loop decompositions (rnn_decompositions), on a torch without its own patch
    ("torch._decomp", "global_decomposition_table"),
    ("torch._decomp.decompositions", "_rnn_helper"),
    ("torch._decomp.decompositions", "gather_params"),
    ("torch._higher_order_ops.while_loop", "while_loop"),
    ("torch._C", "DispatchKey.CompositeImplicitAutograd"),
    ("torch", "ops.aten.rnn_tanh.input.py_kernels"),
    ("torch", "ops.aten.rnn_tanh.input._dispatch_cache"),
    ("torch._guards", "detect_fake_mode"),
    ("torch.fx.experimental.symbolic_shapes", "ShapeEnv.ignore_fresh_unbacked_symbols"),
    ("torch.fx.experimental.symbolic_shapes", "optimization_hint"),
    ("torch._subclasses.fake_tensor", "unset_fake_temporarily"),
    ("torch.library", "get_ctx"),
)

#: where a torch that applies the RNN while_loop decompositions in its ONNX decomposition step
#: (2.15: ``patch_dynamic_shape_rnn_decompositions``) defines that patch
RNN_PATCH_MODULES = (
    "torch.onnx._internal.exporter._capture_strategies",
    "torch.onnx._internal.exporter._core",
    "torch.onnx._internal.exporter._decomp",
    "torch.onnx._internal.exporter._fx_passes",
)
RNN_PATCH_NAME = "patch_dynamic_shape_rnn_decompositions"
#: torch's own while_loop LSTM/GRU bodies (2.13+), used where present
RNN_WHILE_LOOP_IMPLS = (("lstm", "lstm_while_loop_impl"), ("gru", "gru_while_loop_impl"))
#: draft capture (``dynamo/capture.py``): the report torch attaches to a draft_export program, the
#: filename table its stacks index, the trace log it writes, the size-oblivious flag torch's own
#: capture strategies set
DRAFT_INTERNALS: tuple[tuple[str, str], ...] = (
    ("torch.export", "draft_export"),
    ("torch.export._draft_export", "DraftExportReport.successful"),
    ("torch.export._draft_export", "FailureType.DATA_DEPENDENT_ERROR"),
    ("torch._logging.structured", "INTERN_TABLE"),
    ("torch._logging._internal", "LazyTraceHandler"),
    ("torch._logging._internal", "trace_log"),
    ("torch._logging._internal", "DTRACE_ENV_VAR"),
    ("torch.fx.experimental._config", "backed_size_oblivious"),
    ("torch._subclasses.meta_utils", "_safe_copy"),
    ("torch._subclasses.meta_utils", "_safe_clone"),
    # the decomposition step ``decomposition_hook`` wraps, and the registry it hands over
    ("torch.onnx._internal.exporter._core", "_prepare_exported_program_for_export"),
    ("torch.onnx._internal.exporter._registration", "ONNXRegistry.register_op"),
    ("torch.onnx._internal.exporter._registration", "ONNXRegistry.is_registered"),
    # the QDQ operators eager-quantized modules' stand-ins are written with (``quantized``)
    ("torch.ao.quantization.fx._decomposed", "quantized_decomposed_lib"),
)


def original_register() -> Callable[..., None] | None:
    """torch's own ``register_custom_op_symbolic`` (defining module, never a patched alias)."""
    if not torch_caps.has_legacy_symbolic_registry():
        return None
    return _get(*torch_caps.SYMBOLICS_INTERNALS[4])


def original_unregister() -> Callable[..., None] | None:
    if not torch_caps.has_legacy_symbolic_registry():
        return None
    return _get(*torch_caps.SYMBOLICS_INTERNALS[5])


def legacy_custom_symbolics(*, hidden_too: bool = False) -> dict[str, dict[int, Callable[..., Any]]]:
    """Custom (user) overrides in torch's TorchScript registry: name -> {opset: fn}.
    ``hidden_too``: read it also while ``TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT`` hides it."""
    shipped = torch_caps.ships_legacy_symbolic_registry() if hidden_too else \
        torch_caps.has_legacy_symbolic_registry()
    if not shipped:
        return {}
    registry = _need(*torch_caps.SYMBOLICS_INTERNALS[3])
    module = torch_caps.SYMBOLICS_INTERNALS[3][0]
    groups = getattr(registry, "_registry", None)
    if not isinstance(groups, dict):
        raise _moved(f"{module}.registry._registry (the symbolic function groups)")
    out: dict[str, dict[int, Callable[..., Any]]] = {}
    for name, group in groups.items():
        functions = getattr(group, "_functions", None)
        overrides = getattr(functions, "_overrides", None)
        if not isinstance(overrides, dict):
            raise _moved(f"{module}._SymbolicFunctionGroup._functions._overrides (for {name})")
        if overrides:
            out[name] = dict(overrides)
    return out


def legacy_dispatch(name: str, opset: int) -> Callable[..., Any] | None:
    """The symbolic torch's TorchScript exporter would use for ``name`` at ``opset`` (a custom
    override or its own built-in one), or None when it has none / no registry."""
    if not torch_caps.has_legacy_symbolic_registry():
        return None
    _load_builtin_symbolics()
    registry = _get(*torch_caps.SYMBOLICS_INTERNALS[3])
    group = registry.get_function_group(name)
    return group.get(opset) if group is not None else None


@functools.cache
def _load_builtin_symbolics() -> None:
    """torch imports its opset-11+ symbolics only when a TorchScript export starts: load them,
    so the dispatch does not depend on whether one already ran in this process."""
    try:
        trigger = _get(*torch_caps.SYMBOLICS_INTERNALS[8])
    except (ImportError, AttributeError):
        return
    trigger()


def current_tracer() -> Any:
    """The new exporter's recorder of the node being translated (has a ``nodes`` list)."""
    tracer = _get(*torch_caps.SYMBOLICS_INTERNALS[0])
    if tracer is None:
        raise RuntimeError("no ONNX graph under construction (called outside a translation)")
    return tracer


def op_schema(overload: Any) -> Any:
    """The ``FunctionSchema`` of an ``OpOverload`` (its arguments, defaults and returns)."""
    schema = getattr(overload, "_schema", None)
    if schema is None:
        raise _moved(f"torch._ops.OpOverload._schema (of {overload})")
    return schema


def schema_of(target: Any) -> Any:
    """``op_schema`` of an FX node's target when it is an ``OpOverload``, else None."""
    import torch

    return op_schema(target) if isinstance(target, torch._ops.OpOverload) else None


# ---------------------------------------------------------------- autograd.Function, torch.library


def is_view(t: Any) -> bool:
    return bool(_need("torch", "Tensor._is_view")(t))



def uses_setup_context(cls: type) -> bool:
    """Whether an ``autograd.Function`` overrides ``setup_context`` (the functorch-style form)."""
    base = _need("torch.autograd.function", "_SingleLevelFunction.setup_context")
    return getattr(cls, "setup_context", None) is not base


def has_unbacked_symbols(tensors: list[Any]) -> bool:
    """Whether any fake tensor's shape holds a data-dependent (unbacked) symbol."""
    free = _need("torch.fx.experimental.symbolic_shapes", "free_unbacked_symbols")
    return any(free(t) for t in tensors)


@contextlib.contextmanager
def fresh_unbacked_ignored(tensors: list[Any]) -> Iterator[None]:
    """While a fake kernel runs code whose ops make data-dependent sizes of their own (a
    ``nonzero`` inside an ``autograd.Function``'s forward): the shape environment does not ask
    for those symbols in the kernel's outputs (the kernel allocates its own sizes)."""
    mode = _need("torch._guards", "detect_fake_mode")(tensors)
    shape_env = getattr(mode, "shape_env", None)
    if shape_env is None:
        yield
        return
    _need("torch.fx.experimental.symbolic_shapes", "ShapeEnv.ignore_fresh_unbacked_symbols")
    with shape_env.ignore_fresh_unbacked_symbols():
        yield


def new_dynamic_size() -> Any:
    """A fresh data-dependent (unbacked) size, in a fake kernel (``ctx.new_dynamic_size()``)."""
    ctx = _need("torch.library", "get_ctx")()
    make = getattr(ctx, "new_dynamic_size", None)
    if make is None:
        raise _moved("torch.library.get_ctx().new_dynamic_size (a fake kernel's data-dependent size)")
    return make()


def size_hint(dim: Any) -> int | None:
    """The example's value of a (possibly symbolic) size, without adding a guard; None when
    it has none (a data-dependent size outside draft capture)."""
    try:
        hint = _get("torch.fx.experimental.symbolic_shapes", "optimization_hint")
    except AttributeError:  # torch < 2.10 (OLDER_SPELLINGS): hint_int raises where there is none
        if not _need("torch.fx.experimental.symbolic_shapes", "has_hint")(dim):
            return None
        hint = _need(*OLDER_SPELLINGS["torch.fx.experimental.symbolic_shapes.optimization_hint"])
    try:
        return int(hint(dim, fallback=None))
    except (TypeError, ValueError):
        return None


def fake_mode_off() -> Any:
    """A context in which tensors are real again inside a fake kernel."""
    return _need("torch._subclasses.fake_tensor", "unset_fake_temporarily")()


_guard_lock = threading.Lock()
_guard_kept = False


def keep_fake_cuda_guard() -> None:
    """Install torch's fake CUDA device guard, once per process, from a thread that lives as
    long as the process (``torch_caps.fake_cuda_guard_dies_with_its_thread``): the main thread,
    or else a parked daemon thread. Later installs find it set and keep it."""
    global _guard_kept
    with _guard_lock:
        if _guard_kept:
            return
        ensure = _need("torch._C", "_ensureCUDADeviceGuardSet")
        if threading.current_thread() is threading.main_thread():
            ensure()
        else:
            done, failed = threading.Event(), []

            def keeper() -> None:
                try:
                    ensure()
                except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
                    failed.append(exc)
                done.set()
                if not failed:
                    threading.Event().wait()  # the guard dies with this thread: never end it

            threading.Thread(target=keeper, name="torch-onnx-compat-cuda-guard", daemon=True).start()
            done.wait()
            if failed:
                raise failed[0]
        _guard_kept = True


def destroy_library(lib: Any) -> None:
    """Remove every definition a ``torch.library.Library`` fragment made (torch has no public way)."""
    _need("torch.library", "Library._destroy")
    lib._destroy()


# ---------------------------------------------------------------- torch.utils._pytree


def symint_expr(dim: Any) -> Any:
    """The sympy expression behind a ``torch.SymInt`` (``dim.node.expr``, a private SymNode)."""
    expr = getattr(getattr(dim, "node", None), "expr", None)
    if expr is None:
        raise _moved("torch.SymInt.node.expr (the symbolic size's expression)")
    return expr


def tree_leaves(tree: Any) -> list[Any]:
    return list(_need("torch.utils._pytree", "tree_leaves")(tree))


def tree_flatten(tree: Any) -> tuple[list[Any], Any]:
    return _need("torch.utils._pytree", "tree_flatten")(tree)


def tree_unflatten(leaves: list[Any], spec: Any) -> Any:
    return _need("torch.utils._pytree", "tree_unflatten")(leaves, spec)


def pytree_node_types() -> set[type]:
    """The classes registered as pytree nodes right now."""
    return set(_need("torch.utils._pytree", "SUPPORTED_NODES"))


def deregister_pytree_node(cls: type) -> None:
    if cls in _need("torch.utils._pytree", "SUPPORTED_NODES"):
        _need("torch.utils._pytree", "_deregister_pytree_node")(cls)


# ---------------------------------------------------------------- RNN decompositions


@functools.cache
def torch_patches_rnn_decompositions() -> bool:
    """Whether the installed torch's ONNX exporter swaps in while_loop RNN decompositions for
    its decomposition step itself (torch 2.15's ``patch_dynamic_shape_rnn_decompositions``)."""
    for module in RNN_PATCH_MODULES:
        try:
            if hasattr(importlib.import_module(module), RNN_PATCH_NAME):
                return True
        except ImportError:
            continue
    return False


def rnn_while_loop_impls() -> dict[Any, Callable[..., Any]]:
    """torch's own while_loop decompositions of ``aten::lstm``/``aten::gru`` (``torch.export._patches``),
    for those it has."""
    import torch

    out: dict[Any, Callable[..., Any]] = {}
    for op, name in RNN_WHILE_LOOP_IMPLS:
        try:
            out[getattr(torch.ops.aten, op).input] = _get("torch.export._patches", name)
        except (ImportError, AttributeError):
            continue
    return out


def rnn_decomposition_helpers() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """torch's ``_rnn_helper`` (layers, directions, batch_first) and ``gather_params``."""
    return (_need("torch._decomp.decompositions", "_rnn_helper"),
            _need("torch._decomp.decompositions", "gather_params"))


def while_loop() -> Callable[..., Any]:
    return _need("torch._higher_order_ops.while_loop", "while_loop")


def composite_implicit_key() -> Any:
    """The dispatch key of an op's composite (decomposing) kernel."""
    return _need("torch._C", "DispatchKey.CompositeImplicitAutograd")


@contextlib.contextmanager
def decomposition_kernel(op: Any, impl: Callable[..., Any], *, at_capture: bool = True
                         ) -> Iterator[None]:
    """``impl`` as ``op``'s decomposition (the post-autograd table, which the exporter's
    decomposition step reads) and, ``at_capture``, CompositeImplicitAutograd kernel (what capture
    runs) while the block runs; both restored after. Without ``at_capture`` the op stays one
    node through capture: a CompositeImplicitAutograd kernel added to an op that had none makes
    torch 2.9's ``default_decompositions`` assert ("This should be a custom op") on every export
    made while it is there."""
    table = _need("torch._decomp", "global_decomposition_table")["post_autograd"]
    key = _need("torch._C", "DispatchKey.CompositeImplicitAutograd")
    kernels = getattr(op, "py_kernels", None)
    if not isinstance(kernels, dict):
        raise _moved(f"{op}.py_kernels")
    missing = object()
    saved = table.get(op, missing), kernels.get(key, missing)
    table[op] = impl
    if at_capture:
        kernels[key] = impl
    _clear_dispatch_cache(op)
    try:
        yield
    finally:
        for mapping, k, old in ((table, op, saved[0]), (kernels, key, saved[1])):
            if mapping is kernels and not at_capture:
                continue
            if old is missing:
                mapping.pop(k, None)
            else:
                mapping[k] = old
        _clear_dispatch_cache(op)


def _clear_dispatch_cache(op: Any) -> None:
    """An OpOverload caches the kernel it picked per dispatch key; a kernel swapped in (or put
    back) is only seen once the cache is cleared, as ``py_impl`` clears it."""
    cache = getattr(op, "_dispatch_cache", None)
    if not isinstance(cache, dict):
        raise _moved(f"{op}._dispatch_cache")
    cache.clear()


# ---------------------------------------------------------------- buffer-assignment hooks


@contextlib.contextmanager
def buffer_assignment_hooks_removed(model: Any) -> Iterator[None]:
    """On exit, success or not, remove the buffer-assignment hooks registered while the block ran
    whose closure holds ``model`` (``torch_caps.export_leaks_buffer_assignment_hook``: torch 2.9
    to 2.12 leave the one of a failed capture). Hooks the user or anything else registered, or
    that hold another module, are left alone."""
    hooks = _need(*torch_caps.BUFFER_REGISTRATION_HOOKS)
    before = set(hooks)
    try:
        yield
    finally:
        remove_hooks_holding(hooks, before, model)


# ---------------------------------------------------------------- draft capture (torch.export.draft_export)


def has_draft_capture() -> bool:
    """Whether this torch has ``torch.export.draft_export`` and the pieces its report is read with."""
    try:
        for module, attr in DRAFT_INTERNALS:
            _get(module, attr)
    except (ImportError, AttributeError):
        return False
    return True


def draft_export(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None,
                 dynamic_shapes: Any, *, ops: Callable[[], contextlib.AbstractContextManager[Any]]) -> Any:
    """``torch.export.draft_export`` with the size-oblivious setting torch's ONNX capture
    strategies use (size-0/1 examples keep their axes dynamic), parameters' real values and
    ``ops()`` entered around it: the caller's way of computing the operations draft_export cannot
    capture (``draft_ops.draft_ops``; passed in so this module never imports back)."""
    draft = _need("torch.export", "draft_export")
    config = importlib.import_module("torch.fx.experimental._config")

    with config.patch(backed_size_oblivious=True), _trace_logs_removed(), parameters_keep_real_values(), \
            ops():
        return draft(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes)


@contextlib.contextmanager
def parameters_keep_real_values() -> Iterator[None]:
    """Give fakified ``nn.Parameter``s their real values under real-value propagation.

    torch 2.13's fakification copies a tensor's data into the fake's ``real_tensor`` only when its
    type is exactly ``torch.Tensor`` (``meta_utils._safe_copy`` / ``_safe_clone``): a parameter's
    real value is left uninitialized, and draft_export decides every guard that reads a weight
    on garbage (docs/upstream/draft-export-parameter-values.md). The workaround itself is
    ``dynamo/parameter_values.py`` (the generated modules of migrated calls copy its source);
    here the pieces it patches must be there (``TorchInternalsMoved`` otherwise)."""
    from .parameter_values import parameters_keep_real_values as keep

    for attr in ("_safe_copy", "_safe_clone"):
        _need("torch._subclasses.meta_utils", attr)
    with keep():
        yield


@contextlib.contextmanager
def user_stack_skips(filename: str) -> Iterator[None]:
    """Inside, the user stack torch logs for a guard (``torch._logging.structured.get_user_stack``,
    the ``user_stack`` of draft_export's report) passes over frames of ``filename`` as it passes
    over torch's own: the window of frames it keeps ends at the model's line, not at a wrapper of
    this project's that torch called through."""
    import inspect

    import torch

    structured = importlib.import_module("torch._logging.structured")
    original = _need(structured.__name__, "get_user_stack")
    traceback = importlib.import_module("torch.utils._traceback")
    guards = importlib.import_module("torch._guards")
    torch_dir = os.path.dirname(inspect.getfile(torch)) + os.sep
    skipped = {os.path.abspath(filename), os.path.abspath(__file__)}  # the wrapper and this

    def get_user_stack(num_frames: int) -> list[dict[str, Any]]:
        if guards.TracingContext.extract_stack():
            return original(num_frames)  # strict capture: torch's own tracing stack
        frames = traceback.CapturedTraceback.extract().summary()
        for i in range(len(frames) - 1, -1, -1):
            name = frames[i].filename
            if torch_dir not in name and os.path.abspath(name) not in skipped:
                return structured.from_traceback(frames[max(0, i + 1 - num_frames): i + 1])
        return structured.from_traceback(frames[-num_frames:])

    structured.get_user_stack = get_user_stack
    try:
        yield
    finally:
        structured.get_user_stack = original


def draft_failures(program: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(kind, data)`` of each place a draft_export program was not soundly captured: kind
    ``DATA_DEPENDENT_ERROR`` (a guard specialised on the example's values), ``GUARD_ADDED``,
    ``MISSING_FAKE_KERNEL``, ``MISMATCHED_FAKE_KERNEL``."""
    report = getattr(program, "_report", None)
    failures = getattr(report, "failures", None)
    if not isinstance(failures, list):
        raise _moved("torch.export.ExportedProgram._report.failures (draft_export's report)")
    return [(getattr(f.failure_type, "name", str(f.failure_type)), dict(f.data)) for f in failures]


def interned_strings() -> dict[int, str]:
    """id -> string of torch's structured-log string table (draft reports' stack frames name
    their files by these ids; the report's own table misses files interned before it started)."""
    table = _need("torch._logging.structured", "INTERN_TABLE")
    return {v: k for k, v in dict(table).items()}


@contextlib.contextmanager
def _trace_logs_removed() -> Iterator[None]:
    """Remove the structured trace log draft_export writes into the temp folder for each call
    (``tlparse`` input; the ledger's ``baked`` records what it says), unless the user asked for
    trace logs with torch's own environment variable."""
    import os

    if os.environ.get(_need("torch._logging._internal", "DTRACE_ENV_VAR")):
        yield
        return
    handler_type = _need("torch._logging._internal", "LazyTraceHandler")
    logger = _need("torch._logging._internal", "trace_log")
    seen: dict[int, Any] = {}

    def note_handlers(record: Any) -> bool:
        for h in logger.handlers:
            if isinstance(h, handler_type):
                seen[id(h)] = h
        return True

    logger.addFilter(note_handlers)
    try:
        yield
    finally:
        logger.removeFilter(note_handlers)
        for h in seen.values():
            if h in logger.handlers:
                continue  # a handler the user or torch keeps
            path = getattr(h, "_stream_path", None) or getattr(getattr(h, "stream", None), "name", None)
            h.close()
            if isinstance(path, str) and os.path.basename(path).startswith("dedicated_log_torch_trace_"):
                with contextlib.suppress(OSError):
                    os.remove(path)
# ---------------------------------------------------------------- quantization


def quantized_decomposed() -> Any:
    """``torch.ops.quantized_decomposed`` (quantize/dequantize per tensor and per channel, which
    torchlib translates to QuantizeLinear/DequantizeLinear); its module defines them on import."""
    import torch

    _need("torch.ao.quantization.fx._decomposed", "quantized_decomposed_lib")
    return torch.ops.quantized_decomposed


# ---------------------------------------------------------------- the exporter's decomposition step

_CORE = "torch.onnx._internal.exporter._core"
_PREPARE = "_prepare_exported_program_for_export"
#: what the current export's decomposition step runs (None: torch's own step, unchanged)
_DECOMPOSE_WITH: contextvars.ContextVar[Callable[..., Any] | None] = contextvars.ContextVar(
    "compat_decompose_with", default=None)


def can_hook_decomposition() -> bool:
    """Whether ``decomposition_hook`` can see and extend an export's ONNX registry."""
    if not torch_caps.has_exporter_tracer():
        return False
    try:
        _get(_CORE, _PREPARE)
        registry = _get("torch.onnx._internal.exporter._registration", "ONNXRegistry")
    except (ImportError, AttributeError):
        return False
    return all(callable(getattr(registry, a, None)) for a in ("register_op", "is_registered"))


@contextlib.contextmanager
def decomposition_hook(step: Callable[[Any, Any, Callable[[Any], Any]], Any]) -> Iterator[None]:
    """While open, torch's exporter runs ``step(program, registry, decompose)`` where it would
    decompose the captured ``program`` for its ONNX ``registry``; ``decompose(program)`` is
    torch's own step (decompositions, type promotion, assertions removed). ``step`` may register
    translations in ``registry`` before or after decomposing, and returns the program to
    translate. Scoped to this context (a ``ContextVar``): other threads' exports are untouched."""
    _install_prepare_wrapper()
    token = _DECOMPOSE_WITH.set(step)
    try:
        yield
    finally:
        _DECOMPOSE_WITH.reset(token)


@functools.cache
def _install_prepare_wrapper() -> None:
    core = importlib.import_module(_CORE)
    original = getattr(core, _PREPARE, None)
    if original is None:
        raise _moved(f"{_CORE}.{_PREPARE}")

    @functools.wraps(original)
    def prepare(exported_program: Any, *, registry: Any) -> Any:
        step = _DECOMPOSE_WITH.get()
        if step is None:
            return original(exported_program, registry=registry)
        return step(exported_program, registry,
                    lambda program: original(program, registry=registry))

    setattr(core, _PREPARE, prepare)


#: an internal's spelling on the older torches the shim supports, used where the newer one is absent
OLDER_SPELLINGS: dict[str, tuple[str, str]] = {
    # torch 2.9: hint_int (with has_hint) before optimization_hint
    "torch.fx.experimental.symbolic_shapes.optimization_hint": ("torch.fx.experimental.symbolic_shapes",
                                                                "hint_int"),
}


def check() -> list[str]:
    """Names of the internals a torch upgrade moved (empty when everything is in place)."""
    missing = []
    for module, attr in (*torch_caps.SYMBOLICS_INTERNALS, *ROUTE_INTERNALS, *DRAFT_INTERNALS):
        try:
            _get(module, attr)
        except (ImportError, AttributeError):
            older = OLDER_SPELLINGS.get(f"{module}.{attr}")
            try:
                if older is None:
                    raise
                _get(*older)
            except (ImportError, AttributeError):
                missing.append(f"{module}.{attr}")
    return missing


#: the uses counter of the current export's schema overload matching (None: torch's own pass)
_OVERLOAD_USES: contextvars.ContextVar[Any] = contextvars.ContextVar("compat_overload_uses", default=None)


@contextlib.contextmanager
def overloads_matched_by_schema(uses: Any) -> Iterator[None]:
    """While open, where torch's type-promotion pass fails to re-find a promoted node's overload
    (``torch_caps.type_promotion_misfinds_overloads``: torch 2.9 traces dispatch and sees
    ``prim.device``), the overload is matched by schema, as later torches do; ``uses.count``
    counts those nodes. Scoped to this context (a ``ContextVar``): other threads' exports and
    plain ``torch.onnx.export`` keep torch's own pass and its failure."""
    _install_overload_wrapper()
    token = _OVERLOAD_USES.set(uses)
    try:
        yield
    finally:
        _OVERLOAD_USES.reset(token)


@functools.cache
def _install_overload_wrapper() -> None:
    module_name, name = torch_caps.TYPE_PROMOTION_OVERLOAD
    module = importlib.import_module(module_name)
    original = getattr(module, name, None)
    if original is None:
        raise _moved(f"{module_name}.{name}")

    @functools.wraps(original)
    def find(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            return original(op, args, kwargs)
        except AssertionError:
            uses = _OVERLOAD_USES.get()
            if uses is None:
                raise
            overload = overload_by_schema(op, args, kwargs)
            uses.count += 1
            return overload

    setattr(module, name, find)


def overload_by_schema(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The first overload of the packet ``op`` whose schema accepts ``args``/``kwargs``."""
    check = _need("torch._C", "_check_schema_allow_fake_script_object")
    for overload_name in op.overloads():
        overload = getattr(op, overload_name)
        try:
            check(overload._schema, *args, **kwargs)
        except RuntimeError:
            continue
        return overload
    raise RuntimeError(f"no overload of {op} accepts the promoted arguments")
