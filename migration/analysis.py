"""The candidate pass: stdlib ``ast`` finds legacy usages and plans their edits.

libcst is only used later, and only for files with something to fix (see ``fixer.py``), so a
``--check`` run never pays for a lossless parse.
"""

from __future__ import annotations

import ast
import copy
import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from compat import catalog_facts as facts
from compat.torch_apis import DYNAMO_KEYWORD_SINCE

from .astwalk import Visitor, child_nodes, walk
from .model import Applicability, Edit, Finding, Key
from .resolve import Resolver, Scope, dotted, scope_chain

EXPORT = "torch.onnx.export"
#: the shim's import names: installed (the wheel, an editable install), then the checkout's.
#: Inserted imports use the first (``import torch_onnx_compat as compat``), which works in both.
SHIM_MODULES = ("torch_onnx_compat", "compat")
SHIM_ALIAS = "compat"
_DYNAMO_KEY = re.compile(r"""["']dynamo["']|\bdynamo\s*=""")


@dataclass
class Option:
    """An option of an export call, passed as a keyword or mapped from its position."""

    name: str
    value: ast.expr
    index: int | None = None  # position in call.args when passed positionally


@dataclass
class ExportCall:
    """A call that resolves to ``torch.onnx.export`` (or an alias being rewritten to it)."""

    node: ast.Call
    key: Key
    scope: list[Scope]
    options: dict[str, Option] = field(default_factory=dict)
    keywordize: tuple[Edit, ...] = ()  # the ONX206 edits; prerequisites of fixes of mapped options
    layout: str | None = None  # the catalog's layout label ("1.3-1.9", ...) of positional options
    ambiguous: bool = False
    star_args: bool = False
    star_kwargs: list[ast.expr] = field(default_factory=list)
    dynamo_maybe_in_kwargs: bool = False
    model: ast.expr | None = None
    args: ast.expr | None = None
    f: ast.expr | None = None
    custom_symbolics: bool = False

    def edits_for(self, opt: Option, *edits: Edit) -> tuple[Edit, ...]:
        """``edits`` plus the keywordizing edits they depend on when ``opt`` was positional."""
        return (self.keywordize if opt.index is not None else ()) + edits


