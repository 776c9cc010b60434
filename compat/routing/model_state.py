"""Snapshot and restore what an export may change on the user's model.

Two layers, so that the common case stays cheap:

* ``preserved`` (around all routes): every submodule's training flag; which tensors are the
  module's parameters and buffers (a forward that reassigns ``self.buf`` or ``weight.data`` gets
  the original objects and storage back); buffer values when a train-mode forward may run.
  Cost: a few attribute reads per tensor, plus a copy of the buffers in train mode.
* the values a route's forward may change: ``values_preserved`` copies every parameter and
  buffer and puts them back (``route_guard``: around a route with ``verify=True``, which runs the
  forward eagerly); the TorchScript route copies only what its traced forward writes to
  (``compat.routing.copy_on_write``). The torch.export route traces with fake tensors and never
  writes to the model, so it pays for neither.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from compat.installed import torch_internals


@dataclass
class _TensorState:
    tensor: Any
    layout: tuple[Any, ...]  # storage pointer, offset, shape, stride, dtype
    #: keeps the original storage for a ``.data =`` reassignment: a plain CPU tensor's
    #: ``UntypedStorage`` (its bytes are what ``raw_copies`` copies), else a detached alias
    storage: Any
    copy: Any = None


@functools.cache
def _kinds() -> tuple[tuple[type, ...], Any, type]:
    """torch's own tensor classes, the dense layout, the storage class."""
    import torch

    return (torch.Tensor, torch.nn.Parameter), torch.strided, torch.UntypedStorage


def _layout(t: Any) -> tuple[Any, ...]:
    try:
        return (t.untyped_storage().data_ptr(), t.storage_offset(), t.shape, t.stride(), t.dtype)
    except (RuntimeError, NotImplementedError, ValueError):  # sparse, uninitialized (lazy) tensors
        return (id(t),)


def _state(t: Any, copy: bool) -> _TensorState:
    classes, strided, _ = _kinds()
    # a dense CPU tensor of torch's own classes (its storage's memory is its values) gets no
    # detached alias, a third of the cost per tensor: its storage object keeps the storage, and
    # an alias is made only to undo a reassignment
    if type(t) in classes and t.is_cpu and t.layout is strided and not t.is_quantized:
        try:
            storage = t.untyped_storage()
            layout = (storage.data_ptr(), t.storage_offset(), t.shape, t.stride(), t.dtype)
            return _TensorState(t, layout, storage, _clone(t) if copy else None)
        except (RuntimeError, NotImplementedError, ValueError):
            pass
    return _TensorState(t, _layout(t), t.detach(), _clone(t) if copy else None)


def _original(s: _TensorState) -> Any:
    """A tensor on the storage and layout ``s`` recorded (for ``t.data = ...``)."""
    if not isinstance(s.storage, _kinds()[2]):
        return s.storage
    import torch

    _, offset, shape, stride, dtype = s.layout
    return torch.empty(0, dtype=dtype).set_(s.storage, offset, shape, stride)


def _clone(t: Any) -> Any:
    try:
        return t.detach().clone()
    except (RuntimeError, NotImplementedError, ValueError):  # e.g. lazy parameters
        return None


class _Snapshot:
    """Which tensors a module tree holds, their storage, and (optionally) copies of values."""

    def __init__(self, model: Any, copy_params: bool, copy_buffers: bool, tree: list[Any] | None = None) -> None:
        import torch

        self.modules = modules(model) if tree is None else tree
        self.scripted = False  # a module of the tree is TorchScript code
        self.slots = []
        #: modules with no parameter or buffer (activations, containers): restored to none
        self.bare = []
        params: dict[int, Any] = {}
        buffers: dict[int, Any] = {}
        script_module, module_slots = torch.jit.ScriptModule, torch_internals.module_slots
        for m in self.modules:
            if isinstance(m, script_module):
                self.scripted = True
                own_params, own_buffers = m.parameters(recurse=False), m.buffers(recurse=False)
            else:
                live_params, live_buffers, non_persistent = module_slots(m)
                if not (live_params or live_buffers or non_persistent):
                    self.bare.append(m)
                    continue
                self.slots.append((m, dict(live_params), dict(live_buffers), set(non_persistent)))
                own_params, own_buffers = live_params.values(), live_buffers.values()
            for t in own_params:
                if t is not None:
                    params.setdefault(id(t), t)
            for t in own_buffers:
                if t is not None:
                    buffers.setdefault(id(t), t)
        self.params = [_state(t, copy_params) for t in params.values()]
        self.buffers = [_state(t, copy_buffers) for i, t in buffers.items() if i not in params]
        self.tensors = self.params + self.buffers
        self._nbytes: tuple[float, float] | None = None

    def nbytes(self) -> tuple[float, float]:
        """Bytes of the parameters, and of parameters and buffers (one pass, kept; inf when a
        tensor has no size yet: an uninitialized lazy parameter)."""
        if self._nbytes is None:
            try:
                params = sum(s.tensor.numel() * s.tensor.element_size() for s in self.params)
                self._nbytes = (params, params + sum(s.tensor.numel() * s.tensor.element_size()
                                                     for s in self.buffers))
            except (RuntimeError, ValueError):
                self._nbytes = (float("inf"), float("inf"))
        return self._nbytes

    def restore(self) -> None:
        module_slots = torch_internals.module_slots
        for m in self.bare:  # had none: anything the forward registered goes
            for slot in module_slots(m):
                slot.clear()
        for m, params, buffers, non_persistent in self.slots:
            live_params, live_buffers, live_non_persistent = module_slots(m)
            if _changed(live_params, params) or _changed(live_buffers, buffers):
                live_params.clear()
                live_params.update(params)
                live_buffers.clear()
                live_buffers.update(buffers)
                for name in (*params, *buffers):
                    m.__dict__.pop(name, None)  # a plain attribute shadowing a restored one
            if live_non_persistent != non_persistent:
                live_non_persistent.clear()
                live_non_persistent.update(non_persistent)
        restore_values(self.tensors)


