"""Small building blocks the cases share: modules that wrap one expression with named forward
parameters (as torch's own ONNX tests wrote a class per operator), and input makers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn


class Unary(nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class Binary(nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x, y):
        return self.fn(x, y)


class Ternary(nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x, y, z):
        return self.fn(x, y, z)


def rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def ints(high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape)


def image(n: int = 2, c: int = 3, h: int = 16, w: int = 16) -> torch.Tensor:
    return torch.randn(n, c, h, w)


def ev(module: nn.Module) -> nn.Module:
    """The module in eval mode (what most legacy export scripts did first)."""
    return module.eval()
