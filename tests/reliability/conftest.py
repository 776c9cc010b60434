"""Adversarial reliability suite (issue 13): nothing lost, nothing changed the user did not ask for."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))  # rel_helpers

from rel_helpers import Counting


@pytest.fixture
def counting() -> Counting:
    torch.manual_seed(0)
    return Counting().eval()
