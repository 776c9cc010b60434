"""Import contracts of the four packages, checked over the ``ast`` of every module (no import runs).

* ``migration`` imports from ``compat`` only the torch-free base (``MIGRATION_MAY_IMPORT``), and
  that base never reaches torch, onnx, onnxscript or the route packages, however indirectly.
* ``legacy`` and ``dynamo`` never import each other, ``migration`` or the tools (``compat.tools``);
  ``compat.routing`` never imports the tools either.
* The project's own modules are imported by a string only in ``STRING_IMPORT_BOUNDARIES``.
* No import cycle spans two of compat's rooms (subpackages), nor two modules of ``migration``.

An edge is any ``import`` outside ``if TYPE_CHECKING:`` (function-level ones too: they run) plus
``route_module("pkg.mod")`` calls, the shim's way of reaching its route packages.
``ALLOWED_VIOLATIONS`` lists the edges someone is removing right now; it must end up empty.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compat", "legacy", "dynamo", "migration")
ROUTES = ("legacy", "dynamo")
HEAVY = ("torch", "onnx", "onnxscript", "onnxruntime", "onnx_ir")

#: the only compat modules the rewriter may import (torch-free: facts, commands, errors, files, config)
MIGRATION_MAY_IMPORT = frozenset({
    "compat",  # the package itself (``__version__``); its public API loads lazily
    "compat.catalog",
    "compat.catalog_facts",
    "compat.commands",
    "compat.errors",
    "compat.files",
    "compat.policy.config",
    "compat.symbolic_ops",  # what g.op(...) means: the symbolic-to-onnxscript translation reads it
    "compat.torch_apis",  # which torch has each API a fix writes (--target-torch)
})

#: the modules that import the project's own modules by a string, and why
STRING_IMPORT_BOUNDARIES = {
    "compat._lazy": "the public API's PEP 562 table: `import compat` must not import torch",
    "compat.routing.route_packages": "loads our legacy/dynamo under a private name when a user's "
                                     "same-named package would shadow them",
    "dynamo.downconvert.registry": "the one list of down-conversion adapter modules, "
                                   "loaded on first use",
}
#: modules that import by a computed name, which must never be one of ours: torch's (and
#: transformers') private pieces behind feature probes
DYNAMIC_IMPORTS_OF_OTHERS = frozenset({
    "compat.installed.torch_caps",
    "compat.installed.torch_internals",
    "dynamo.torch_internals",
    "dynamo.hf_caches",
    "dynamo.legacy_api",  # torch's own symbolic_helper / symbolic_opsetN, whose helpers it stands in for
})

#: (importer, imported) edges that break a contract and are being removed; who removes them.
#: The integrator empties this once those changes land.
ALLOWED_VIOLATIONS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    at_import: bool  # runs when the module is imported (not inside a function)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[_module_name(path)] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _resolve(source: str, module: str | None, level: int) -> str:
    """The absolute name ``from <level dots><module>`` means inside ``source``."""
    if level == 0:
        return module or ""
    base = source.split(".") if _is_package(source) else source.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skip.update(id(n) for n in ast.walk(inner))
    return skip


def _calls(tree: ast.AST, name: str, owner: str | None = None) -> Iterator[ast.Call]:
    """Calls of ``name`` (bare, or as ``owner.name`` when ``owner`` is given: ``importlib``)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        bare = isinstance(func, ast.Name) and func.id == name
        qualified = isinstance(func, ast.Attribute) and func.attr == name and (
            owner is None or ast.unparse(func.value) in (owner, f"{owner}.util"))
        if bare or qualified:
            yield node


