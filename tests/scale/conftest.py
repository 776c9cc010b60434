"""Isolation for the scale tests: route memory, ledger and compare mode never leak between tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # scale_models


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh TORCH_ONNX_COMPAT_CACHE_DIR per test; no inherited ledger or compare mode."""
    cache = tmp_path_factory.mktemp("route-cache")
    monkeypatch.setenv("TORCH_ONNX_COMPAT_CACHE_DIR", str(cache))
    for name in ("TORCH_ONNX_COMPAT_LEDGER", "TORCH_ONNX_COMPAT_COMPARE", "TORCH_ONNX_COMPAT_ROUTE",
                 "TORCH_ONNX_COMPAT_STRICT"):
        monkeypatch.delenv(name, raising=False)
    yield cache
