"""One real third-party symbolic: where it comes from, how it is registered, a model reaching it."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Setup:
    """What a case builds once its source is loaded."""

    model: Any
    args: tuple[Any, ...]
    #: (name, fn, opset) for ``register_custom_op_symbolic``
    registrations: list[tuple[str, Callable[..., Any], int]] = field(default_factory=list)
    #: (autograd.Function class, symbolic fn): mmdeploy's rewriter sets ``cls.symbolic``
    symbolic_overrides: list[tuple[type, Callable[..., Any]]] = field(default_factory=list)
    #: a registration function of the package itself (``register()``) and its undo
    register: Callable[[], Any] | None = None
    unregister: Callable[[], Any] | None = None
    opset: int = 11
    custom_opsets: dict[str, int] | None = None
    #: False where the model is random (a Dropout in training mode): structure only
    compare_values: bool = True
    #: the symbolic, as an error naming it would (qualified name)
    symbolic: Callable[..., Any] | None = None


@dataclass
class Case:
    name: str
    #: "<distribution>: <module> <qualified name>", where the symbolic's source is
    origin: str
    #: importable packages (or pinned source wheels) the case needs
    needs: tuple[str, ...]
    build: Callable[[], Setup]

    def missing(self) -> str | None:
        """Why this case cannot run here, or None."""
        from . import sources

        for need in self.needs:
            if need in sources.pins():
                if not sources.available(need):
                    return f"{need}=={sources.pins()[need]} not downloaded (make symbolic-sources)"
            elif importlib.util.find_spec(need) is None:
                return f"{need} is not installed"
        return None


@contextlib.contextmanager
def applied(setup: Setup) -> Iterator[None]:
    """The case's registrations, as its package makes them, for the block's duration."""
    from compat.routing import registry

    saved = [(cls, cls.__dict__.get("symbolic")) for cls, _ in setup.symbolic_overrides]
    for cls, fn in setup.symbolic_overrides:
        cls.symbolic = fn  # as mmdeploy's SymbolicRewriter.enter does
    for name, fn, opset in setup.registrations:
        registry.register_custom_op_symbolic(name, fn, opset)
    if setup.register is not None:
        setup.register()
    try:
        yield
    finally:
        if setup.unregister is not None:
            setup.unregister()
        for name, _, opset in setup.registrations:
            registry.unregister_custom_op_symbolic(name, opset)
        for cls, old in saved:
            if old is None:
                del cls.symbolic
            else:
                cls.symbolic = old


def symbolic_names(setup: Setup) -> set[str]:
    """Names an error about this case's symbolic may use."""
    fns = [fn for _, fn, _ in setup.registrations] + [fn for _, fn in setup.symbolic_overrides]
    if setup.symbolic is not None:
        fns.append(setup.symbolic)
    names = set()
    for fn in fns:
        fn = getattr(fn, "__wrapped__", fn)
        names.add(getattr(fn, "__qualname__", "") or "")
        names.add(getattr(fn, "__name__", "") or "")
    names.update(name for name, _, _ in setup.registrations)
    return {n for n in names if n}
