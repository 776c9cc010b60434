"""An ``autograd.Function`` with a ``symbolic`` -> a ``torch.library`` op torch.export keeps as
one node, and the symbolic's translation of that op (issue 32).

The op's implementation is the Function's ``forward`` (``ctx`` bookkeeping dropped), and so is
its fake (``register_fake``: the forward runs on fake tensors, giving the output shapes and
dtypes), when the forward is self-contained: it reads only its parameters, its own locals,
``torch`` and builtins. Otherwise (a compiled extension, a module-level helper, ``ctx`` read
back, a data-dependent result) the Function is reported by name (ONX304) and its export call
keeps ``compat.export``.

The model keeps calling the Function in eager mode (training and its backward unchanged): the
call site becomes ``(<module>_onnx.op if torch.compiler.is_exporting() else Fn.apply)(...)``.
Under torch.compile that holds from torch 2.12 only (``compat.torch_apis``): for an older
``--target-torch`` the Function is not migrated (``symbolic_plan._held_by_target``).
"""

from __future__ import annotations

import ast
import builtins
import re

from . import symbolic_translate
from .astwalk import clone, walk_in_order
from .generated import Entry

#: ``ctx`` methods whose calls only record what backward needs
_CTX_BOOKKEEPING = frozenset({"save_for_backward", "mark_non_differentiable", "mark_dirty",
                              "set_materialize_grads", "save_for_forward"})
#: calls whose results depend on tensor values (the fake cannot run them)
_DATA_DEPENDENT = frozenset({"item", "tolist", "nonzero", "numpy", "unique", "masked_select"})
_ALLOWED_GLOBALS = frozenset({"torch", "math", "F"}) | frozenset(dir(builtins))


