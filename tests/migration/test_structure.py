"""The rewriter's structure: rules registered in one place, the analysis blind to them, no import
cycles inside ``migration/``, and from ``compat`` only its torch-free modules."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from compat.catalog import BY_CODE
from migration import registry
from migration.rules import FAMILIES, RULES

PACKAGE = Path(__file__).resolve().parents[2] / "migration"
#: the torch-free modules of compat the rewriter may import
COMPAT_ALLOWED = {"compat", "compat.catalog", "compat.catalog_facts", "compat.commands",
                  "compat.errors", "compat.policy.config", "compat.files", "compat.symbolic_ops",
                  "compat.torch_apis"}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {_module(p) for p in FILES}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` outside ``if TYPE_CHECKING:`` blocks (type-only imports)."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _imports(path: Path) -> set[str]:
    """The modules ``path`` imports at run time: function-level imports count, ``if
    TYPE_CHECKING:`` ones do not; ``from pkg import sub`` is an edge to ``pkg.sub``, not ``pkg``."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = {f"{mod}.{a.name}" for a in node.names} & MODULES
            out.update(subs)
            if len(subs) < len(node.names):
                out.add(mod)
    return out


GRAPH = {_module(p): _imports(p) for p in FILES}


def test_rule_hooks_run_in_the_documented_order() -> None:
    assert RULES.names("call") == ["onx1.check_wrapper_call", "onx4.check_call",
                                   "onx3.check_call"]
    assert RULES.names("routed_export") == ["onx2.check_external_data", "onx1.check_export"]
    assert RULES.names("import") == ["onx3.check_import", "onx4.check_import"]
    assert RULES.names("route") == ["onx0.check_export"]
    registered = {f.__module__ for fs in RULES.hooks.values() for f in fs}
    assert registered == {m.__name__ for m in FAMILIES.values()}
    assert set(RULES.hooks) == set(registry.HOOKS)


def test_every_catalog_family_has_its_rule_module() -> None:
    families = {code[:4] for code in BY_CODE if code.startswith("ONX")}
    assert families == set(FAMILIES)


def test_an_unknown_hook_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown rule hook 'on_call'"):
        registry.register("on_call")


def test_only_the_rule_package_imports_rule_modules() -> None:
    for module, imports in GRAPH.items():
        if module.startswith("migration.rules"):
            continue
        rule_imports = {i for i in imports if i.startswith("migration.rules.")}  # modules only
        assert not rule_imports, f"{module} imports {rule_imports}"
    users = {m for m, imports in GRAPH.items() if "migration.rules" in imports}
    assert users == {"migration.core"}, users  # the text core hands the rules to the analysis
    for module in ("migration.analysis", "migration.resolve", "migration.model"):
        assert not {i for i in GRAPH[module] if i.startswith(("migration.rules",
                                                              "migration.registry"))}


def test_no_import_cycles_inside_migration() -> None:
    edges = {m: {i for i in imports if i in GRAPH and i != m} for m, imports in GRAPH.items()}

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    cycles = {m: sorted(edges[m]) for m in GRAPH if m in reach(m)}
    assert not cycles, cycles


def test_the_text_core_never_touches_the_file_system() -> None:
    assert not GRAPH["migration.core"] & {"os", "io", "tempfile", "shutil", "pathlib",
                                          "migration.textio", "migration.files",
                                          "migration.notebook", "migration.sources"}


def test_migration_imports_only_torch_free_compat_modules() -> None:
    for module, imports in GRAPH.items():
        bad = {i for i in imports if i.split(".", 1)[0] == "compat"} - COMPAT_ALLOWED
        assert not bad, f"{module} imports {bad}"
        assert not {i for i in imports if i.split(".", 1)[0] in ("torch", "legacy", "dynamo")}


def test_a_listed_rule_module_without_hooks_is_an_error() -> None:
    idle = types.ModuleType("migration.rules.onx9")
    with pytest.raises(RuntimeError, match=r"without a registered hook: \['migration.rules.onx9'\]"):
        registry.collect([*FAMILIES.values(), idle])


def test_rule_families_import_no_other_family_even_for_types() -> None:
    """Shared facts of the families (``Route``, ``pin_reason``, the dynamic-axes reading) live in
    modules of their own (issue 30): no family imports another, not even under TYPE_CHECKING."""
    families = {m.__name__ for m in FAMILIES.values()}
    for path in FILES:
        module = _module(path)
        if module not in families:
            continue
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [f"migration.rules.{node.module}"] if node.module else \
                    [f"migration.rules.{a.name}" for a in node.names]
                found.update(n for n in names if n in families)
        assert not found - {module}, f"{module} imports {sorted(found)}"
