"""Imports a fix left unused: ``from torch.onnx import register_custom_op_symbolic`` once the
call uses ``compat.register_custom_op_symbolic``, ``TrainingMode`` once ``training=`` is dropped.

The stdlib ``ast`` finds the candidates (names an import binds that the module read before the
fix and reads nowhere after it); libcst's scope analysis proves each one unused in the rewritten
module (string annotations and every scope count) before its import is removed. Only names the
fix stopped reading are candidates: an import that was unused before stays. Only names taken
from torch's own modules (``from torch.onnx import X``, ``import torch.onnx.utils as u``) go:
importing a user's module may register symbolics or custom ops as it runs, and ``import torch``
itself stays (the code exports a torch model; a plain ``import torch`` a linter can flag).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Mapping

import libcst as cst
from libcst.metadata import (
    ImportAssignment,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    ScopeProvider,
)

from .model import Edit


def reads(tree: ast.Module) -> Counter:
    """How often the module reads each name."""
    return Counter(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                   and isinstance(n.ctx, ast.Load))


def _torch_module(name: str | None) -> bool:
    return name is not None and (name == "torch" or name.startswith("torch."))


def _bound(tree: ast.Module) -> set[str]:
    """Names bound by imports from torch's modules (see the module's docstring)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _torch_module(node.module):
            out |= {a.asname or a.name for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Import):
            out |= {a.asname for a in node.names if a.asname and _torch_module(a.name)}
    return out


def _from_torch(node: cst.CSTNode, name: str) -> bool:
    """Whether libcst's import statement ``node`` binds ``name`` from torch's modules."""
    if isinstance(node, cst.ImportFrom):
        return not node.relative and node.module is not None and _torch_module(_code(node.module))
    return isinstance(node, cst.Import) and any(
        _binds(a) == name and a.asname is not None and _torch_module(_code(a.name))
        for a in node.names)


def _exported(tree: ast.Module) -> set[str]:
    """Names ``__all__`` lists (re-exported on purpose)."""
    out: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = getattr(node, "value", None)
            out |= {n.value for n in ast.walk(value) if isinstance(n, ast.Constant)
                    and isinstance(n.value, str)} if value is not None else set()
    return out


def newly_unread(before: Counter, after: ast.Module) -> set[str]:
    """Names an import binds in ``after`` that were read ``before`` (``reads`` of the module
    before the fix) and are read nowhere in ``after``."""
    new = reads(after)
    return {n for n in _bound(after) - _exported(after) if before[n] and not new[n]}


def drop_edits(text: str, names: set[str]) -> list[Edit]:
    """``drop_import`` edits for the imports of ``names`` in ``text`` that libcst's scope
    analysis finds unreferenced (keyed by their statement, one per bound name). An import that
    is its block's only statement stays (``try: from torch.onnx import X`` would become
    ``try: pass``)."""
    wrapper = MetadataWrapper(cst.parse_module(text))
    scopes = wrapper.resolve(ScopeProvider)
    positions = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    edits: list[Edit] = []
    for scope in set(scopes.values()):
        if scope is None:
            continue
        for assignment in scope.assignments:
            if not isinstance(assignment, ImportAssignment) or assignment.name not in names \
                    or not _from_torch(assignment.node, assignment.name):
                continue
            if assignment.references or any(a.references for a in scope.assignments[assignment.name]
                                             if a is not assignment):
                continue
            if _alone(assignment.node, parents):
                continue
            start = positions[assignment.node].start
            edits.append(Edit("drop_import", (start.line, start.column), (assignment.name,)))
    return sorted(set(edits), key=lambda e: (e.key, e.args))


def _alone(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> bool:
    """Whether import statement ``node`` is all its block holds."""
    line = parents[node]
    block = parents[line]
    alone_on_line = isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1
    return alone_on_line and (isinstance(block, cst.IndentedBlock) and len(block.body) == 1) \
        or isinstance(line, cst.SimpleStatementSuite) and len(line.body) == 1


def without(node: cst.Import | cst.ImportFrom, names: set[str]
            ) -> cst.Import | cst.ImportFrom | cst.RemovalSentinel:
    """``node`` without the aliases binding ``names`` (the whole statement when none is left)."""
    if isinstance(node.names, cst.ImportStar):
        return node
    aliases = list(node.names)
    kept = [a for a in aliases if _binds(a) not in names]
    if len(kept) == len(aliases):
        return node
    if not kept:
        return cst.RemoveFromParent()
    if kept[-1] is not aliases[-1]:  # the last one went: its (lack of a) comma ends the list
        kept[-1] = kept[-1].with_changes(comma=aliases[-1].comma)
    parens = isinstance(node, cst.ImportFrom) and node.lpar is not None
    if not parens and isinstance(kept[-1].comma, cst.Comma):
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    new = node.with_changes(names=kept)
    if parens and len(kept) == 1 and "#" not in _code(kept[0]):  # ``(TrainingMode)``: no parens
        alias = kept[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        new = new.with_changes(names=[alias], lpar=None, rpar=None)
    return new


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _binds(alias: cst.ImportAlias) -> str:
    """What libcst's scope analysis calls the name an alias binds."""
    return _code(alias.asname.name if alias.asname is not None else alias.name)