def _in_functions(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    return inside


def _edges(source: str) -> list[Edge]:
    tree = ast.parse(MODULES[source].read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    deferred = _in_functions(tree)
    out: list[Edge] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        now = id(node) not in deferred
        if isinstance(node, ast.Import):
            out.extend(Edge(source, alias.name, node.lineno, now) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(source, node.module, node.level)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append(Edge(source, sub if sub in MODULES else base, node.lineno, now))
    for call in _calls(tree, "route_module"):
        first = call.args[0] if call.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            out.append(Edge(source, first.value, call.lineno, id(call) not in deferred))
    return out


EDGES = {name: _edges(name) for name in MODULES}


def _ours(target: str) -> str | None:
    """The project module an import names (its nearest existing parent), or None."""
    parts = target.split(".")
    while parts:
        name = ".".join(parts)
        if name in MODULES:
            return name
        parts.pop()
    return None


def _top(name: str) -> str:
    return name.split(".")[0]


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _violations(edges: Iterable[Edge]) -> list[str]:
    return [f"{e.source} (line {e.line}) imports {e.target}" for e in edges
            if (e.source, _ours(e.target) or e.target) not in ALLOWED_VIOLATIONS]


def _closure(start: Iterable[str]) -> dict[str, list[str]]:
    """Every module that using ``start`` can import, with one path to it: all imports of the
    ``start`` modules (their functions run), then what importing each module imports."""
    paths = {name: [name] for name in start}
    todo = list(paths)
    while todo:
        name = todo.pop()
        for edge in EDGES.get(name, []):
            if not edge.at_import and name not in start:
                continue
            target = _ours(edge.target) or edge.target
            if target not in paths:
                paths[target] = [*paths[name], target]
                if target in MODULES:
                    todo.append(target)
    return paths


# --- the rewriter and its torch-free base ---------------------------------------------------------

def test_migration_imports_only_the_torch_free_base_of_compat():
    bad = [e for name in MODULES if _top(name) == "migration" for e in EDGES[name]
           if _top(_ours(e.target) or "") == "compat" and _ours(e.target) not in MIGRATION_MAY_IMPORT]
    assert not _violations(bad), "\n".join(_violations(bad))


def test_migration_never_imports_torch_or_the_routes():
    bad = [e for name in MODULES if _top(name) == "migration" for e in EDGES[name]
           if _top(e.target) in HEAVY + ROUTES]
    assert not _violations(bad), "\n".join(_violations(bad))


def test_the_torch_free_base_never_reaches_torch_or_the_routes():
    reached = _closure(MIGRATION_MAY_IMPORT)
    bad = {name: path for name, path in reached.items() if _top(name) in HEAVY + ROUTES}
    assert not bad, "\n".join(" -> ".join(path) for path in bad.values())


# --- the routes and the tools ---------------------------------------------------------------------

@pytest.mark.parametrize("route", ROUTES)
def test_a_route_never_imports_the_other_route_migration_or_the_tools(route):
    other = next(r for r in ROUTES if r != route)
    bad = [e for name in MODULES if _top(name) == route for e in EDGES[name]
           if _top(e.target) in (other, "migration") or _within(e.target, "compat.tools")]
    assert not _violations(bad), "\n".join(_violations(bad))


def test_routing_never_imports_the_tools():
    bad = [e for name in MODULES if _within(name, "compat.routing") for e in EDGES[name]
           if _within(e.target, "compat.tools")]
    assert not _violations(bad), "\n".join(_violations(bad))


# --- string-keyed imports -------------------------------------------------------------------------

#: expressions our modules use for their own package's name in a computed module name
_OWN_PACKAGE_NAMES = ("__package__", "__name__", "_PACKAGE", "_TOP")


def _names_ours(arg: ast.expr) -> bool | None:
    """Whether a module-name argument names one of ours (None: computed, cannot tell)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value.startswith(".") or _top(arg.value) in PACKAGES + ("torch_onnx_compat",)
    if isinstance(arg, ast.JoinedStr) and arg.values:
        head = arg.values[0]
        if isinstance(head, ast.Constant):
            return _names_ours(head)
        if isinstance(head, ast.FormattedValue) and ast.unparse(head.value) in _OWN_PACKAGE_NAMES:
            return True
    return None


def test_own_modules_are_imported_by_a_string_only_at_the_boundaries():
    found = []
    for name, path in MODULES.items():
        if name in STRING_IMPORT_BOUNDARIES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ("import_module", "__import__", "spec_from_file_location"):
            for call in _calls(tree, fn, owner=None if fn == "__import__" else "importlib"):
                relative = fn == "import_module" and (
                    len(call.args) > 1 or any(k.arg == "package" for k in call.keywords))
                ours = True if relative else _names_ours(call.args[0]) if call.args else None
                if ours or (ours is None and name not in DYNAMIC_IMPORTS_OF_OTHERS):
                    found.append(f"{name}:{call.lineno} {ast.unparse(call)}")
    assert not found, "use a plain import (or add a documented boundary):\n" + "\n".join(found)


def test_the_boundaries_exist_and_load_by_name():
    for name in STRING_IMPORT_BOUNDARIES:
        assert name in MODULES, name
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        assert any(True for _ in _calls(tree, "import_module", owner="importlib")), name


# --- cycles ---------------------------------------------------------------------------------------

def _room(name: str) -> str:
    """A compat module's room: its subpackage (``compat.routing``) or itself for a top-level one."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or _is_package(".".join(parts[:2])) else name


def _cycles(nodes: set[str], same_group) -> list[list[str]]:
    """Strongly connected components (Tarjan) of the module graph on ``nodes`` whose members are
    not all in one group; edges in ALLOWED_VIOLATIONS are left out."""
    graph = {n: sorted({t for e in EDGES[n] if (t := _ours(e.target)) in nodes and t != n
                        and (n, t) not in ALLOWED_VIOLATIONS}) for n in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 and not same_group(component):
                found.append(sorted(component))

    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_spans_two_rooms_of_compat():
    nodes = {n for n in MODULES if _top(n) == "compat" and n != "compat"}
    cycles = _cycles(nodes, lambda c: len({_room(m) for m in c}) == 1)
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_no_import_cycle_in_migration():
    nodes = {n for n in MODULES if _top(n) == "migration" and n != "migration"}
    cycles = _cycles(nodes, lambda c: False)
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_the_rewriter_analysis_never_imports_a_rule():
    """Rules import the analysis (and the registry); the analysis takes its facts from the catalog
    and its hooks from the registry's caller, never from a rule, not even inside a function."""
    reached = {_ours(e.target) for e in EDGES["migration.analysis"]}
    assert not {m for m in reached if m and _within(m, "migration.rules")}, reached
    assert "migration.registry" not in reached


def test_allowed_violations_name_who_removes_them():
    stale = []
    for (source, target), owner in ALLOWED_VIOLATIONS.items():
        assert owner.strip(), (source, target)
        if not any(_ours(e.target) == target for e in EDGES.get(source, [])):
            stale.append(f"{source} -> {target}")
    if stale:  # its change landed: the entry can go (a warning, so a concurrent change never fails)
        warnings.warn("stale ALLOWED_VIOLATIONS entries: " + ", ".join(stale), stacklevel=1)


def test_no_import_cycle_in_dynamo():
    """dynamo's modules form no import circle (function-level imports count: they run too); a
    module that needs a fact from a caller takes it as an argument or from a smaller module both use."""
    nodes = {n for n in MODULES if _top(n) == "dynamo" and n != "dynamo"}
    cycles = _cycles(nodes, lambda c: False)
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)
