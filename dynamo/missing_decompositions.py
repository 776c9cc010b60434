"""Decompositions later torches have and older ones lack, used on the torch.export route.

torch 2.9 to 2.11 have no decomposition (and torchlib no translation) for
``aten.hann_window.periodic``, which ``torch.hann_window(n, periodic=...)`` records: the ONNX
conversion fails with "No ONNX function found". The one here computes what torch 2.12's does;
it is registered only while an export runs, and only where torch lacks its own
(``torch_caps.lacks_decomposition``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

from . import torch_internals

#: aten overload -> the decomposition here (by name, so importing this module needs no torch)
NEEDED = ("hann_window.periodic",)
#: the ledger's translation when one ran (compat.catalog.SHIM_ONLY_TRANSLATIONS)
OPTION = "model"
ACTION = ("operators this torch cannot convert decomposed as later torches do "
          "(aten.hann_window.periodic: torch 2.9 to 2.11 have no decomposition for it)")


def hann_window_periodic(window_length: int, periodic: bool = True, *, dtype: Any = None,
                         layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    """``w[k] = 0.5 - 0.5 cos(2 pi k / (N - 1))``, ``N = window_length + 1`` when periodic."""
    import torch

    dtype = dtype if dtype is not None else torch.get_default_dtype()
    if window_length <= 1:
        return torch.ones((window_length,), dtype=dtype, device=device)
    n = window_length + 1 if periodic else window_length
    k = torch.arange(window_length, dtype=torch.float32, device=device)
    return (0.5 - 0.5 * torch.cos(k * (2 * math.pi / (n - 1)))).to(dtype)


def missing() -> list[str]:
    """The overloads in ``NEEDED`` this torch has no decomposition for."""
    from compat.installed import torch_caps

    return [name for name in NEEDED if torch_caps.lacks_decomposition(name)]


@contextlib.contextmanager
def registered(names: list[str], uses: Any) -> Iterator[None]:
    """While open, ``names``' decompositions here are torch's (``uses`` counts their runs)."""
    import torch

    impls = {"hann_window.periodic": hann_window_periodic}
    with contextlib.ExitStack() as stack:
        for name in names:
            packet, _, overload = name.partition(".")
            op = getattr(getattr(torch.ops.aten, packet), overload)
            stack.enter_context(torch_internals.decomposition_kernel(
                op, uses.wrap(impls[name]), at_capture=False))
        yield
