"""The cheap resolver agrees with libcst's QualifiedNameProvider on the fixtures."""

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

from migration.resolve import Resolver

FIX = Path(__file__).parent / "fixtures"


class _Scopes(ast.NodeVisitor):
    def __init__(self, resolver):
        self.r = resolver
        self.stack = [resolver.tree]
        self.out = {}

    def visit_FunctionDef(self, node):
        self.stack.append(node)
        self.generic_visit(node)
        self.stack.pop()

    def visit_Call(self, node):
        from migration.resolve import scope_chain

        q = {n for n in self.r.qualnames(node.func, scope_chain(self.stack)) if n.startswith("torch")}
        self.out[(node.lineno, node.col_offset)] = q
        self.generic_visit(node)


class _Ref(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self):
        self.out = {}

    def visit_Call(self, node):
        p = self.get_metadata(PositionProvider, node).start
        quals = self.get_metadata(QualifiedNameProvider, node.func, set())
        self.out[(p.line, p.column)] = {q.name for q in quals if q.name.startswith("torch")}


@pytest.mark.parametrize("name", ["aliases.py", "legacy_scripts/dynamic_axes_alias.py"])
def test_resolver_matches_qualified_name_provider(name):
    text = (FIX / name).read_text()
    v = _Scopes(Resolver(ast.parse(text)))
    v.visit(v.r.tree)
    visitor = _Ref()
    MetadataWrapper(cst.parse_module(text)).visit(visitor)
    ref = visitor.out
    assert v.out.keys() == ref.keys()
    torch_calls = 0
    for k, quals in ref.items():
        if quals:
            torch_calls += 1
            assert v.out[k] == quals, k
        else:  # same-file re-exports (exporter = tonnx.export) are seen only by the resolver
            assert v.out[k] in (set(), {"torch.onnx.export"}), k
    assert torch_calls >= 4
