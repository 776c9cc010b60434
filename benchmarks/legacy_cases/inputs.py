"""Cases about the model's inputs: inputs used only for their shape or not at all, in-place ops
and tensor factories on inputs, Python scalars among the inputs. The TorchScript exporter dropped
graph inputs the graph did not use and kept Python numbers as inputs: legacy feeding code relies
on both."""

from __future__ import annotations

import torch
from torch import nn

from .blocks import ints, rand
from .case import Case


class UnusedSecond(nn.Module):
    def forward(self, x, y):
        return x * 2


class UnusedFirst(nn.Module):
    def forward(self, x, y):
        return y + 1


class ShapeOnly(nn.Module):
    def forward(self, x, y):
        return x.reshape(y.shape[0], -1)


class UnusedPositionBias(nn.Module):
    """A T5-style block whose caller passes ``position_bias`` it no longer uses."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, hidden, mask=None, position_bias=None):
        out = self.proj(hidden)
        return out if mask is None else out * mask.unsqueeze(-1)


class PairInput(nn.Module):
    def forward(self, pair):
        first, _second = pair  # the second element is not used
        return first.relu()


class Flatten(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), -1)


class ArangeFromShape(nn.Module):
    def forward(self, x):
        return x + torch.arange(x.size(1)).unsqueeze(0).float()


class TimesNumel(nn.Module):
    def forward(self, x):
        return x * x.numel()


SHAPE_UNUSED = [
    Case("unused_second_input", "shape_unused", UnusedSecond, lambda: (rand(2, 3), rand(2, 3)),
         {"input_names": ["x", "y"]}, quick=True),
    Case("unused_first_input", "shape_unused", UnusedFirst, lambda: (rand(2, 3), rand(2, 3))),
    Case("shape_only_input", "shape_unused", ShapeOnly, lambda: (rand(4, 6), rand(4)),
         {"input_names": ["x", "y"]}),
    Case("shape_only_input_dynamic", "shape_unused", ShapeOnly, lambda: (rand(4, 6), rand(4)),
         {"input_names": ["x", "y"], "dynamic_axes": {"x": {0: "n"}, "y": {0: "n"}}},
         others=lambda: [(rand(3, 6), rand(3))]),
    Case("unused_position_bias", "shape_unused", UnusedPositionBias,
         lambda: (rand(2, 5, 8), {"mask": torch.ones(2, 5), "position_bias": rand(1, 4, 5, 5)}),
         {"input_names": ["hidden", "mask", "position_bias"]}),
    Case("tuple_input_half_used", "shape_unused", PairInput, lambda: ((rand(3, 4), rand(3, 4)),)),
    Case("flatten_by_size", "shape_unused", Flatten, lambda: (rand(2, 3, 4),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch"}}}, others=lambda: [(rand(5, 3, 4),)]),
    Case("arange_from_shape", "shape_unused", ArangeFromShape, lambda: (rand(2, 6),),
         {"input_names": ["x"], "dynamic_axes": {"x": {1: "seq"}}}, others=lambda: [(rand(2, 10),)]),
    Case("numel_size0_example", "shape_unused", TimesNumel, lambda: (rand(0, 3),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "n"}}}, others=lambda: [(rand(4, 3),)],
         note="x * x.numel() with a size-0 example on a dynamic axis"),
]


class ZeroInPlace(nn.Module):
    def forward(self, x):
        return x.zero_()


class FillOnly(nn.Module):
    def forward(self, x):
        return x.fill_(1.5)


class FillThenUse(nn.Module):
    def forward(self, x, y):
        return x.fill_(2.0) * y


class NewZerosLike(nn.Module):
    def forward(self, x):
        return x.new_zeros(x.shape) + 1


class NewZerosConcat(nn.Module):
    def forward(self, x):
        return torch.cat([x, x.new_zeros((x.size(0), 4))], 1)


class ZerosLikeOther(nn.Module):
    def forward(self, x, y):
        return torch.zeros_like(y) + x


class OnesBySize(nn.Module):
    def forward(self, x):
        return torch.ones(x.size(0), 3) * 2


class AddMulInPlace(nn.Module):
    def forward(self, x):
        x.add_(1)
        x.mul_(2)
        return x


class MaskedFillInPlace(nn.Module):
    def forward(self, x):
        x.masked_fill_(x < 0, 0.0)
        return x


class StateBuffer(nn.Module):
    """An index_put into a state made from ``prev_state`` (used only for its dtype)."""

    def forward(self, input_data, prev_state):
        state = prev_state.new_zeros(3, 4)
        state[1] = input_data[0] + 1
        return state


class CopyInto(nn.Module):
    def forward(self, x):
        y = torch.zeros(2, 3)
        y.copy_(x)
        return y * 2


INPLACE_FACTORY = [
    Case("zero_inplace", "inplace_factory", ZeroInPlace, lambda: (rand(2, 3),), quick=True),
    Case("fill_only", "inplace_factory", FillOnly, lambda: (rand(3, 2),), {"input_names": ["x"]}),
    Case("fill_then_use", "inplace_factory", FillThenUse, lambda: (rand(2, 3), rand(2, 3)),
         {"input_names": ["x", "y"]}),
    Case("new_zeros_like_shape", "inplace_factory", NewZerosLike, lambda: (rand(2, 4),)),
    Case("new_zeros_concat", "inplace_factory", NewZerosConcat, lambda: (rand(3, 2),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch"}}}, others=lambda: [(rand(6, 2),)]),
    Case("zeros_like_other", "inplace_factory", ZerosLikeOther, lambda: (rand(2, 3), rand(2, 3))),
    Case("ones_by_dynamic_size", "inplace_factory", OnesBySize, lambda: (rand(4, 5),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch"}}}, others=lambda: [(rand(7, 5),)]),
    Case("add_mul_inplace", "inplace_factory", AddMulInPlace, lambda: (rand(3, 3),)),
    Case("masked_fill_inplace", "inplace_factory", MaskedFillInPlace, lambda: (rand(4, 4),)),
    Case("index_put_prev_state", "inplace_factory", StateBuffer, lambda: (rand(2, 4), rand(3, 4)),
         {"input_names": ["input_data", "prev_state"]}),
    Case("copy_into_zeros", "inplace_factory", CopyInto, lambda: (rand(2, 3),)),
]


class IntPlusTensor(nn.Module):
    def forward(self, x: int, y):
        return x + y


class TensorTimesFloat(nn.Module):
    def forward(self, x, scale: float):
        return x * scale


class BoolFlag(nn.Module):
    def forward(self, x, double: bool):
        return x * 2 if double else x


class IntAsShape(nn.Module):
    def forward(self, x, rows: int):
        return x.reshape(rows, -1)


class TwoScalars(nn.Module):
    def forward(self, x, alpha: float, shift: int):
        return x * alpha + shift


class ScaleKeyword(nn.Module):
    def forward(self, x, scale: float = 1.0):
        return x * scale


class IntPower(nn.Module):
    def forward(self, x, p: int):
        return x ** p


class Eps(nn.Module):
    def forward(self, x, eps: float = 1e-5):
        return x / (x.abs().sum(-1, keepdim=True) + eps)


SCALAR_INPUT = [
    Case("int_plus_tensor", "scalar_input", IntPlusTensor, lambda: (3, ints(10, 2, 3, 4)), quick=True),
    Case("tensor_times_float", "scalar_input", TensorTimesFloat, lambda: (rand(2, 3, 4), 3.0)),
    Case("bool_flag", "scalar_input", BoolFlag, lambda: (rand(2, 3), True)),
    Case("int_as_shape", "scalar_input", IntAsShape, lambda: (rand(4, 6), 2)),
    Case("two_scalars", "scalar_input", TwoScalars, lambda: (rand(3, 4), 0.5, 2),
         {"input_names": ["x", "alpha", "shift"]}),
    Case("float_in_kwargs_dict", "scalar_input", ScaleKeyword, lambda: (rand(2, 5), {"scale": 0.25})),
    Case("int_power", "scalar_input", IntPower, lambda: (rand(3, 3), 2)),
    Case("eps_float", "scalar_input", Eps, lambda: (rand(2, 6), 1e-3), {"input_names": ["x", "eps"]}),
]

CASES = SHAPE_UNUSED + INPLACE_FACTORY + SCALAR_INPUT
