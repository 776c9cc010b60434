"""ExportFailed's message as it lands in logs and CI: no ANSI colour codes, and torch's "see the
stack trace above" replaced by where the per-route log really is."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch

import compat
from compat.errors import ExportFailed, RouteFailed


class ReadsDataPointer(torch.nn.Module):
    """torch.export cannot capture it: a fake tensor has no data pointer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (x.data_ptr() % 7)


def test_message_names_the_route_log_instead_of_a_trace_above(tmp_path: Path, monkeypatch) -> None:
    ledger = tmp_path / "l.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(ledger))
    with warnings.catch_warnings(), pytest.raises(ExportFailed) as info:
        warnings.simplefilter("ignore")
        compat.export(ReadsDataPointer(), (torch.randn(2, 3),), str(tmp_path / "m.onnx"), route="dynamo")
    text = str(info.value)
    assert "\x1b[" not in text
    assert "stack trace above" not in text
    (log,) = re.findall(r"the dynamo route's log (\S+?\.log)(?=[.)\s]|$)", text)
    assert Path(log).is_file() and Path(log).parent == Path(str(ledger) + ".logs")
    assert "Traceback" in Path(log).read_text()


def test_colour_codes_are_stripped() -> None:
    cause = RuntimeError("\x1b[31mboom\x1b[0m (see stack trace above)")
    text = str(ExportFailed({"dynamo": RouteFailed("dynamo", "torch.export failed", cause)}))
    assert "\x1b" not in text and "boom" in text
    assert "TORCH_ONNX_COMPAT_LEDGER" in text and "stack trace above" not in text
