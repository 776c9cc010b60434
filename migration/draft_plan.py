"""The explicit capture of a value-dependent branch (issue 30.6): the generated module's
``draft_export``.

``torch.export.draft_export`` bakes each data-dependent branch as the example takes it, deciding
its guard on the example's real values; but torch 2.13 propagates no real value for an
``nn.Parameter`` (docs/upstream/draft-export-parameter-values.md), so a guard reading a weight
(``if self.fc(x).sum() > 0:``) is decided on uninitialized memory and the program keeps the
branch eager does not take, differently from run to run (by ``PYTHONHASHSEED``). The shim's
draft capture gives the parameters their values (``dynamo/torch_internals.py``,
``parameters_keep_real_values``); the migrated call captures with the same workaround, from the
generated module the user's code owns (a no-op where torch has no such helpers).
"""

from __future__ import annotations

from .generated import Entry

DRAFT_EXPORT = "draft_export"
_KEEP = "parameters_keep_real_values"
_KEEP_CODE = '''\
@contextlib.contextmanager
def parameters_keep_real_values():
    """Give fakified nn.Parameters their real values while draft_export propagates real values.

    torch 2.13 copies a tensor's data into its fake's real value only when its type is exactly
    torch.Tensor (torch._subclasses.meta_utils._safe_copy/_safe_clone): a parameter's value is
    left uninitialized, and draft_export decides a guard that reads a weight on garbage. The
    parameter's .data (a plain tensor on the same storage) is copied instead; restored on exit.
    Delete this once the installed torch copies parameters' values."""
    from torch._subclasses import meta_utils

    copy = getattr(meta_utils, "_safe_copy", None)
    clone = getattr(meta_utils, "_safe_clone", None)
    if copy is None or clone is None:  # another torch: nothing to work around here
        yield
        return

    def plain(src):
        data = src.data if isinstance(src, torch.nn.Parameter) else src
        return data if type(data) is torch.Tensor else src

    meta_utils._safe_copy = lambda dst, src: copy(dst, plain(src))
    meta_utils._safe_clone = lambda src: clone(plain(src))
    try:
        yield
    finally:
        meta_utils._safe_copy, meta_utils._safe_clone = copy, clone'''
_DRAFT_CODE = '''\
def draft_export(model, args, kwargs=None):
    """torch.export.draft_export(model, args): each branch on a tensor's value baked as the
    example takes it (as compat.export did), decided on the parameters' real values."""
    with parameters_keep_real_values():
        return torch.export.draft_export(model, args, kwargs=kwargs)'''
_IMPORTS = ("import contextlib", "import torch")


def entries(origin: str, line: int) -> tuple[Entry, ...]:
    """The generated module's ``draft_export`` (and its workaround) for the call at
    ``origin:line``."""
    return (Entry(_KEEP, origin, line, _KEEP_CODE, _IMPORTS),
            Entry(DRAFT_EXPORT, origin, line, _DRAFT_CODE, _IMPORTS))
