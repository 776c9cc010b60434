"""Shared test setup: every test runs with a clean compat environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "helpers"))  # test-only modules (route_parity)

import no_torchscript

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
    no_torchscript.guard_torch_entry()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``needs_torchscript`` tests are skipped, with the reason, where the probe finds no
    TorchScript exporter (``make test-no-torchscript`` hides it: helpers/no_torchscript.py)."""
    no_torchscript.skip_marked(items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    """Under TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT=1, a failure that says the exporter is hidden is a
    skip with that reason (helpers/no_torchscript.py)."""
    outcome = yield
    no_torchscript.failure_to_skip(item, outcome.get_result())


@pytest.fixture(autouse=True)
def _clean_compat_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No route/strict/ledger settings leak in, and route memory lives in a per-test folder."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TORCH_ONNX_COMPAT_CACHE_DIR", str(tmp_path_factory.mktemp("route-memory")))
