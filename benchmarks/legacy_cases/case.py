"""One TorchScript-era export case: a model, its example inputs, the export call's keywords as a
legacy script wrote them, inputs at other sizes along the declared dynamic axes, tolerances.

Cases build everything lazily (``model()``, ``args()``, ``others()`` are called per export, under a
seed taken from the case's name), so each export gets a fresh model and fresh inputs and a case
that breaks while building only fails itself.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: the families, in report order
FAMILIES = (
    "elementwise", "reduction", "indexing", "shape_unused", "inplace_factory", "scalar_input",
    "control_flow", "rnn", "dynamic_axes", "pool_interp", "normalization", "opset",
    "legacy_options", "convnet", "transformer",
)


@dataclass(frozen=True)
class Case:
    """A legacy export call to replay. ``kwargs`` are the export keywords exactly as the old
    script passed them; ``positional`` the options it passed positionally after ``f`` (a torch 1.x
    layout); ``others`` gives extra input tuples at other sizes along the declared dynamic axes
    (or other values, for a model whose graph must not bake them). ``rtol``/``atol`` follow
    ``numpy.allclose``; torch's own ``run_test`` used rtol 1e-3."""

    name: str
    family: str
    model: Callable[[], Any]
    args: Callable[[], tuple[Any, ...]]
    kwargs: dict[str, Any] = field(default_factory=dict)
    others: Callable[[], Sequence[tuple[Any, ...]]] = lambda: ()
    positional: tuple[Any, ...] = ()
    rtol: float = 1e-3
    atol: float = 1e-5
    note: str = ""
    quick: bool = False  # in the --quick subset

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"case {self.name}: unknown family {self.family!r}")

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode()) & 0x7FFFFFFF


def seeded(case: Case, build: Callable[[], Any], offset: int = 0) -> Any:
    """``build()`` under the case's seed (plus ``offset``, so the other inputs are not the
    example's values again): the same model weights / inputs on every call."""
    import torch

    state = torch.random.get_rng_state()
    torch.manual_seed(case.seed + offset)
    try:
        return build()
    finally:
        torch.random.set_rng_state(state)


def clone_tree(value: Any) -> Any:
    """A copy of nested args with every tensor cloned (a forward may change its inputs in place)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(clone_tree(v) for v in value)
    if isinstance(value, list):
        return [clone_tree(v) for v in value]
    if isinstance(value, dict):
        return {k: clone_tree(v) for k, v in value.items()}
    return value


def flat_leaves(value: Any) -> list[Any]:
    """The call's inputs in the order the TorchScript exporter numbers them: tensors and Python
    numbers of nested tuples/lists/dicts, depth first; ``None`` is skipped."""
    import torch

    if isinstance(value, (torch.Tensor, bool, int, float)):
        return [value]
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in flat_leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in flat_leaves(v)]
    return []


def split_kwargs(args: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The legacy convention: a trailing dict in ``args`` holds keyword inputs."""
    if args and isinstance(args[-1], dict):
        return tuple(args[:-1]), dict(args[-1])
    return tuple(args), {}
