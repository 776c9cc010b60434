"""Calls pinned to ``opset_version`` 11-17, on operators whose ONNX form changed across those
opsets (Softmax, Split, Squeeze/Unsqueeze, ReduceSum, Resize, Clip, LayerNormalization,
HardSwish, GridSample, Trilu, Einsum). The opset each contender wrote is in the details."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import Binary, Unary, image, rand
from .case import Case


class SplitSizes(nn.Module):
    def forward(self, x):
        a, b, c = torch.split(x, [1, 2, 3], dim=1)
        return a.sum(1) + b.sum(1) + c.sum(1)


class SqueezeUnsqueeze(nn.Module):
    def forward(self, x):
        return x.squeeze(1).unsqueeze(0).unsqueeze(-1)


class ConvBnRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))

    def forward(self, x):
        return self.body(x)


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        return (q @ k.transpose(-2, -1) / 4.0).softmax(-1) @ v


class GridSample(nn.Module):
    def forward(self, x, grid):
        return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def _grid():
    return (image(1, 2, 5, 5), torch.rand(1, 4, 4, 2) * 2 - 1)


def _at(opset: int, **more) -> dict:
    return {"opset_version": opset, **more}


CASES = [
    Case("softmax_mid_axis_op11", "opset", lambda: Unary(lambda x: x.softmax(1)), lambda: (rand(2, 3, 4),), _at(11),
         quick=True),
    Case("layernorm_op11", "opset", lambda: nn.LayerNorm(6), lambda: (rand(2, 3, 6),), _at(11)),
    Case("split_sizes_op11", "opset", SplitSizes, lambda: (rand(2, 6),), _at(11)),
    Case("split_sizes_op13", "opset", SplitSizes, lambda: (rand(2, 6),), _at(13)),
    Case("squeeze_unsqueeze_op11", "opset", SqueezeUnsqueeze, lambda: (rand(3, 1, 4),), _at(11)),
    Case("reduce_sum_op12", "opset", lambda: Unary(lambda x: x.sum((0, 2), keepdim=True)),
         lambda: (rand(2, 3, 4),), _at(12)),
    Case("resize_op11_dynamic", "opset", lambda: Unary(lambda x: F.interpolate(x, scale_factor=2.0)),
         lambda: (image(1, 2, 4, 4),), _at(11, input_names=["x"], dynamic_axes={"x": {2: "h", 3: "w"}}),
         others=lambda: [(image(1, 2, 6, 3),)]),
    Case("clip_op11", "opset", lambda: Unary(lambda x: torch.clamp(x, min=-0.2, max=0.3)),
         lambda: (rand(3, 3),), _at(11)),
    Case("gelu_op13", "opset", lambda: nn.GELU(), lambda: (rand(2, 5),), _at(13)),
    Case("hardswish_op14", "opset", lambda: nn.Hardswish(), lambda: (rand(2, 5),), _at(14)),
    Case("conv_bn_op15", "opset", lambda: ConvBnRelu().eval(), lambda: (image(1, 3, 8, 8),),
         _at(15, input_names=["x"], dynamic_axes={"x": {0: "batch"}}), others=lambda: [(image(3, 3, 8, 8),)]),
    Case("grid_sample_op16", "opset", GridSample, _grid, _at(16)),
    Case("grid_sample_op13", "opset", GridSample, _grid, _at(13),
         note="GridSample does not exist below opset 16: the TorchScript exporter refused"),
    Case("triu_op14", "opset", lambda: Unary(lambda x: torch.triu(x, 1)), lambda: (rand(4, 4),), _at(14)),
    Case("einsum_op12", "opset", lambda: Binary(lambda x, y: torch.einsum("bij,bjk->bik", x, y)),
         lambda: (rand(2, 3, 4), rand(2, 4, 5)), _at(12)),
    Case("attention_op17", "opset", Attention, lambda: (rand(2, 5, 16),),
         _at(17, input_names=["x"], dynamic_axes={"x": {0: "batch", 1: "seq"}}),
         others=lambda: [(rand(1, 8, 16),)]),
]
