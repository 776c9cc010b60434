"""Control flow as legacy models wrote it: Python branches on tensor values (the tracer baked the
branch of the example), loops over shapes, ``torch.onnx.is_in_onnx_export()`` branches, and
scripted modules whose branches the TorchScript exporter kept as ``If``/``Loop``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import rand
from .case import Case


class DataIf(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def _positive(*shape: int) -> torch.Tensor:
    return torch.rand(*shape) + 0.1


class LoopOverBatch(nn.Module):
    def forward(self, x):
        acc = torch.zeros_like(x[0])
        for i in range(x.size(0)):
            acc = acc + x[i] * (i + 1)
        return acc


class FixedLoop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        for _ in range(3):
            x = torch.relu(self.lin(x))
        return x


class ExportBranch(nn.Module):
    """yolov7-style: an export-friendly spelling of the same math while exporting."""

    def forward(self, x):
        if torch.onnx.is_in_onnx_export():
            return x * torch.sigmoid(x)
        return F.silu(x)


class ExportPostprocess(nn.Module):
    """detectron2-style: export returns raw scores, eager the same scores plus a no-op path."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        scores = self.head(x).softmax(-1)
        if not torch.onnx.is_in_onnx_export():
            scores = scores.clamp(min=0.0)
        return scores


class ShapeBranch(nn.Module):
    def forward(self, x):
        if x.shape[1] > 4:
            return x[:, :4]
        return x


class ScriptedIf(nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            y = x * 2
        else:
            y = x - 1
        return y


class ScriptedLoop(nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.size(1))
        for i in range(x.size(0)):
            acc = acc + x[i]
        return acc


class ItemScale(nn.Module):
    def forward(self, x):
        return x / x.abs().max().item()


class ChunkComprehension(nn.Module):
    def forward(self, x):
        return torch.cat([c * (i + 1) for i, c in enumerate(x.chunk(3, 1))], 1)


class OptionalMask(nn.Module):
    def forward(self, x, mask=None):
        if mask is not None:
            x = x * mask
        return x.sum(-1)


CASES = [
    Case("data_if_same_branch", "control_flow", DataIf, lambda: (_positive(2, 3),),
         others=lambda: [(_positive(2, 3),)], note="branch on a tensor value; other input takes the same branch",
         quick=True),
    Case("data_if_other_branch", "control_flow", DataIf, lambda: (_positive(2, 3),),
         others=lambda: [(-_positive(2, 3),)], note="the other input takes the other branch: a baked branch fails"),
    Case("loop_over_batch_static", "control_flow", LoopOverBatch, lambda: (rand(3, 4),)),
    Case("loop_over_batch_dynamic", "control_flow", LoopOverBatch, lambda: (rand(3, 4),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch"}}}, others=lambda: [(rand(5, 4),)],
         note="a Python loop over a dynamic size"),
    Case("fixed_loop", "control_flow", FixedLoop, lambda: (rand(2, 6),)),
    Case("is_in_onnx_export_branch", "control_flow", ExportBranch, lambda: (rand(2, 5),)),
    Case("is_in_onnx_export_postprocess", "control_flow", ExportPostprocess, lambda: (rand(3, 8),),
         {"input_names": ["x"], "output_names": ["scores"], "dynamic_axes": {"x": {0: "n"}, "scores": {0: "n"}}},
         others=lambda: [(rand(6, 8),)]),
    Case("shape_branch", "control_flow", ShapeBranch, lambda: (rand(2, 6),)),
    Case("scripted_if", "control_flow", lambda: torch.jit.script(ScriptedIf()), lambda: (_positive(2, 3),),
         others=lambda: [(-_positive(2, 3),)], note="torch.jit.script: the If node keeps both branches"),
    Case("scripted_loop", "control_flow", lambda: torch.jit.script(ScriptedLoop()), lambda: (rand(3, 4),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "n"}}}, others=lambda: [(rand(6, 4),)]),
    Case("item_scale", "control_flow", ItemScale, lambda: (rand(3, 4),), others=lambda: [(rand(3, 4) * 3,)],
         note=".item() on a tensor: the tracer bakes the example's value"),
    Case("chunk_comprehension", "control_flow", ChunkComprehension, lambda: (rand(2, 6),)),
    Case("optional_mask_absent", "control_flow", OptionalMask, lambda: (rand(2, 4),)),
]