class Context:
    """One module under analysis: its text, resolver, ledger evidence and the findings so far."""

    def __init__(self, text: str, tree: ast.Module, path: str = "",
                 evidence: dict[int, dict] | None = None,
                 preamble: ast.Module | None = None) -> None:
        self.text = text
        self.src_lines = _splitlines(text)  # as ast counts lines (keeps the line ends)
        self.lines = [ln.rstrip("\r\n") for ln in self.src_lines]  # not str.splitlines()
        self.tree = tree
        self.path = path
        self.resolver = Resolver(tree, preamble)
        self.evidence = evidence or {}
        self.findings: list[Finding] = []
        self.facts: dict[str, Any] = {}  # module-level facts rules share (e.g. custom symbolics)
        self.enabled: Any = lambda code, *lines: True  # set by the text core: selected, not noqa'd
        self.suppressed: Any = lambda code, *lines: False  # set by the text core: noqa'd
        self._parents: dict[ast.AST, ast.AST] | None = None
        self._constants: dict[str, ast.expr] | None = None
        self._with_constants: dict[int, tuple[ast.expr, ast.expr]] = {}

    @property
    def constants(self) -> dict[str, ast.expr]:
        """The module's constants (``module_constants``), computed on first use."""
        if self._constants is None:
            self._constants = module_constants(self.tree)
        return self._constants

    def with_constants(self, node: ast.expr) -> ast.expr:
        """``node`` with the module's constants substituted (cached per node)."""
        if isinstance(node, ast.Constant):
            return node
        hit = self._with_constants.get(id(node))
        if hit is None or hit[0] is not node:
            named = any(isinstance(n, ast.Name) for n in ast.walk(node))
            hit = (node, _substitute(node, self.constants) if named else node)
            self._with_constants[id(node)] = hit
        return hit[1]

    def before_dynamo_keyword(self) -> str | None:
        """``--target-torch X.Y`` when it is older than the first torch taking ``dynamo=``."""
        target = self.facts.get("target_torch")
        if target is not None and tuple(target) < DYNAMO_KEYWORD_SINCE:
            return f"{target[0]}.{target[1]}"
        return None

    def parent(self, node: ast.AST) -> ast.AST | None:
        """The syntactic parent of ``node`` (the map is built once, on first use)."""
        if self._parents is None:
            self._parents = {c: p for p in walk(self.tree) for c in child_nodes(p)}
        return self._parents.get(node)

    def names(self) -> set[str]:
        """Every name the module binds or reads (computed once)."""
        if "names" not in self.facts:
            out: set[str] = set()
            for n in walk(self.tree):
                if isinstance(n, ast.Name):
                    out.add(n.id)
                elif isinstance(n, ast.arg):
                    out.add(n.arg)
                elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.add(n.name)
                elif isinstance(n, ast.alias):
                    out.add((n.asname or n.name).split(".")[0])
                elif isinstance(n, (ast.Global, ast.Nonlocal)):
                    out.update(n.names)
            self.facts["names"] = out
        return self.facts["names"]

    def import_module(self, module: str, scope: list[Scope]) -> tuple[str, tuple[Edit, ...]]:
        """A spelling of top-level ``module`` at ``scope``, and the import edit it needs (if
        any): ``import onnx``, or ``import onnx as _onnx`` when ``onnx`` already names
        something else in the module."""
        ref = self.module_ref(module, scope)
        if ref is not None:
            return ref, ()
        return self._import_as(module, module)

    def import_shim(self, scope: list[Scope]) -> tuple[str, tuple[Edit, ...]]:
        """A spelling of the shim's API module at ``scope`` (an existing ``import
        torch_onnx_compat as X`` or ``import compat``), else ``compat`` with the edit ``import
        torch_onnx_compat as compat`` (``_compat`` when ``compat`` names something else)."""
        for module in SHIM_MODULES:
            ref = self.module_ref(module, scope)
            if ref is not None:
                return ref, ()
        return self._import_as(SHIM_MODULES[0], SHIM_ALIAS)

    def _import_as(self, module: str, name: str) -> tuple[str, tuple[Edit, ...]]:
        """``import module [as name]``, as ``_name`` (``__name``...) if ``name`` is taken."""
        while name in self.names():
            name = "_" + name
        text = f"import {module}" if name == module else f"import {module} as {name}"
        return name, (Edit("import", (0, 0), (text,)),)

    def imports_shim(self) -> bool:
        """Whether the module imports the shim anywhere (``import torch_onnx_compat as compat``,
        ``import compat``, ``from compat import export``...; a notebook's earlier cells count)."""
        return any(isinstance(v, str) and v.split(".", 1)[0] in SHIM_MODULES
                   for names in self.resolver.bindings.values()
                   for values in names.values() for v in values)

    def block_statement(self, call: ast.Call) -> ast.stmt | None:
        """The statement ``call`` is, when statements may be inserted around it.

        That is an expression statement or the value of an assignment, alone on its own lines
        inside a block (not a ``return``, a one-line ``if c: ...`` body, a lambda or a
        comprehension); None otherwise.
        """
        stmt = self.parent(call)
        if not isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign)) or stmt.value is not call:
            return None
        holder = self.parent(stmt)
        if holder is None or not any(stmt in getattr(holder, f, ()) for f in
                                     ("body", "orelse", "finalbody")):
            return None
        first = self.lines[stmt.lineno - 1].encode("utf-8")[:stmt.col_offset]
        last = self.lines[stmt.end_lineno - 1].encode("utf-8")[stmt.end_col_offset:]  # type: ignore[index]
        if first.strip() or (last.strip() and not last.strip().startswith(b"#")):
            return None
        return stmt

    def evidence_for(self, node: ast.AST) -> dict | None:
        """The ledger's verdict for the call spanning ``node``'s lines (start line first)."""
        if not self.evidence:
            return None
        start, end = node.lineno, getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
        for line in range(start, end + 1):
            if line in self.evidence:
                return self.evidence[line]
        return None

    def key(self, node: ast.AST) -> Key:
        """The (line, character column) of ``node``'s start, as libcst counts it."""
        line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
        text = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        if not text.isascii():
            col = len(text.encode("utf-8")[:col].decode("utf-8", "replace"))
        return (line, col)

    def src(self, node: ast.AST) -> str:
        """The source text of ``node`` as written."""
        # ast.get_source_segment splits the whole text on every call (quadratic per file)
        try:
            l1, l2 = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined]
            c1, c2 = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:
            return ""
        if l2 is None or c2 is None or l2 >= len(self.src_lines):
            return ""
        lines = self.src_lines
        if l1 == l2:
            return lines[l1].encode("utf-8")[c1:c2].decode("utf-8")
        first = lines[l1].encode("utf-8")[c1:].decode("utf-8")
        last = lines[l2].encode("utf-8")[:c2].decode("utf-8")
        return "".join([first, *lines[l1 + 1:l2], last])

    def qualnames(self, expr: ast.expr, scope: list[Scope]) -> set[str]:
        return self.resolver.qualnames(expr, scope_chain(scope))

    def module_ref(self, qual: str, scope: list[Scope]) -> str | None:
        """A local spelling of module ``qual`` (e.g. ``tonnx`` or ``torch.onnx``), if imported."""
        chain = list(scope_chain(scope))
        best: str | None = None
        for sc in chain[::-1]:  # outer first, inner overrides
            for name in self.resolver.bindings.get(sc, {}):
                quals = self.resolver.lookup(name, chain)
                for q in quals:
                    if q == qual:
                        best = name
                    elif qual.startswith(q + ".") and best is None:
                        best = name + qual[len(q):]
        return best

    def emit(self, code: str, node: ast.AST, applicability: Applicability = "none",
             edits: tuple[Edit, ...] = (), note: str = "", anchor: ast.AST | None = None,
             generated: tuple = ()) -> None:
        line, col = self.key(node)
        extra = (anchor.lineno,) if anchor is not None else ()  # type: ignore[attr-defined]
        if not edits:
            applicability = "none"
        self.findings.append(
            Finding(code, line, col + 1, applicability, tuple(edits), note, self.path, extra,
                    generated=tuple(generated) if edits else ())
        )