def snake(name: str) -> str:
    """``ScaledTanh`` -> ``scaled_tanh``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == name), None)


def _annotation(arg: ast.arg, default: ast.expr | None) -> str:
    if arg.annotation is not None:
        return ast.unparse(arg.annotation)
    if isinstance(default, ast.Constant) and default.value is not None:
        return type(default.value).__name__
    return "torch.Tensor"


def _returns(forward: ast.FunctionDef) -> str | None:
    """``torch.Tensor`` or ``tuple[torch.Tensor, ...]`` from the forward's returns (None:
    they disagree or are not plain)."""
    counts = set()
    for node in walk_in_order(forward):
        if isinstance(node, ast.Return):
            counts.add(len(node.value.elts) if isinstance(node.value, ast.Tuple) else 1)
    if len(counts) != 1:
        return None
    n = counts.pop()
    return "torch.Tensor" if n == 1 else "tuple[" + ", ".join(["torch.Tensor"] * n) + "]"


def _forward_body(forward: ast.FunctionDef, ctx_name: str) -> tuple[list[ast.stmt], str]:
    """The forward's statements without ``ctx`` bookkeeping; the reason it cannot be the op's
    body ('' when it can)."""
    body: list[ast.stmt] = []
    for stmt in forward.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and isinstance(stmt.value.func, ast.Attribute) \
                and isinstance(stmt.value.func.value, ast.Name) \
                and stmt.value.func.value.id == ctx_name \
                and stmt.value.func.attr in _CTX_BOOKKEEPING:
            continue
        if isinstance(stmt, ast.Assign) and all(
                isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                and t.value.id == ctx_name for t in stmt.targets):
            continue  # ctx.scale = scale: for backward
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # the docstring
        body.append(stmt)
    params = {a.arg for a in (*forward.args.posonlyargs, *forward.args.args,
                              *forward.args.kwonlyargs)}
    local = params | {n.id for s in body for n in walk_in_order(s)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for s in body:
        for n in walk_in_order(s):
            if isinstance(n, ast.Name) and n.id == ctx_name:
                return body, f"its forward reads ctx (line {n.lineno})"
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) \
                    and n.id not in local and n.id not in _ALLOWED_GLOBALS:
                return body, f"its forward calls {n.id}, which is not torch (line {n.lineno})"
            if isinstance(n, ast.Attribute) and n.attr in _DATA_DEPENDENT:
                return body, f"its forward reads tensor values (.{n.attr}, line {n.lineno})"
    if not body:
        return body, "its forward is empty"
    return body, ""


class FunctionOp:
    """The generated op, fake and translation of one ``autograd.Function`` (or its blockers)."""

    def __init__(self, cls: ast.ClassDef, namespace: str, origin: str,
                 local_functions: frozenset[str] = frozenset(),
                 imports: dict[str, str] | None = None,
                 own: symbolic_translate.OwnModule | None = None) -> None:
        self.cls = cls
        self.name = snake(cls.name)
        self.namespace = namespace
        self.qualified = f"{namespace}::{self.name}"
        self.blockers: list[tuple[int, str]] = []
        self.entries: list[Entry] = []
        forward = _method(cls, "forward")
        symbolic = _method(cls, "symbolic")
        if forward is None or symbolic is None:
            self.blockers.append((cls.lineno, "no forward or no symbolic staticmethod"))
            return
        tr = symbolic_translate.translate(symbolic, f"{self.name}_symbolic", local_functions,
                                          imports=imports, module=own)
        if not tr.ok or tr.helpers:
            first = tr.blockers[0] if tr.blockers else None
            self.blockers.append((first.line, first.reason) if first else
                                 (symbolic.lineno, "its symbolic calls helpers of the module"))
            return
        self._op(forward, origin)
        if self.blockers:
            return
        self.entries += symbolic_translate.entries(
            tr, origin, symbolic.lineno, self.qualified,
            doc=f"translation of {cls.name}.symbolic for the op {self.qualified}")

    def _op(self, forward: ast.FunctionDef, origin: str) -> None:
        forward = clone(forward)
        params = forward.args.posonlyargs + forward.args.args
        if not params or forward.args.vararg or forward.args.kwarg or forward.args.kwonlyargs:
            why = "its forward takes *args, **kwargs or keyword-only parameters"
            self.blockers.append((forward.lineno, why))
            return
        ctx_name = params[0].arg
        body, why = _forward_body(forward, ctx_name)
        returns = _returns(forward)
        if not why and returns is None:
            why = "its forward's returns are not one tensor or one tuple of tensors"
        if why:
            self.blockers.append((forward.lineno, f"{self.cls.name}: {why}"))
            return
        args = params[1:]
        defaults = [None] * (len(args) - len(forward.args.defaults)) + list(forward.args.defaults)
        sig = ", ".join(f"{a.arg}: {_annotation(a, d)}" + (f" = {ast.unparse(d)}" if d else "")
                        for a, d in zip(args, defaults))
        impl = f"{self.name}_forward"
        text = "\n".join(ast.unparse(s) for s in body)
        code = (f"def {impl}({sig}) -> {returns}:\n"
                f'    """{self.cls.name}.forward (what the op computes, and its shapes on fake '
                f'tensors)."""\n' + "\n".join("    " + line for line in text.splitlines()))
        imports = ("import torch",)
        self.entries.append(Entry(impl, origin, forward.lineno, code, imports))
        op = (f"{self.name} = torch.library.custom_op(\n"
              f'    "{self.qualified}", {impl}, mutates_args=()\n)\n'
              f"{self.name}.register_fake({impl})")
        self.entries.append(Entry(self.name, origin, self.cls.lineno, op, imports,
                                  doc=f"{self.cls.name} as one op torch.export keeps"))

    def call_site(self, module_ref: str, torch_ref: str) -> str:
        """The callee replacing ``Cls.apply``: the op while torch.export captures the model."""
        return (f"({module_ref}.{self.name} if {torch_ref}.compiler.is_exporting() "
                f"else {self.cls.name}.apply)")
