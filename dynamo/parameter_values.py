"""Fakified ``nn.Parameter``s keep their real values while ``torch.export.draft_export``
propagates real values (torch 2.13: docs/upstream/draft-export-parameter-values.md).

The one home of this workaround: the shim's draft capture enters it through
``torch_internals.parameters_keep_real_values`` (which first checks that the private pieces are
there), and the rewriter copies ``parameters_keep_real_values``'s source, as it stands here, into
the generated module of a migrated call that captures with draft_export (``migration/
draft_plan.py`` reads this file, never imports it: the rewriter stays torch-free). So the
function uses only ``contextlib`` and ``torch``, the generated module's imports.
"""

from __future__ import annotations

import contextlib

import torch


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
        meta_utils._safe_copy, meta_utils._safe_clone = copy, clone