def _splitlines(text: str) -> list[str]:
    """Lines with their ends, split where the tokenizer splits (not at \\f or \\x1c..)."""
    if "\r" not in text:  # the common case, without the slower look-behind split
        lines = text.split("\n")
        return [line + "\n" for line in lines[:-1]] + [lines[-1]]
    return re.split(r"(?<=\r\n)|(?<=\n)|(?<=\r)(?!\n)", text)


_ACTIVE: ContextVar[Context | None] = ContextVar("migration_context", default=None)


def literal(node: ast.expr | None) -> Any:
    """The Python value of a literal expression, or ``...`` when it is not a literal.

    Names of the module's constants (see ``module_constants``) count as their literal values.
    """
    if node is None:
        return ...
    ctx = _ACTIVE.get()
    if ctx is not None:
        node = ctx.with_constants(node)
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ...


_MUTABLE = (ast.Dict, ast.List, ast.Set)


def module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level names bound once, by a plain ``NAME = <literal>`` statement of the module
    body, and never bound again anywhere in the file (``OPSET_VERSION = 15``; tuples and dicts
    of literals, which may use earlier constants). A dict/list/set constant also must never be
    touched through an attribute or subscript (``AXES.update(...)``, ``AXES[k] = v``); a file
    with a star import has none."""
    candidates: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name):
            candidates.setdefault(stmt.targets[0].id, stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                and stmt.value is not None and stmt.simple:
            candidates.setdefault(stmt.target.id, stmt.value)
    if not candidates:
        return {}
    binds: dict[str, int] = {}
    touched: set[str] = set()
    for n in walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            binds[n.id] = binds.get(n.id, 0) + 1
        elif isinstance(n, ast.arg):
            binds[n.arg] = binds.get(n.arg, 0) + 1
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds[n.name] = binds.get(n.name, 0) + 1
        elif isinstance(n, ast.alias):
            if n.name == "*":
                return {}
            name = (n.asname or n.name).split(".")[0]
            binds[name] = binds.get(name, 0) + 1
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                binds[name] = binds.get(name, 0) + 2
        elif isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.value, ast.Name) \
                and (isinstance(n, ast.Attribute) or not isinstance(n.ctx, ast.Load)):
            touched.add(n.value.id)
    out: dict[str, ast.expr] = {}
    for name, value in candidates.items():  # in order: later constants may use earlier ones
        if binds.get(name) != 1 or (isinstance(value, _MUTABLE) and name in touched):
            continue
        resolved = _substitute(value, out)
        try:
            ast.literal_eval(resolved)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        out[name] = resolved
    return out


class _Substitute(ast.NodeTransformer):
    def __init__(self, constants: dict[str, ast.expr]) -> None:
        self.constants = constants

    def visit_Name(self, node: ast.Name) -> ast.expr:
        value = self.constants.get(node.id)
        return copy.deepcopy(value) if value is not None and isinstance(node.ctx, ast.Load) \
            else node


def _substitute(node: ast.expr, constants: dict[str, ast.expr]) -> ast.expr:
    """``node`` with the names of ``constants`` replaced by their values (a copy, if any)."""
    if not constants or not any(isinstance(n, ast.Name) and n.id in constants
                                for n in ast.walk(node)):
        return node
    return _Substitute(constants).visit(copy.deepcopy(node))


def member(node: ast.expr | None) -> str | None:
    """The last name of a dotted expression (``TrainingMode.EVAL`` -> ``EVAL``)."""
    parts = dotted(node) if node is not None else None
    return parts[-1] if parts else None


def option_value(node: ast.expr | None) -> object:
    """An option's value as the catalog's facts read it: a literal, the name of an enum member
    (``TrainingMode.TRAINING`` -> ``"TRAINING"``: an upper-case last name of a dotted one), or
    ``catalog_facts.UNKNOWN``."""
    value = literal(node)
    if value is not ...:
        return value
    parts = dotted(node) if node is not None else None
    if parts and len(parts) > 1 and parts[-1].isupper():
        return parts[-1]
    return facts.UNKNOWN


def disposition(opt: Option) -> facts.Disposition | None:
    """What the catalog says ``opt``'s value means today (None: not a legacy option)."""
    return facts.disposition(opt.name, option_value(opt.value))


