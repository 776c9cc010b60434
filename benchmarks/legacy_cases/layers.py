"""Pooling / interpolation and normalization layers, as torch's TorchScript-era tests exported
them (several at the opsets and with the options those tests used)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from .blocks import Unary, image, rand
from .case import Case

HW = {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch", 2: "h", 3: "w"}}}


def _img(n: int, c: int, h: int, w: int):
    return lambda: (image(n, c, h, w),)


POOL_INTERP = [
    Case("maxpool2d", "pool_interp", lambda: nn.MaxPool2d(3, 2, 1), _img(2, 3, 16, 16), HW,
         others=lambda: [(image(1, 3, 21, 13),)], quick=True),
    Case("avgpool2d_ceil_no_pad_count_opset17", "pool_interp",
         lambda: nn.AvgPool2d(3, 3, padding=1, ceil_mode=True, count_include_pad=False), _img(20, 16, 50, 32),
         {"opset_version": 17}, note="the down-conversion fault of issue 17"),
    Case("adaptive_avgpool_global", "pool_interp", lambda: nn.AdaptiveAvgPool2d(1), _img(2, 4, 9, 7), HW,
         others=lambda: [(image(3, 4, 12, 5),)]),
    Case("adaptive_avgpool_divisible", "pool_interp", lambda: nn.AdaptiveAvgPool2d((2, 2)), _img(2, 4, 8, 8)),
    Case("adaptive_avgpool_not_divisible", "pool_interp", lambda: nn.AdaptiveAvgPool2d((3, 3)), _img(1, 2, 8, 8),
         note="output size does not divide the input: the TorchScript exporter refused it"),
    Case("adaptive_maxpool_global", "pool_interp", lambda: nn.AdaptiveMaxPool2d(1), _img(2, 4, 6, 6)),
    Case("interpolate_nearest_x2", "pool_interp",
         lambda: Unary(lambda x: F.interpolate(x, scale_factor=2, mode="nearest")), _img(1, 2, 5, 6), HW,
         others=lambda: [(image(2, 2, 7, 3),)]),
    Case("interpolate_bilinear", "pool_interp",
         lambda: Unary(lambda x: F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)),
         _img(1, 3, 6, 6)),
    Case("interpolate_bilinear_align_to_size", "pool_interp",
         lambda: Unary(lambda x: F.interpolate(x, size=(16, 12), mode="bilinear", align_corners=True)),
         _img(2, 3, 7, 5), HW, others=lambda: [(image(1, 3, 9, 9),)]),
    Case("upsample_module_opset11", "pool_interp", lambda: nn.Upsample(scale_factor=2, mode="nearest"),
         _img(1, 3, 4, 4), {"opset_version": 11}),
    Case("maxpool1d_indices", "pool_interp", lambda: nn.MaxPool1d(2, 2, return_indices=True),
         lambda: (rand(2, 3, 10),)),
    Case("avgpool1d", "pool_interp", lambda: nn.AvgPool1d(3, 2, padding=1), lambda: (rand(2, 4, 11),),
         {"input_names": ["x"], "dynamic_axes": {"x": {2: "t"}}}, others=lambda: [(rand(2, 4, 17),)]),
    Case("interpolate_bicubic", "pool_interp",
         lambda: Unary(lambda x: F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)),
         _img(1, 1, 5, 5), atol=1e-4),
]


class RmsNorm(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * rand(d))

    def forward(self, x):
        return x * (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt() * self.weight


def _bn2d() -> nn.Module:
    bn = nn.BatchNorm2d(4)
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2.0)
    return bn.eval()


NORMALIZATION = [
    Case("batchnorm2d_eval", "normalization", _bn2d, _img(2, 4, 5, 5), HW,
         others=lambda: [(image(3, 4, 7, 6),)], quick=True),
    Case("batchnorm1d_eval", "normalization", lambda: nn.BatchNorm1d(6).eval(), lambda: (rand(3, 6, 10),)),
    Case("layernorm_dynamic", "normalization", lambda: nn.LayerNorm(8), lambda: (rand(2, 5, 8),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch", 1: "seq"}}},
         others=lambda: [(rand(3, 9, 8),)]),
    Case("groupnorm", "normalization", lambda: nn.GroupNorm(2, 6), _img(2, 6, 4, 4), atol=1e-4),
    Case("instancenorm2d_affine", "normalization", lambda: nn.InstanceNorm2d(3, affine=True), _img(2, 3, 6, 6),
         atol=1e-4),
    Case("l2_normalize", "normalization", lambda: Unary(lambda x: F.normalize(x, dim=1)), lambda: (rand(4, 7),)),
    Case("local_response_norm", "normalization", lambda: nn.LocalResponseNorm(3), _img(1, 6, 4, 4)),
    Case("rms_norm_by_hand", "normalization", RmsNorm, lambda: (rand(2, 3, 8),)),
]

CASES = POOL_INTERP + NORMALIZATION
