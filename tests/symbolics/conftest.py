"""Shared helpers for the custom-symbolics tests (real exports, no mocks)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))


@pytest.fixture
def registered() -> Iterator[Callable[[str, Callable[..., Any], int], None]]:
    """Register symbolics through compat.routing.registry; unregistered again at teardown."""
    from compat.routing import registry

    done: list[tuple[str, int]] = []

    def register(name: str, fn: Callable[..., Any], opset: int) -> None:
        registry.register_custom_op_symbolic(name, fn, opset)
        done.append((name, opset))

    yield register
    for name, opset in done:
        registry.unregister_custom_op_symbolic(name, opset)
