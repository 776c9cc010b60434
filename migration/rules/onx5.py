"""ONX501: branches only a torch older than the supported minimum reaches.

``if is_torch_less_than_1_11:`` (transformers' ``pytorch_utils`` flag), ``if torch.__version__ <
"1.11":`` or ``if version.parse(torch.__version__) < version.parse("1.11"):``: the old-torch branch
is dead code once the code needs torch >= the ``--target-torch`` minimum (default: the first
torch taking ``dynamo=``), and rewriting its export call into keywords old torch rejects would
be wrong. It is reported for deletion, and only the live branch is migrated.
"""

from __future__ import annotations

import ast
import re

from compat.torch_apis import DYNAMO_KEYWORD_SINCE

from ..analysis import Context, literal
from ..registry import register
from ..resolve import Scope, dotted

Version = tuple[int, int]
_FLAG = re.compile(r"^_?(?:is_)?torch_(?:version_)?(less_than|lt|greater_or_equal(?:_than)?|ge"
                   r"|at_least)_(\d+)_(\d+)$", re.IGNORECASE)
_TORCH_VERSION = re.compile(r"\btorch\s*\.\s*__version__\b")
_VERSION = re.compile(r"^\s*(\d+)\.(\d+)")


def minimum(ctx: Context) -> Version:
    """The oldest torch the migrated code runs on."""
    target = ctx.facts.get("target_torch")
    return tuple(target) if target is not None else DYNAMO_KEYWORD_SINCE  # type: ignore[return-value]


def _version_literal(ctx: Context, node: ast.expr) -> Version | None:
    """``"1.11"`` or ``version.parse("1.11")`` / ``Version("1.11")``."""
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    value = literal(node)
    m = _VERSION.match(value) if isinstance(value, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def _is_torch_version(ctx: Context, node: ast.expr, depth: int = 0) -> bool:
    """``torch.__version__`` (parsed or not), or a module name bound once to it."""
    if _TORCH_VERSION.search(ctx.src(node)):
        return True
    names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    return depth < 3 and any(value is not None and _is_torch_version(ctx, value, depth + 1)
                             for value in (_module_value(ctx, n) for n in names))


def gate(ctx: Context, test: ast.expr, depth: int = 0) -> tuple[bool, Version] | None:
    """``(True, V)`` when ``test`` holds exactly on torch < V, ``(False, V)`` when it holds
    exactly on torch >= V; None when it is not a recognised torch version test."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = gate(ctx, test.operand, depth)
        return (not inner[0], inner[1]) if inner else None
    if isinstance(test, (ast.Name, ast.Attribute)):
        parts = dotted(test)
        m = _FLAG.match(parts[-1]) if parts else None
        if m:
            below = m.group(1).lower() in ("less_than", "lt")
            return below, (int(m.group(2)), int(m.group(3)))
        if isinstance(test, ast.Name) and depth < 3:  # a module flag: X = <version test>
            value = _module_value(ctx, test.id)
            return gate(ctx, value, depth + 1) if value is not None else None
        return None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if _is_torch_version(ctx, right) and not _is_torch_version(ctx, left):
            left, right = right, left
            op = {ast.Lt: ast.Gt(), ast.LtE: ast.GtE(), ast.Gt: ast.Lt(),
                  ast.GtE: ast.LtE()}.get(type(op), op)
        if not _is_torch_version(ctx, left):
            return None
        v = _version_literal(ctx, right)
        if v is None:
            return None
        bump = (v[0], v[1] + 1)
        if isinstance(op, ast.Lt):
            return True, v
        if isinstance(op, ast.LtE):
            return True, bump
        if isinstance(op, ast.GtE):
            return False, v
        if isinstance(op, ast.Gt):
            return False, bump
    return None


def _module_value(ctx: Context, name: str) -> ast.expr | None:
    """The value of ``name``'s only binding, a plain module-level assignment."""
    if "flags" not in ctx.facts:
        counts = ctx.resolver.stores
        values: dict[str, ast.expr] = {}
        for stmt in ctx.tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name):
                values[stmt.targets[0].id] = stmt.value
        ctx.facts["flags"] = {k: v for k, v in values.items() if counts.get(k) == 1}
    return ctx.facts["flags"].get(name)


@register("if")
def check_if(ctx: Context, node: ast.If, scope: list[Scope]) -> list[ast.stmt] | None:
    """ONX501 on an ``if`` whose one branch only old torch reaches; returns the statements
    still to analyse (the live branch), or None when the ``if`` is not such a gate."""
    found = gate(ctx, node.test)
    if found is None:
        return None
    below, version = found
    if version > minimum(ctx):
        return None  # both branches run on some supported torch
    dead, live = (node.body, node.orelse) if below else (node.orelse, node.body)
    if not dead:
        return list(live)
    v = f"{version[0]}.{version[1]}"
    mn = ".".join(map(str, minimum(ctx)))
    where = dead[0] if dead is node.orelse else node
    ctx.emit("ONX501", where, note=f"only torch < {v} runs this branch; the code needs torch "
                                   f">= {mn}: delete it", anchor=node)
    return list(live)
