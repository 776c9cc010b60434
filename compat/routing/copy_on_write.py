"""The TorchScript route's guard: copy a parameter only just before the traced forward writes it.

A traced forward runs on the model's real tensors, so it may change them (a running statistic
updated in place, ``weight.data.mul_(2)``). Copying every parameter around each export costs two
passes over the weights (a third of a 24M-parameter convnet's export on a busy machine). So:

* buffers are copied before the export (they are small, and forwards update them in place);
* parameters are watched while the model's forward runs (a forward pre-hook and an always-called
  forward hook on the model, on the exporting thread only; torch's own graph passes run
  unwatched) with a ``torch.overrides.TorchFunctionMode``. A parameter's storage is copied before
  the first call that writes to it: an in-place method or function (``add_``, ``x += 1``,
  ``x[i] = v``, ``copy_``, ``nn.init.*_``), an op whose schema writes a positional argument,
  ``out=``, ``inplace=True``, ``F.embedding(max_norm=...)``, a train-mode ``F.batch_norm`` /
  ``F.instance_norm``; or that lets it escape: ``.data``, ``.numpy()``, ``data_ptr()``, its
  storage. Copies (and the buffers) are put back after the export, whatever its fate.

The mode must not change what the tracer records. The tracer names a graph value after the
local variable holding it two frames out, and torch attributes a warning to the innermost frame;
a mode adds its own frames. So each call runs from a function whose code carries the calling
frame's file and line and whose globals are the caller's (warnings are attributed, filtered and
shown once per line as without the mode), and while the forward runs the tracer's name lookup
is one that sees through those frames. ``tests/core/test_copy_on_write.py`` checks that the
exported bytes and the warnings are the same with and without the guard.

Not seen (README, Known limits): a write through a numpy array or pointer taken before the
export, a write from another thread or from TorchScript code (a model holding a ``ScriptModule``
gets every value copied, as with ``verbose=True``, whose graph dumps show Python stacks), a write
by native code to a parameter's memory without a declared schema. A parameter whose version
counter moved without a copy is named in a ``ModelChangedWarning``.

A model whose parameters take at most ``EAGER_COPY_BYTES`` gets every value copied up front
instead (``model_state.values_preserved``): copying a few hundred kilobytes costs less than
the mode's per-call work (a 6-block CNN of 0.2 MB: ~0.1 ms of copies against ~2 ms for the
mode on a 30 ms export), and a full copy puts back every write, seen or not.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading
import types
import warnings
from collections.abc import Iterator
from typing import Any

from compat.errors import ModelChangedWarning
from compat.installed import torch_internals
from compat.routing import model_state

_PURE, _WRITES, _ESCAPES, _FLAGGED = range(4)
#: calls that write to their first argument although their name does not end in ``_``
_INPLACE_DUNDERS = frozenset({
    "__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
    "__ipow__", "__ilshift__", "__irshift__", "__iand__", "__ior__", "__ixor__", "__imatmul__",
})
#: calls that hand out an alias autograd does not track, or the memory itself
_ESCAPE_NAMES = frozenset({"numpy", "data_ptr", "untyped_storage", "storage", "_typed_storage",
                           "__array__", "__dlpack__", "to_dlpack"})
_ESCAPE_ATTRIBUTES = frozenset({"data"})  # ``t.data``: a getter the mode sees as ``__get__``
#: arguments of Python-level torch functions that make them write a tensor argument when set
_WRITE_FLAGS = ("inplace", "max_norm")
#: ...and of the normalisations updating running statistics (kernels that write them without a
#: schema that says so, so without moving the version counter)
_NORM_FLAGS = {"batch_norm": ("training",), "instance_norm": ("use_input_stats",)}
_NORM_BUILTINS = frozenset({"batch_norm", "instance_norm", "native_batch_norm", "_batch_norm_impl_index",
                            "cudnn_batch_norm", "miopen_batch_norm"})
_KINDS: dict[Any, tuple[int, Any]] = {}
_KINDS_LIMIT = 8192
_CALL_SITES: dict[tuple[str, int, int], Any] = {}
_CALL_SITES_LIMIT = 4096
_CALL_NAME = "_compat_torch_call"
#: parameters up to this many bytes are copied up front (see the module docstring)
EAGER_COPY_BYTES = 1 << 20
#: per thread: the frames the running calls were made from (innermost last)
_making = threading.local()


def _call(f, a, k): return f(*a, **k)  # noqa: E704 - one line: the call is on the code's first line


_call.__code__ = _call.__code__.replace(co_name=_CALL_NAME)


def copy_on_write(model: Any) -> contextlib.AbstractContextManager[None]:
    """Guard ``model`` while a TorchScript export traces it (see the module docstring). Call it
    where the guard is entered (``with copy_on_write(model):``): it reads the model then."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return contextlib.nullcontext()
    snapshot = model_state.open_snapshot(model)
    scripted = snapshot.scripted if snapshot is not None else any(
        isinstance(m, torch.jit.ScriptModule) for m in model_state.modules(model))
    if scripted or not torch_internals.has_tracer_name_lookup():
        return model_state.values_preserved(model)  # code the mode does not see: copy it all
    if _parameter_bytes(model) <= EAGER_COPY_BYTES:  # copying is cheaper than watching
        return model_state.values_preserved(model)
    return _watched(model)


