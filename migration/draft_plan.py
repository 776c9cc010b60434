"""The explicit capture of a value-dependent branch (issue 30.6): the generated module's
``draft_export``.

``torch.export.draft_export`` bakes each data-dependent branch as the example takes it, deciding
its guard on the example's real values; but torch 2.13 propagates no real value for an
``nn.Parameter`` (docs/upstream/draft-export-parameter-values.md), so a guard reading a weight
(``if self.fc(x).sum() > 0:``) is decided on uninitialized memory and the program keeps the
branch eager does not take, differently from run to run (by ``PYTHONHASHSEED``). The shim's
draft capture gives the parameters their values (``dynamo/parameter_values.py``); the migrated
call captures with the same workaround, from the generated module the user's code owns (a no-op
where torch has no such helpers). Its code is read from the shim's source file (its one home),
not imported: the rewriter stays torch-free.
"""

from __future__ import annotations

import ast
import functools
import os

from .generated import Entry

DRAFT_EXPORT = "draft_export"
_KEEP = "parameters_keep_real_values"
_DRAFT_CODE = '''\
def draft_export(model, args, kwargs=None):
    """torch.export.draft_export(model, args): each branch on a tensor's value baked as the
    example takes it (as compat.export did), decided on the parameters' real values."""
    with parameters_keep_real_values():
        return torch.export.draft_export(model, args, kwargs=kwargs)'''
_IMPORTS = ("import contextlib", "import torch")
#: the shim's source of the workaround
SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dynamo",
                      "parameter_values.py")


@functools.lru_cache(maxsize=1)
def _keep_code() -> str:
    """``parameters_keep_real_values`` as the shim's source defines it (decorator included)."""
    with open(SOURCE, encoding="utf-8") as fh:
        text = fh.read()
    lines = text.splitlines()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == _KEEP:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return "\n".join(lines[start - 1:node.end_lineno])
    raise LookupError(f"{_KEEP} is not defined in {SOURCE}")


def entries(origin: str, line: int) -> tuple[Entry, ...]:
    """The generated module's ``draft_export`` (and its workaround) for the call at
    ``origin:line``."""
    return (Entry(_KEEP, origin, line, _keep_code(), _IMPORTS),
            Entry(DRAFT_EXPORT, origin, line, _DRAFT_CODE, _IMPORTS))
