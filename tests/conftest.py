"""Shared test setup: every test runs with a clean compat environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "helpers"))  # test-only modules (route_parity)

_ENV = (
    "TORCH_ONNX_COMPAT_ROUTE",
    "TORCH_ONNX_COMPAT_STRICT",
    "TORCH_ONNX_COMPAT_LEDGER",
    "TORCH_ONNX_COMPAT_COMPARE",
    "TORCH_ONNX_COMPAT_ACCEPTANCE_CHECK",
)


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist, import torch in the controller up front: it unserializes each warning a worker
    reports by importing the warning's module (``dynamo.dynamic_shapes`` imports torch), one thread
    per worker, and two threads importing torch at once leave it half-initialized (seen on torch
    2.15: the run stops with INTERNALERROR)."""
    import importlib.util

    controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if controller and importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401


@pytest.fixture(autouse=True)
def _clean_compat_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No route/strict/ledger settings leak in, and route memory lives in a per-test folder."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TORCH_ONNX_COMPAT_CACHE_DIR", str(tmp_path_factory.mktemp("route-memory")))