@contextlib.contextmanager
def _watched(model: Any) -> Iterator[None]:
    """Watch the forward: copy each parameter just before its first write (the module docstring)."""
    guard = _Guard(model)
    handles = [model.register_forward_pre_hook(guard.enter, prepend=True),
               model.register_forward_hook(guard.leave, always_call=True)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        guard.stop()
        try:
            unseen = guard.restore()
        finally:
            guard.close()
        if unseen:
            names = ", ".join(n for n, p in model.named_parameters() if id(p) in unseen)
            warnings.warn(
                f"the export changed parameter(s) {names} of {type(model).__name__} in a way the "
                "TorchScript route's guard could not copy first: they keep the changed values",
                ModelChangedWarning, stacklevel=3)


def _parameter_bytes(model: Any) -> float:
    snapshot = model_state.open_snapshot(model)
    if snapshot is not None:
        return snapshot.nbytes()[0]
    params = model.parameters()
    try:
        return sum(p.numel() * p.element_size() for p in params)
    except (RuntimeError, ValueError):  # an uninitialized (lazy) parameter: the guard copies it
        return float("inf")


class _Guard:
    """Copies of the buffers, and of each parameter the forward writes to (made just before)."""

    def __init__(self, model: Any) -> None:
        self.thread = threading.get_ident()
        self.depth = 0
        self.tracing = False
        self.params: dict[int, list[model_state._TensorState]] = {}  # storage pointer -> states
        self.saved: dict[int, list[model_state._TensorState]] = {}  # the copied ones
        snapshot = model_state.open_snapshot(model) or model_state.snapshot(model)
        self.eager = [model_state.copied(s) for s in snapshot.buffers]
        self.versions: list[tuple[Any, int]] = []
        for s in snapshot.params:
            try:
                ptr = s.tensor.untyped_storage().data_ptr()
                self.versions.append((s.tensor, torch_internals.tensor_version(s.tensor)))
            except (RuntimeError, NotImplementedError, ValueError):  # sparse, lazy: copied now
                self.eager.append(model_state.copied(s))
                continue
            self.params.setdefault(ptr, []).append(s)
        self.mode = _mode_class()(self)

    def before_write(self, values: Any) -> None:
        for value in values:
            for t in (value if isinstance(value, (list, tuple)) else (value,)):
                if not hasattr(t, "untyped_storage"):
                    continue
                try:
                    ptr = t.untyped_storage().data_ptr()
                except (RuntimeError, NotImplementedError, ValueError, TypeError):
                    continue
                if ptr in self.params and ptr not in self.saved:
                    self.saved[ptr] = [model_state.copied(s) for s in self.params[ptr]]

    def enter(self, *_: Any) -> None:
        """Forward pre-hook: watch from here (the outermost call of the model's forward)."""
        if threading.get_ident() != self.thread:
            return
        if self.depth == 0:
            self.tracing = torch_internals.set_tracer_name_lookup(_name_lookup)
            self.mode.__enter__()
        self.depth += 1

    def leave(self, *_: Any) -> None:
        """Forward hook (always called, also when the forward raises): stop watching."""
        if threading.get_ident() == self.thread and self.depth:
            self.depth -= 1
            if self.depth == 0:
                self._stop()

    def stop(self) -> None:
        """After the export: stop watching if the forward's hook did not (a backstop)."""
        if self.depth:
            self.depth = 0
            self._stop()

    def _stop(self) -> None:
        self.mode.__exit__(None, None, None)
        if self.tracing:
            torch_internals.set_tracer_name_lookup(None)
            self.tracing = False

    def close(self) -> None:
        """Let go of the model's tensors and of the mode (which refers back to the guard): the
        cycle would otherwise keep every parameter's state until the garbage collector runs."""
        self.mode = None
        self.params.clear()
        self.saved.clear()
        self.eager.clear()
        self.versions.clear()

    def restore(self) -> set[int]:
        """Put back every copy; the ids of parameters changed without one (their version counter
        moved while no call the mode saw could write them)."""
        copied = [s for states in self.saved.values() for s in states]
        model_state.restore_values([*self.eager, *copied])
        done = {id(s.tensor) for s in copied}
        return {id(p) for p, version in self.versions
                if id(p) not in done and torch_internals.tensor_version(p) != version}


@functools.cache
def _mode_class() -> type:
    import torch

    handle_code = torch.overrides.handle_torch_function.__code__

    class CopyOnWrite(torch.overrides.TorchFunctionMode):
        """Copies a parameter's storage before the first call that may write to it, and runs
        every call from the caller's place (see the module docstring)."""

        def __init__(self, guard: _Guard) -> None:
            super().__init__()
            self.guard = guard

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            kind, flags = _kind(func)
            if kind == _PURE:
                if "out" in kwargs:
                    self.guard.before_write((kwargs["out"],))
            elif kind != _FLAGGED or _flag_set(flags, args, kwargs):
                self.guard.before_write((*args, *kwargs.values()))
            caller = sys._getframe(1)
            if caller.f_code is handle_code:  # a Python-level torch function: its caller's frame
                caller = (caller.f_back and caller.f_back.f_back) or caller
            stack = _making.__dict__.setdefault("stack", [])
            stack.append(caller)
            try:
                return _call_site(caller)(func, args, kwargs)
            finally:
                stack.pop()

    return CopyOnWrite


def _kind(func: Any) -> tuple[int, Any]:
    """What a torch call does to its tensor arguments (cached per callable, unless it is bound to
    an object: the cache must not keep a tensor or a model alive)."""
    kind = _KINDS.get(func)
    if kind is None:
        kind = _classify(func)
        if type(getattr(func, "__self__", None)).__name__ in ("getset_descriptor", "NoneType", "module", "type"):
            if len(_KINDS) >= _KINDS_LIMIT:
                _KINDS.clear()
            _KINDS[func] = kind
    return kind


def _classify(func: Any) -> tuple[int, Any]:
    name = getattr(func, "__name__", "")
    if name in ("__get__", "__set__"):  # a tensor attribute: ``.data``, ``.shape``, ...
        owner = getattr(getattr(func, "__self__", None), "__name__", "")
        return (_ESCAPES, None) if name == "__get__" and owner in _ESCAPE_ATTRIBUTES else (_PURE, None)
    if name in _ESCAPE_NAMES:
        return _ESCAPES, None
    if name in _INPLACE_DUNDERS or (name.endswith("_") and not name.endswith("__")):
        return _WRITES, None
    if inspect.isfunction(func):
        try:
            params = list(inspect.signature(func).parameters)
        except (TypeError, ValueError):
            return _PURE, None
        flags = tuple((flag, params.index(flag)) for flag in (*_WRITE_FLAGS, *_NORM_FLAGS.get(name, ()))
                      if flag in params)
        return (_FLAGGED, flags) if flags else (_PURE, None)
    if name in _NORM_BUILTINS or torch_internals.writes_positional(func):
        return _WRITES, None
    return _PURE, None


def _flag_set(flags: tuple[tuple[str, int], ...], args: Any, kwargs: dict[str, Any]) -> bool:
    for flag, index in flags:
        value = kwargs[flag] if flag in kwargs else (args[index] if index < len(args) else None)
        if value is not None and value is not False:
            return True
    return False


def _call_site(frame: Any) -> Any:
    """A function calling ``f(*a, **k)`` from ``frame``'s file and line with ``frame``'s globals
    (its module name and warning registry), cached per place."""
    key = (frame.f_code.co_filename, frame.f_lineno or 1, id(frame.f_globals))
    call = _CALL_SITES.get(key)
    if call is None:
        if len(_CALL_SITES) >= _CALL_SITES_LIMIT:
            _CALL_SITES.clear()
        code = _call.__code__.replace(co_filename=key[0], co_firstlineno=key[1])
        call = _CALL_SITES[key] = types.FunctionType(code, frame.f_globals, _CALL_NAME)
    return call


def _is_call_site(frame: Any) -> bool:
    code = frame.f_code
    return code.co_name == _CALL_NAME and code.co_code == _call.__code__.co_code


def _logical_frames(frame: Any) -> Iterator[Any]:
    """The frames from ``frame`` outwards as they would be without the mode: a call-site frame
    stands for the frame that made the call, whose callers follow."""
    stack = getattr(_making, "stack", [])
    k = len(stack)
    while frame is not None:
        if k and _is_call_site(frame):
            k -= 1
            frame = stack[k]
        yield frame
        frame = frame.f_back


def _name_lookup(var: Any) -> str:
    """The tracer's name for a value (``torch.jit._trace._create_interpreter_name_lookup_fn``:
    the name of the local variable holding it two frames out), on the frames as they would be
    without the mode."""
    import torch

    frames = _logical_frames(sys._getframe(1))
    next(frames, None)
    frame = next(frames, None)
    if frame is None:
        return ""
    for k, v in frame.f_locals.items():
        if isinstance(v, torch.Tensor) and var is v:
            return k if k != "self" else ""
    return ""
