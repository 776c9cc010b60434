"""TorchScript-era export cases of the project's own, modelled on the families of torch's
TorchScript-era ONNX tests (``test_pytorch_onnx_onnxruntime.py`` and its RNN tests,
``test_models.py``, torchvision's ``test_onnx.py``), and the harness that replays each with plain
torch's default exporter, the TorchScript exporter, ``compat.export`` auto and its torch.export
route alone. Used by ``benchmarks/bench_legacy_cases.py`` and the tests.

Importing this package imports torch (the cases build tensors lazily, but their modules are
``nn.Module`` subclasses).
"""

from __future__ import annotations

from .case import FAMILIES, Case


def all_cases() -> list[Case]:
    """Every case, grouped by family in ``FAMILIES`` order; names are unique."""
    from . import control, dynamic, inputs, layers, nets, ops, opsets, options, rnn

    cases = [*ops.CASES, *inputs.CASES, *control.CASES, *rnn.CASES, *dynamic.CASES, *layers.CASES,
             *opsets.CASES, *options.CASES, *nets.CASES]
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate case names: {duplicates}")
    order = {f: i for i, f in enumerate(FAMILIES)}
    return sorted(cases, key=lambda c: order[c.family])


def select(names: list[str] | None = None, families: list[str] | None = None, quick: bool = False) -> list[Case]:
    """The cases named (or all), of the families given (or all); ``quick`` keeps the subset
    marked quick. An unknown name or family is a ValueError."""
    cases = all_cases()
    known = {c.name for c in cases}
    for name in names or ():
        if name not in known:
            raise ValueError(f"unknown case {name!r}")
    for family in families or ():
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r} (families: {', '.join(FAMILIES)})")
    return [c for c in cases if (not names or c.name in names) and (not families or c.family in families)
            and (not quick or c.quick)]


__all__ = ["FAMILIES", "Case", "all_cases", "select"]
