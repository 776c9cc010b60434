"""Fast traversal of stdlib ``ast`` trees: the rewriter's one way to walk a whole module.

``ast.iter_child_nodes``, ``ast.walk`` and ``ast.NodeVisitor`` look every field up through
generators on every node, and visit each ``Load``/``Store`` context node. Here each node class's
child-holding fields are computed once, scalar fields (names, levels, constants' values) and
expression contexts are skipped, and children come in field order as ``ast.iter_child_nodes``
gives them. On a tree of real code this halves ``compat.migrate --check``
(benchmarks/bench_migrate.py).
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Callable, Iterator
from typing import TypeVar

# Fields that never hold a node (or only an expression context, which no rule visits).
_SCALAR_FIELDS = frozenset({
    "ctx", "id", "attr", "name", "arg", "asname", "module", "level", "kind", "type_comment",
    "conversion", "simple", "is_async",
})
# List fields that may hold something other than nodes (None, names as strings).
_MIXED_LISTS = frozenset({
    (ast.Dict, "keys"), (ast.arguments, "kw_defaults"), (ast.Global, "names"),
    (ast.Nonlocal, "names"), (ast.MatchClass, "kwd_attrs"),
})
_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {ast.Constant: ()}
_T = TypeVar("_T")


def _fields(cls: type) -> tuple[tuple[str, bool], ...]:
    """``cls``'s fields that may hold nodes, each with whether a list there is only nodes."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = tuple(
            (f, (cls, f) not in _MIXED_LISTS)
            for f in cls._fields  # type: ignore[attr-defined]
            if f not in _SCALAR_FIELDS or (f == "name" and cls.__name__ == "TypeAlias"))
    return fields


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """The direct child nodes of ``node``, in field order (no expression contexts)."""
    out: list[ast.AST] = []
    for name, only_nodes in _fields(node.__class__):
        value = getattr(node, name, None)
        if value.__class__ is list:
            if only_nodes:
                out += value
            else:
                out += [v for v in value if isinstance(v, ast.AST)]
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and every node below it (no expression contexts); order unspecified."""
    todo = [node]
    pop, extend = todo.pop, todo.extend
    while todo:
        node = pop()
        extend(child_nodes(node))
        yield node


def walk_in_order(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk(node)``'s nodes in ``ast.walk``'s order (breadth first), without expression
    contexts: for walks whose result follows the order (the first def of a name, findings in
    source order)."""
    todo = deque([node])
    popleft, extend = todo.popleft, todo.extend
    while todo:
        node = popleft()
        extend(child_nodes(node))
        yield node


def clone(node: _T) -> _T:
    """A deep copy of an ``ast`` tree (``copy.deepcopy``'s result, several times faster): every
    node copied with its fields and positions; leaf values (names, constants' values, which
    ``ast`` keeps immutable) and expression contexts (stateless) are shared."""
    cls = node.__class__
    if cls is list:
        return [clone(v) for v in node]  # type: ignore[attr-defined, return-value]
    if not isinstance(node, ast.AST) or isinstance(node, ast.expr_context):
        return node
    new = cls.__new__(cls)
    new.__dict__.update({k: clone(v) for k, v in node.__dict__.items()})
    return new


class Visitor:
    """``ast.NodeVisitor`` with the method lookup cached per node class and ``child_nodes``."""

    _dispatch: dict[type, Callable[[Visitor, ast.AST], object] | None]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls._dispatch = {}

    def visit(self, node: ast.AST) -> None:
        cls = node.__class__
        try:
            method = self._dispatch[cls]
        except KeyError:
            method = self._dispatch[cls] = getattr(type(self), "visit_" + cls.__name__, None)
        if method is None:
            for child in child_nodes(node):
                self.visit(child)
        else:
            method(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        for child in child_nodes(node):
            self.visit(child)
