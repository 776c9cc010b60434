"""migration.astwalk's ordered walk gives ``ast.walk``'s nodes in its order, contexts aside."""

from __future__ import annotations

import ast
import inspect

from migration import astwalk, symbolic_translate


def test_walk_in_order_is_ast_walk_without_expression_contexts() -> None:
    # a real module of ours: defs, classes, comprehensions, try/except, f-strings, match-free
    tree = ast.parse(inspect.getsource(symbolic_translate))
    expected = [n for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]
    assert list(astwalk.walk_in_order(tree)) == expected
    # the first def of a name is the one ast.walk meets first (symbolic_plan relies on it)
    source = "def f():\n    def g(): return 1\n    return g\ndef g(): return 2\n"
    first = next(n for n in astwalk.walk_in_order(ast.parse(source))
                 if isinstance(n, ast.FunctionDef) and n.name == "g")
    assert first.lineno == 4


def test_clone_is_a_deep_copy() -> None:
    tree = ast.parse(inspect.getsource(symbolic_translate))
    copied = astwalk.clone(tree)
    assert ast.dump(copied, include_attributes=True) == ast.dump(tree, include_attributes=True)
    originals = {id(n) for n in ast.walk(tree) if not isinstance(n, ast.expr_context)}
    assert not any(id(n) in originals for n in ast.walk(copied) if not isinstance(n, ast.expr_context))
    copied.body[0].lineno = 999  # the copy's changes stay there
    assert tree.body[0].lineno != 999