def _is_bool(node: ast.expr) -> bool | None:
    """Whether a positional option is a bool: True for a bool literal, False for what the 1.11+
    layout's 6th position takes (an ``OperatorExportTypes`` member or None), None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return True
    if isinstance(node, ast.Constant) and node.value is None:
        return False
    name = member(node)
    if name in facts.OPERATOR_EXPORT_TYPES_1X or "OperatorExportTypes" in ast.dump(node):
        return False
    return None


def map_positional(extra: list[ast.expr]) -> tuple[list[str] | None, str | None]:
    """Names of positional options after ``f`` and the catalog's layout label; (None, None)
    when the layout cannot be told or holds fewer options."""
    found = facts.positional_layout(len(extra), lambda i: _is_bool(extra[i]))
    if found is None or len(extra) > len(found[1]):
        return None, None
    label, layout = found
    return list(layout[: len(extra)]), label


def kwargs_may_set_dynamo(ctx: Context, expr: ast.expr, scope: list[Scope]) -> bool:
    """Whether a ``**expr`` forwards ``dynamo=`` (version gates such as ``{"dynamo": False}``)."""
    if _DYNAMO_KEY.search(ctx.src(expr)):
        return True
    if "dynamo_key" not in ctx.facts:  # once per file: most files never spell it
        ctx.facts["dynamo_key"] = bool(_DYNAMO_KEY.search(ctx.text))
    if isinstance(expr, ast.Name) and ctx.facts["dynamo_key"]:
        holder = scope[-1]
        first = getattr(holder, "lineno", 1)
        last = expr.lineno
        region = "\n".join(ctx.lines[first - 1:last])
        return bool(_DYNAMO_KEY.search(region))
    return False


def build_export_call(ctx: Context, node: ast.Call, scope: list[Scope]) -> ExportCall:
    """Collect the options of an export call, mapping positional ones by the catalog's layouts."""
    ec = ExportCall(node=node, key=ctx.key(node), scope=list(scope))
    pos = node.args
    ec.star_args = any(isinstance(a, ast.Starred) for a in pos)
    named = {"model": 0, "args": 1, "f": 2}
    for kw in node.keywords:
        if kw.arg is None:
            ec.star_kwargs.append(kw.value)
        elif kw.arg in named:
            setattr(ec, kw.arg, kw.value)
        else:
            ec.options[kw.arg] = Option(kw.arg, kw.value)
    for name, i in named.items():
        if i < len(pos) and not ec.star_args:
            setattr(ec, name, pos[i])
    if len(pos) > 3 and not ec.star_args:
        mapping, ec.layout = map_positional(pos[3:])
        ec.ambiguous = mapping is None
        if mapping is not None:
            edits = []
            for off, name in enumerate(mapping):
                idx = 3 + off
                ec.options.setdefault(name, Option(name, pos[idx], idx))
                edits.append(Edit("to_kw", ec.key, (idx, name)))
            ec.keywordize = tuple(edits)
    ec.dynamo_maybe_in_kwargs = any(kwargs_may_set_dynamo(ctx, e, scope) for e in ec.star_kwargs)
    return ec


