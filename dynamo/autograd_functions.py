"""``torch.autograd.Function`` subclasses with a ``symbolic`` on the torch.export route.

While a session is open, ``Function.apply`` of such a class calls one opaque torch.library op
(``<ns>::apply(Tensor[] tensors, int call) -> Tensor[]``) instead of tracing through forward.
The op's fake implementation runs the Function's forward on fake tensors (so placeholder
outputs keep their shapes, not their values); its ONNX translation runs the Function's own
``symbolic`` on the shim's graph context (``symbolic_graph``), non-tensor arguments passed as the same Python
constants the TorchScript exporter passes. Closing the session restores ``apply`` and
destroys the op library: nothing stays patched or registered.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from . import legacy_graph, torch_internals

_LOCK = threading.RLock()
_COUNTER = itertools.count()
# the session of the thread that is exporting: other threads' Functions run as usual
_ACTIVE = threading.local()
_DATA_DEPENDENT = {
    "DynamicOutputShapeException", "DataDependentOutputException", "GuardOnDataDependentSymNode",
    "PendingUnbackedSymbolNotFound",
}


def _symbolic_of(cls: type) -> Callable[..., Any] | None:
    """The user-defined ``symbolic`` of a Function class (torch's own Functions are left alone)."""
    sym = getattr(cls, "symbolic", None)
    if sym is None or not callable(sym):
        return None
    return None if (cls.__module__ or "").startswith("torch.") else sym


def _all_subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def functions_with_symbolic() -> list[type]:
    """Loaded Function subclasses that define a legacy ``symbolic``."""
    return [c for c in _all_subclasses(torch.autograd.Function) if _symbolic_of(c) is not None]


#: a size the fake kernel allocates as data-dependent
DYNAMIC = object()


def _with_dynamic_sizes(outs: list[torch.Tensor], shapes: list[list[Any]]) -> list[torch.Tensor]:
    """Fake outputs of ``shapes``: each data-dependent size (``DYNAMIC`` or holding an unbacked
    symbol) a fresh unbacked size, one per distinct size (two outputs of ``k`` rows share it)."""
    fresh: dict[Any, Any] = {}
    result = []
    for out, shape in zip(outs, shapes):
        dims = []
        for i, d in enumerate(shape):
            if d is DYNAMIC:
                dims.append(torch_internals.new_dynamic_size())  # unrelated to any other size
            elif isinstance(d, torch.SymInt) and torch_internals.has_unbacked_symbols([d]):
                key = str(torch_internals.symint_expr(d))
                dims.append(fresh[key] if key in fresh else fresh.setdefault(key, torch_internals.new_dynamic_size()))
            else:
                dims.append(d)
        result.append(out.new_empty(dims))
    return result


def _zeros(shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(shape, dtype=dtype)


def _random(shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point or dtype.is_complex:
        return torch.rand(shape, dtype=dtype)
    return torch.randint(0, 2, shape).to(dtype)


class _Ctx:
    """Stand-in for the autograd ctx when forward runs outside autograd."""

    def __init__(self, n_inputs: int) -> None:
        self.needs_input_grad = (False,) * n_inputs
        self.saved_tensors: tuple[Any, ...] = ()

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def mark_dirty(self, *args: Any) -> None: ...

    def mark_non_differentiable(self, *args: Any) -> None: ...

    def set_materialize_grads(self, value: bool) -> None: ...


@dataclass
class _Slot:
    index: int


@dataclass
class Call:
    """One ``Function.apply`` call seen while tracing."""

    cls: type
    template: list[Any]
    single: bool = True
    n_outputs: int | None = None

    def rebuild(self, tensors: list[Any]) -> list[Any]:
        return [tensors[a.index] if isinstance(a, _Slot) else a for a in self.template]


def _uses_setup_context(cls: type) -> bool:
    return torch_internals.uses_setup_context(cls)


@dataclass
class Session:
    """One export's worth of opaque Function ops."""

    on_limit: Callable[[legacy_graph.LegacyOnly], None]
    on_translated: Callable[[type], None]
    opset: int
    domain_version: Callable[[str], int]
    source_opset: int | None = None  # the export's opset: what the symbolic was written for
    calls: dict[int, Call] = field(default_factory=dict)
    applied: set[type] = field(default_factory=set)  # Functions called during capture
    translated: set[type] = field(default_factory=set)  # ... whose symbolic then ran
    #: Functions whose fake kernel allocated data-dependent sizes, and how it found their shapes
    sized: dict[type, str] = field(default_factory=dict)
    lib: Any = None
    op: Any = None

    # -- tracing side
    def apply(self, cls: type, args: tuple[Any, ...]) -> Any:
        call_id = next(_COUNTER)
        tensors: list[torch.Tensor] = []
        template: list[Any] = []
        for a in args:
            if isinstance(a, torch.Tensor):
                template.append(_Slot(len(tensors)))
                tensors.append(a)
            else:
                template.append(a)
        self.calls[call_id] = Call(cls, template)
        self.applied.add(cls)
        outs = self.op(tensors, call_id)
        return outs[0] if self.calls[call_id].single else tuple(outs)

    def bypass(self, cls: type) -> None:
        """A call the session could not take over (the check after export reports it)."""
        self.applied.add(cls)

    def _run(self, call: Call, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """The Function's own forward on ``tensors`` (real or fake), outside autograd."""
        args = call.rebuild(list(tensors))
        cls = call.cls
        outer, _ACTIVE.session = getattr(_ACTIVE, "session", None), None  # nested Functions: traced
        try:
            with torch.no_grad():
                out = cls.forward(*args) if _uses_setup_context(cls) else cls.forward(_Ctx(len(args)), *args)
        finally:
            _ACTIVE.session = outer
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if not all(isinstance(o, torch.Tensor) for o in outs):
            raise TypeError(f"{cls.__qualname__}.forward returned non-tensor outputs")
        call.single = not isinstance(out, (tuple, list))
        call.n_outputs = len(outs)
        return outs

    def _forward(self, tensors: list[torch.Tensor], call_id: int) -> list[torch.Tensor]:
        """The op's kernel on real tensors."""
        outs = self._run(self.calls[call_id], tensors)
        # an op's outputs may not alias its inputs
        return [o.clone() if torch_internals.is_view(o) or any(o is t for t in tensors) else o for o in outs]

    def _fake(self, tensors: list[torch.Tensor], call_id: int) -> list[torch.Tensor]:
        """The op's fake kernel: the forward's output shapes, each data-dependent size a fresh
        unbacked one (``ctx.new_dynamic_size()``), so the node keeps a dynamic dimension. A
        forward that cannot run on fake tensors because of its data (a branch on a value, a
        ``nonzero`` it then guards on) gets its shapes from two runs on synthetic inputs."""
        call = self.calls[call_id]
        try:
            with torch_internals.fresh_unbacked_ignored(list(tensors)):
                outs = self._run(call, tensors)
            shapes: list[list[Any]] = [list(o.shape) for o in outs]
        except Exception as exc:
            if type(exc).__name__ not in _DATA_DEPENDENT:
                self.check_fake_failure(call.cls, exc)
                raise
            outs, shapes = self._shapes_from_real_runs(call, list(tensors), exc)
            self.sized[call.cls] = "output shapes from its forward on synthetic inputs (it branches on values)"
        fakes = _with_dynamic_sizes(outs, shapes)
        if torch_internals.has_unbacked_symbols(fakes):
            self.sized.setdefault(call.cls, "a data-dependent output size, exported as a dynamic dimension")
        return fakes

    def describe(self, cls: type) -> str:
        """What became of the Function (the ledger's ONX302 translation)."""
        detail = self.sized.get(cls)
        return "became an opaque op translated by its own symbolic" + (f"; {detail}" if detail else "")

    def _shapes_from_real_runs(self, call: Call, fakes: list[torch.Tensor], exc: BaseException,
                               ) -> tuple[list[torch.Tensor], list[list[Any]]]:
        """Output shapes from the forward run twice on real inputs of the example's sizes (zeros,
        then random values): a size that differs between the runs is data-dependent, one equal to
        an input's size is that size, another is a constant when every input size is (else
        data-dependent too). Raises the data-dependent limit when the forward cannot run so."""
        hints = [[torch_internals.size_hint(d) for d in t.shape] for t in fakes]
        if any(h is None for sizes in hints for h in sizes):
            self._data_dependent(call.cls, exc)
        runs: list[list[tuple[tuple[int, ...], torch.dtype]]] = []
        try:
            with torch_internals.fake_mode_off():
                for fill in (_zeros, _random):
                    real = [fill(h, t.dtype) for t, h in zip(fakes, hints)]
                    runs.append([(tuple(o.shape), o.dtype) for o in self._run(call, real)])
        except Exception:  # noqa: BLE001 - the forward needs the example's real values: nothing to learn
            self._data_dependent(call.cls, exc)
        if [(len(s), d) for s, d in runs[0]] != [(len(s), d) for s, d in runs[1]]:
            self._data_dependent(call.cls, exc)  # a data-dependent rank or dtype
        static = all(isinstance(d, int) for t in fakes for d in t.shape)
        outs, shapes = [], []
        for (first, dtype), (second, _) in zip(*runs):
            shape: list[Any] = []
            for a, b in zip(first, second):
                tied = next((t.shape[k] for t, h in zip(fakes, hints) for k, v in enumerate(h) if v == a), None)
                if a != b:
                    shape.append(DYNAMIC)
                elif tied is not None:
                    shape.append(tied)
                else:
                    shape.append(a if static else DYNAMIC)
            shapes.append(shape)
            outs.append(fakes[0].new_empty([0] * len(shape), dtype=dtype))
        return outs, shapes

    def _data_dependent(self, cls: type, exc: BaseException | None) -> None:
        limit = legacy_graph.LegacyOnly(
            legacy_graph.REASON_DATA_DEPENDENT,
            f"{cls.__qualname__}.forward, whose output shape depends on input values "
            "(no fake implementation can be derived from it)",
        ).named(legacy_graph.qualname(_symbolic_of(cls)))
        self.on_limit(limit)
        raise limit from exc

    def check_fake_failure(self, cls: type, exc: BaseException) -> None:
        """Name the Function and the op when its forward has no fake (shape) implementation:
        a compiled-extension kernel (mmcv-style) that torch.export cannot run on fake tensors."""
        op = missing_fake_kernel(exc)
        if op is None:
            return
        limit = legacy_graph.LegacyOnly(
            f"{legacy_graph.REASON_NO_FAKE}: {cls.__qualname__} calls {op}",
            f"{cls.__qualname__}.forward, which calls {op} without a fake (shape) implementation "
            "(give it one with torch.library.register_fake; see docs/guide.md)",
        ).named(legacy_graph.qualname(_symbolic_of(cls) or cls))
        self.on_limit(limit)
        raise limit from exc

    # -- translation side
    def translate(self, tensors: Any, call_id: int) -> list[Any]:
        call = self.calls[call_id]
        sym = _symbolic_of(call.cls)
        try:
            outs, _ = legacy_graph.call_symbolic(
                sym, call.rebuild(list(tensors)), opset=self.opset, domain_version=self.domain_version,
                n_outputs=call.n_outputs, python_constants=True, label=legacy_graph.qualname(sym),
                source_opset=self.source_opset,
            )
        except legacy_graph.LegacyOnly as exc:
            self.on_limit(exc)
            raise
        self.on_translated(call.cls)
        self.translated.add(call.cls)
        return outs

    # -- lifetime
    def open(self) -> None:
        ns = f"compat_onnx_fn{next(_COUNTER)}"
        self.lib = torch.library.Library(ns, "FRAGMENT")
        self.lib.define("apply(Tensor[] tensors, int call) -> Tensor[]")
        # torch's dispatcher keeps the Python kernels it was given after the library is
        # destroyed: they must not keep this session (and through it the model) alive
        forward = _weak_kernel(weakref.ref(self), "_forward")
        self.lib.impl("apply", forward, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{ns}::apply", _weak_kernel(weakref.ref(self), "_fake"), lib=self.lib)
        self.op = getattr(torch.ops, ns).apply.default

    def bypassed(self) -> list[type]:
        """Functions called during capture whose symbolic never ran: torch retried a failed
        non-strict capture in strict mode, which traces through ``Function.apply``."""
        return sorted(self.applied - self.translated, key=lambda c: c.__qualname__)

    def close(self) -> None:
        if self.lib is not None:
            torch_internals.destroy_library(self.lib)
        self.lib = None
        self.calls.clear()

    @property
    def translation_table(self) -> dict[Any, Callable[..., Any]]:
        if self.op is None:
            return {}

        def translate_function(tensors: Any, call: int) -> list[Any]:
            return self.translate(tensors, call)

        # a plain function: the exporter stores its signature on the callable
        return {self.op: translate_function}


def _weak_kernel(session: weakref.ref[Session], method: str) -> Callable[[list[Any], int], list[Any]]:
    def kernel(tensors: list[Any], call: int) -> list[Any]:
        live = session()
        if live is None:
            raise RuntimeError("this op belongs to an export session that has ended")
        return getattr(live, method)(tensors, call)

    return kernel


# a Python ``classmethod`` up to torch 2.13, a C ``classmethod_descriptor`` (no ``__func__``)
# from 2.14: both bind to a class through the descriptor protocol
_ORIGINAL_APPLY = torch.autograd.Function.__dict__["apply"]


def _original_apply(cls: type) -> Callable[..., Any]:
    return _ORIGINAL_APPLY.__get__(None, cls)


def missing_fake_kernel(exc: BaseException) -> str | None:
    """The op that fake-tensor propagation had no implementation for, or None."""
    import re

    if type(exc).__name__ == "UnsupportedOperatorException":
        return str(getattr(exc, "func", None) or exc)
    text = str(exc)
    for pattern in (r"no fake impl registered for <CustomOpDef\((.+?)\)>",
                    r"Could not run '([^']+)' with arguments from the 'Meta' backend"):
        found = re.search(pattern, text)
        if found:
            return found.group(1)
    return None


def _patched_apply(cls: type, *args: Any, **kwargs: Any) -> Any:
    session = getattr(_ACTIVE, "session", None)
    if session is None:
        return _original_apply(cls)(*args, **kwargs)
    if _symbolic_of(cls) is None:
        try:
            return _original_apply(cls)(*args, **kwargs)
        except legacy_graph.LegacyOnly:
            raise
        except Exception as exc:
            session.check_fake_failure(cls, exc)
            raise
    if kwargs:
        positional = _as_positional(cls, args, kwargs)
        if positional is None:
            session.bypass(cls)
            return _original_apply(cls)(*args, **kwargs)
        args = positional
    return session.apply(cls, args)


def _as_positional(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """``apply(x, alpha=2.0)`` as forward's positional arguments (defaults filled), as the
    TorchScript exporter sees them; None when forward's signature cannot take them so."""
    import inspect

    try:
        params = list(inspect.signature(cls.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    if not _uses_setup_context(cls):
        params = params[1:]  # ctx
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        return None
    try:
        bound = inspect.Signature(params).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return tuple(bound.arguments[p.name] for p in params)


class session:
    """Open a ``Session`` and patch ``Function.apply`` for its lifetime (serialised by a lock)."""

    def __init__(self, **kwargs: Any) -> None:
        self.session = Session(**kwargs)

    def __enter__(self) -> Session:
        _LOCK.acquire()
        try:
            self.session.open()
            _ACTIVE.session = self.session
            torch.autograd.Function.apply = classmethod(_patched_apply)  # type: ignore[assignment]
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.session

    def __exit__(self, *exc: object) -> None:
        try:
            torch.autograd.Function.apply = _ORIGINAL_APPLY  # type: ignore[assignment]
            _ACTIVE.session = None
            self.session.close()
        finally:
            _LOCK.release()