def modules(model: Any) -> list[Any]:
    """``list(model.modules())`` (each module once, the model first), without the name prefixes
    ``named_modules`` builds."""
    found = {id(model): model}
    stack = [model]
    while stack:
        children = torch_internals.module_children(stack.pop())
        for child in reversed(children):
            if child is not None and id(child) not in found:
                found[id(child)] = child
                stack.append(child)
    return list(found.values())


def restore_values(states: list[_TensorState]) -> None:
    """Each tensor's storage back (undoing a ``.data =`` reassignment), then its copied values:
    unconditionally, as a write through ``.data`` or numpy does not move the version counter and
    a copy costs about what a comparison would; through ``.data``, so the restore does not move
    it either (an autograd graph the caller holds stays valid)."""
    moved = [s for s in states if _layout(s.tensor) != s.layout]
    if not moved and all(s.copy is None for s in states):
        return  # the common case: nothing to put back, so no grad-mode switch either
    import torch

    with torch.no_grad():
        for s in moved:
            with contextlib.suppress(RuntimeError):
                s.tensor.data = _original(s)
        for s in states:
            if s.copy is not None:
                with contextlib.suppress(RuntimeError, NotImplementedError):
                    s.tensor.data.copy_(s.copy)


@dataclass
class _RawCopy:
    """The bytes of one storage's memory, and the storage (held: its memory stays where the
    bytes go back, even if the model lets go of it)."""

    storage: Any
    ptr: int
    data: bytes


#: a storage copied as bytes may exceed its tensor's bytes by this much (a parameter that is a
#: view of a larger storage: a flat buffer shared by several is copied once; a small view of a
#: huge storage is copied through torch instead)
_RAW_SLACK = 1 << 20


def raw_copies(states: list[_TensorState]) -> tuple[list[_RawCopy], list[_TensorState]]:
    """The bytes of each plain CPU tensor's original storage (each storage once), and the
    states of the tensors that cannot be copied so (other devices, sparse, quantized, subclasses,
    lazy, a small view of a huge storage).

    Why bytes: a copy through torch costs a few microseconds of dispatch per tensor (a clone,
    then a ``copy_`` back), which for a small model's hundred tensors is a tenth of its whole
    TorchScript export; reading the memory costs a fraction, and ``raw_restore`` writes back only
    the storages whose bytes differ (moving no version counter, as a write through ``.data``)."""
    import ctypes

    storage_class = _kinds()[2]
    raw: list[_RawCopy] = []
    others: list[_TensorState] = []
    seen: set[int] = set()
    for s in states:
        storage = s.storage
        if not isinstance(storage, storage_class):
            others.append(s)
            continue
        try:
            ptr, size = storage.data_ptr(), storage.nbytes()
            if size > s.tensor.numel() * s.tensor.element_size() + _RAW_SLACK:
                others.append(s)
                continue
        except (RuntimeError, NotImplementedError, ValueError):
            others.append(s)
            continue
        if size == 0 or ptr in seen:
            continue
        seen.add(ptr)
        raw.append(_RawCopy(storage, ptr, ctypes.string_at(ptr, size)))
    return raw, others


def raw_restore(copies: list[_RawCopy]) -> None:
    """Write each storage's saved bytes back where they differ (a resized storage is sized back)."""
    import ctypes

    for c in copies:
        size = len(c.data)
        try:
            if c.storage.nbytes() != size:
                c.storage.resize_(size)
            ptr = c.storage.data_ptr()
        except (RuntimeError, NotImplementedError, ValueError):
            continue
        if ptr and ctypes.string_at(ptr, size) != c.data:
            ctypes.memmove(ptr, c.data, size)


