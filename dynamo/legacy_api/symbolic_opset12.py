"""The pieces of ``torch.onnx.symbolic_opset12`` custom symbolics call, on our graph context."""

from __future__ import annotations

from typing import Any

import torch

from . import symbolic_helper
from . import symbolic_opset11 as opset11
from .symbolic_helper import unavailable
from .symbolic_opset11 import *

__all__ = opset11.__all__ + ["native_dropout"]  # the earlier opset's names, then its own


def _dropout_and_mask(g: Any, input: Any, p: float, train: bool) -> tuple[Any, Any]:
    if not train:
        return input, None
    ratio = g.op("Constant", value_t=torch.tensor(p))
    training = g.op("Constant", value_t=torch.tensor(train, dtype=torch.bool))
    r, mask = g.op("Dropout", input, ratio, training, outputs=2)
    return r, mask


@symbolic_helper.parse_args("v", "f", "b")
def dropout(g: Any, input: Any, p: float, train: bool) -> Any:
    return _dropout_and_mask(g, input, p, train)[0]


@symbolic_helper.parse_args("v", "f", "b")
def native_dropout(g: Any, input: Any, p: float, train: bool) -> Any:
    return _dropout_and_mask(g, input, p, train)


def __getattr__(name: str) -> Any:
    return unavailable(__name__, name)