class Handlers(Protocol):
    """What the walker calls (``migration.registry.Rules`` runs the registered rule hooks)."""

    def prepare(self, ctx: Context) -> None: ...
    def on_call(self, ctx: Context, node: ast.Call, scope: list[Scope]) -> None: ...
    def on_if(self, ctx: Context, node: ast.If, scope: list[Scope]) -> list[ast.stmt] | None: ...
    def on_with(self, ctx: Context, node: ast.With, scope: list[Scope]) -> bool: ...
    def on_import(self, ctx: Context, node: ast.Import | ast.ImportFrom,
                  scope: list[Scope]) -> None: ...
    def on_class(self, ctx: Context, node: ast.ClassDef, scope: list[Scope]) -> None: ...
    def on_reference(self, ctx: Context, node: ast.expr, scope: list[Scope]) -> None: ...


class _Walker(Visitor):
    """Visits the module once with a scope stack and hands nodes to the rules' handlers."""

    def __init__(self, ctx: Context, handlers: Handlers) -> None:
        self.ctx = ctx
        self.h = handlers
        self.stack: list[Scope] = [ctx.tree]

    def _scoped(self, node: ast.AST) -> None:
        self.stack.append(node)
        self.generic_visit(node)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self.stack.append(node)
        for stmt in node.body:
            self.visit(stmt)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.h.on_class(self.ctx, node, self.stack)
        for b in node.bases:
            self.visit(b)
        self._scoped(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._scoped(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.h.on_import(self.ctx, node, self.stack)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.h.on_import(self.ctx, node, self.stack)

    def visit_With(self, node: ast.With) -> None:
        if self.h.on_with(self.ctx, node, self.stack):
            for stmt in node.body:
                self.visit(stmt)
            return
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        live = self.h.on_if(self.ctx, node, self.stack)
        if live is None:
            self.generic_visit(node)
            return
        for stmt in live:  # the branch only old torch reaches is not migrated
            self.visit(stmt)

    def visit_Call(self, node: ast.Call) -> None:
        self.h.on_call(self.ctx, node, self.stack)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.h.on_reference(self.ctx, node, self.stack)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        self.h.on_reference(self.ctx, node, self.stack)


def analyze(ctx: Context, rules: Handlers) -> list[Finding]:
    """Run ``rules`` (the rule registry's handlers) over the module; returns all findings
    (unfiltered)."""
    token = _ACTIVE.set(ctx)
    try:
        rules.prepare(ctx)
        _Walker(ctx, rules).visit(ctx.tree)
    finally:
        _ACTIVE.reset(token)
    _link_shared_edits(ctx.findings)
    return ctx.findings


def _link_shared_edits(findings: list[Finding]) -> None:
    """Record on each fixable finding the codes of the findings whose edits its fix shares
    (ONX101's ``dynamic_shapes`` needs ONX001's ``dynamo=True``, and ONX001's ``dynamo=False``
    pin is also the fix of the ONX102 it keeps): its hint selects them all."""
    owners: dict[Edit, set[str]] = {}
    for f in findings:
        for e in f.edits:
            if e.kind != "import":
                owners.setdefault(e, set()).add(f.code)
    for f in findings:
        needs = set().union(*(owners.get(e, set()) for e in f.edits)) - {f.code}
        f.needs = tuple(sorted(needs))