def _changed(live: dict[str, Any], saved: dict[str, Any]) -> bool:
    if not saved:
        return bool(live)
    if live.keys() != saved.keys():
        return True
    for k, v in saved.items():
        if live[k] is not v:
            return True
    return False


#: the snapshots ``preserved`` holds open on this thread (innermost last): a guard inside it copies
#: the values of the tensors its model's snapshot found instead of walking the model again
_open = threading.local()


def open_snapshot(model: Any) -> _Snapshot | None:
    """The snapshot of ``model`` the innermost ``preserved`` on this thread holds, if any."""
    stack = getattr(_open, "stack", None)
    return stack[-1][1] if stack and stack[-1][0] is model else None


def preserved(model: Any, will_train: bool = True) -> contextlib.AbstractContextManager[None]:
    """Restore every submodule's training flag, the identity and storage of every parameter and
    buffer, and buffer values when a forward may run in train mode (the whole model is not in
    eval mode, or ``will_train``), whatever happens."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return contextlib.nullcontext()
    return _Preserved(model, will_train)


class _Preserved:
    """``preserved``'s guard. A class rather than a generator: it runs around every export, and
    a generator-based context manager costs a few microseconds more per use."""

    __slots__ = ("flags", "model", "snapshot", "stack", "tree", "will_train")

    def __init__(self, model: Any, will_train: bool) -> None:
        self.model, self.will_train = model, will_train

    def __enter__(self) -> None:
        self.tree = tree = modules(self.model)
        self.flags = flags = [m.training for m in tree]
        self.snapshot = _Snapshot(self.model, copy_params=False, copy_buffers=self.will_train or any(flags),
                                  tree=tree)
        self.stack = _open.__dict__.setdefault("stack", [])
        self.stack.append((self.model, self.snapshot))

    def __exit__(self, *exc_info: object) -> None:
        self.stack.pop()
        for m, flag in zip(self.tree, self.flags):
            if m.training is not flag:
                m.training = flag
        self.snapshot.restore()


def values_preserved(model: Any) -> contextlib.AbstractContextManager[None]:
    """Copy every parameter and buffer, and put back whatever the block changed (their values,
    and inside ``preserved`` of the same model only those: ``preserved`` restores identities)."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return contextlib.nullcontext()
    return _ValuesPreserved(model)


class _ValuesPreserved:
    """``values_preserved``'s guard (a class for the reason ``_Preserved`` gives)."""

    __slots__ = ("model", "raw", "snapshot", "states")

    def __init__(self, model: Any) -> None:
        self.model = model

    def __enter__(self) -> None:
        snapshot = open_snapshot(self.model)
        if snapshot is not None:
            # ``preserved`` puts storage and identities back after this: only the values here
            self.raw, others = raw_copies(snapshot.tensors)
            self.states = [copied(s) for s in others]
            self.snapshot = None
        else:
            self.snapshot = _Snapshot(self.model, copy_params=True, copy_buffers=True)

    def __exit__(self, *exc_info: object) -> None:
        if self.snapshot is not None:
            self.snapshot.restore()
            return
        try:
            raw_restore(self.raw)
        finally:
            restore_values(self.states)


def snapshot(model: Any) -> _Snapshot:
    """Which tensors ``model`` holds, without copies (what ``preserved`` records)."""
    return _Snapshot(model, copy_params=False, copy_buffers=False)


def copied(s: _TensorState) -> _TensorState:
    """``s`` with a copy of its tensor's current values."""
    return _TensorState(s.tensor, s.layout, s.storage, _clone(s.tensor))


def route_guard(model: Any, route: str, verify: bool = False) -> contextlib.AbstractContextManager[None]:
    """What one route needs restored around it: ``values_preserved`` with ``verify`` (the model's
    real forward runs eagerly), else nothing: the TorchScript route guards its own trace
    (``compat.routing.copy_on_write``, in ``legacy.route``) and the torch.export route traces
    with fake tensors, never writing to the model."""
    del route  # every route needs the same here; kept for the caller's call form
    if verify:
        return values_preserved(model)
    return contextlib.nullcontext()


@contextlib.contextmanager
def inputs_preserved(args: Any, kwargs: Any) -> Iterator[None]:
    """Undo the marks torch.export leaves on example inputs (``_dynamo_dynamic_indices`` and
    friends): a failed attempt would otherwise make the next export of the same tensor dynamic."""
    from compat.request.normalize import flat_tensors

    tensors = flat_tensors((args, kwargs))
    saved = [(t, {k: v for k, v in vars(t).items() if k.startswith("_dynamo_")}) for t in tensors]
    try:
        yield
    finally:
        for t, marks in saved:
            for k in [k for k in vars(t) if k.startswith("_dynamo_") and k not in marks]:
                delattr(t, k)
            for k, v in marks.items():
                setattr(t, k, v)
