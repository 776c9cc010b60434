"""The rule registry: each rule module marks its hooks with ``@register(hook)``, the walker in
``analysis.py`` calls them through :class:`Rules`.

Nothing here imports a rule: ``migration/rules/__init__.py`` lists the rule modules (importing
them registers their hooks) and builds the :data:`~migration.rules.RULES` the text core hands to
the analysis. The hooks of one kind run in ascending ``order`` (ties: registration order).

Hooks and their signatures (``ctx``: the module's ``Context``, ``scope``: the scope stack):

- ``prepare(ctx)``: module-level facts, before the walk.
- ``call(ctx, node, scope, quals)``: every call of a dotted name; a hook returning True says
  the call is an export call (an alias the rewrite turns into ``torch.onnx.export``).
- ``export(ctx, ec)``: an export call, before its route is decided.
- ``route(ctx, ec)``: the one route decision; returns the route the next hooks read.
- ``routed_export(ctx, ec, route)``: an export call whose route is known.
- ``if(ctx, node, scope)``: the statements still to analyse, or None (the first answer wins).
- ``with(ctx, node, scope)``: True when the With item was handled (the first True wins).
- ``import(ctx, node, scope)``, ``class(ctx, node, scope)``, ``reference(ctx, node, scope)``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, TypeVar

from .analysis import EXPORT, Context, build_export_call
from .resolve import Scope

HOOKS = ("prepare", "call", "export", "route", "routed_export", "if", "with", "import", "class",
         "reference")
SINGLE = ("route",)  # exactly one rule provides these

F = TypeVar("F", bound=Callable[..., Any])
_TABLE: dict[str, list[tuple[int, int, Callable[..., Any]]]] = {h: [] for h in HOOKS}


def register(hook: str, *, order: int = 0) -> Callable[[F], F]:
    """Register the decorated function as a ``hook`` (one of :data:`HOOKS`)."""
    if hook not in _TABLE:
        raise ValueError(f"unknown rule hook {hook!r}; expected one of {HOOKS}")

    def deco(func: F) -> F:
        _TABLE[hook].append((order, len(_TABLE[hook]), func))
        return func

    return deco


def collect(families: Iterable[ModuleType]) -> Rules:
    """The hooks the rule modules ``families`` registered, in their running order; a module of
    ``families`` that registered none is an error (its rules would never run)."""
    names = {m.__name__ for m in families}
    hooks = {h: [f for _, _, f in sorted(entries, key=lambda e: e[:2]) if f.__module__ in names]
             for h, entries in _TABLE.items()}
    idle = names - {f.__module__ for fs in hooks.values() for f in fs}
    if idle:
        raise RuntimeError(f"rule modules without a registered hook: {sorted(idle)}")
    return Rules(hooks)


class Rules:
    """The hooks by kind, and the handlers the walker calls."""

    def __init__(self, hooks: dict[str, list[Callable[..., Any]]]) -> None:
        for name in SINGLE:
            if len(hooks.get(name, ())) != 1:
                raise RuntimeError(f"rule hook {name!r} needs exactly one provider, "
                                   f"found {len(hooks.get(name, ()))}")
        self.hooks = hooks
        self.decide_route = hooks["route"][0]

    def names(self, hook: str) -> list[str]:
        """``module.function`` of each hook of one kind, in running order."""
        return [f"{f.__module__.rsplit('.', 1)[-1]}.{f.__name__}" for f in self.hooks[hook]]

    def prepare(self, ctx: Context) -> None:
        for f in self.hooks["prepare"]:
            f(ctx)

    def on_call(self, ctx: Context, node: ast.Call, scope: list[Scope]) -> None:
        if not isinstance(node.func, (ast.Name, ast.Attribute)):
            return
        quals = ctx.qualnames(node.func, scope)
        is_export = False
        for f in self.hooks["call"]:
            is_export = bool(f(ctx, node, scope, quals)) or is_export
        if not (is_export or EXPORT in quals):
            return
        ec = build_export_call(ctx, node, scope)
        ec.custom_symbolics = bool(ctx.facts.get("custom_symbolics"))
        for f in self.hooks["export"]:
            f(ctx, ec)
        route = self.decide_route(ctx, ec)
        for f in self.hooks["routed_export"]:
            f(ctx, ec, route)

    def on_if(self, ctx: Context, node: ast.If, scope: list[Scope]) -> list[ast.stmt] | None:
        for f in self.hooks["if"]:
            live = f(ctx, node, scope)
            if live is not None:
                return live
        return None

    def on_with(self, ctx: Context, node: ast.With, scope: list[Scope]) -> bool:
        return any(f(ctx, node, scope) for f in self.hooks["with"])

    def on_import(self, ctx: Context, node: ast.Import | ast.ImportFrom,
                  scope: list[Scope]) -> None:
        for f in self.hooks["import"]:
            f(ctx, node, scope)

    def on_class(self, ctx: Context, node: ast.ClassDef, scope: list[Scope]) -> None:
        for f in self.hooks["class"]:
            f(ctx, node, scope)

    def on_reference(self, ctx: Context, node: ast.expr, scope: list[Scope]) -> None:
        for f in self.hooks["reference"]:
            f(ctx, node, scope)
