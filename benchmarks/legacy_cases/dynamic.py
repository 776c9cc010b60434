"""``dynamic_axes`` as legacy scripts wrote it: dict and list forms, batch and sequence axes, a
size-1 example on a dynamic axis, one name shared by inputs and outputs (also on different axes),
keys naming nothing, dynamic image sizes. Each is checked at another size."""

from __future__ import annotations

import torch
from torch import nn

from .blocks import ints, rand
from .case import Case


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.net(x)


class TokenMlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x).softmax(-1)


class AddPair(nn.Module):
    def forward(self, x, y):
        return x + y, x * y


class Transposed(nn.Module):
    """sherpa-onnx style: the batch axis of the input is axis 1 of the output."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        return self.lin(x).transpose(0, 1)


class ConvHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 1))

    def forward(self, x):
        return self.conv(x)


class Pooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(40, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, ids, mask):
        h = self.emb(ids) * mask.unsqueeze(-1)
        return self.out(h.sum(1) / mask.sum(1, keepdim=True))


class Flattener(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(12, 3)

    def forward(self, x):
        return self.lin(x.reshape(-1, 12))


BATCH = {0: "batch"}

CASES = [
    Case("batch_axis", "dynamic_axes", Mlp, lambda: (rand(4, 10),),
         {"input_names": ["x"], "output_names": ["y"], "dynamic_axes": {"x": BATCH, "y": BATCH}},
         others=lambda: [(rand(9, 10),)], quick=True),
    Case("batch_seq_axes", "dynamic_axes", TokenMlp, lambda: (rand(2, 5, 8),),
         {"input_names": ["x"], "output_names": ["y"],
          "dynamic_axes": {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}},
         others=lambda: [(rand(3, 9, 8),)]),
    Case("list_form", "dynamic_axes", TokenMlp, lambda: (rand(2, 5, 8),),
         {"input_names": ["x"], "output_names": ["y"], "dynamic_axes": {"x": [0, 1], "y": [0, 1]}},
         others=lambda: [(rand(4, 3, 8),)]),
    Case("batch1_example", "dynamic_axes", Mlp, lambda: (rand(1, 10),),
         {"input_names": ["x"], "output_names": ["y"], "dynamic_axes": {"x": BATCH, "y": BATCH}},
         others=lambda: [(rand(5, 10),)], note="a batch-1 dummy on a dynamic axis"),
    Case("shared_name_two_inputs", "dynamic_axes", AddPair, lambda: (rand(3, 4), rand(3, 4)),
         {"input_names": ["x", "y"], "output_names": ["sum", "prod"],
          "dynamic_axes": {"x": BATCH, "y": BATCH, "sum": BATCH, "prod": BATCH}},
         others=lambda: [(rand(6, 4), rand(6, 4))]),
    Case("name_on_other_output_axis", "dynamic_axes", Transposed, lambda: (rand(3, 4, 6),),
         {"input_names": ["x"], "output_names": ["y"], "dynamic_axes": {"x": {0: "N"}, "y": {1: "N"}}},
         others=lambda: [(rand(5, 4, 6),)]),
    Case("key_naming_nothing", "dynamic_axes", Mlp, lambda: (rand(4, 10),),
         {"input_names": ["x"], "output_names": ["y"],
          "dynamic_axes": {"x": BATCH, "y": BATCH, "output": BATCH}},
         others=lambda: [(rand(2, 10),)], note="yolov7-style key that names no input or output"),
    Case("image_hw", "dynamic_axes", ConvHead, lambda: (rand(1, 3, 16, 16),),
         {"input_names": ["images"], "output_names": ["masks"],
          "dynamic_axes": {"images": {0: "batch", 2: "h", 3: "w"}, "masks": {0: "batch", 2: "h", 3: "w"}}},
         others=lambda: [(rand(2, 3, 24, 20),)]),
    Case("ids_and_mask", "dynamic_axes", Pooled, lambda: (ints(40, 2, 7), torch.ones(2, 7)),
         {"input_names": ["input_ids", "attention_mask"], "output_names": ["logits"],
          "dynamic_axes": {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                           "logits": {0: "batch"}}},
         others=lambda: [(ints(40, 3, 12), torch.ones(3, 12))]),
    Case("reshape_minus_one", "dynamic_axes", Flattener, lambda: (rand(2, 3, 12),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch"}}}, others=lambda: [(rand(5, 3, 12),)]),
    Case("input_axes_only", "dynamic_axes", Mlp, lambda: (rand(3, 10),),
         {"input_names": ["x"], "dynamic_axes": {"x": BATCH}}, others=lambda: [(rand(8, 10),)],
         note="output axes left for the exporter to infer"),
]
