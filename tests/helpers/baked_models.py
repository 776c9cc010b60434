"""Models whose forward branches on tensor values, as TorchScript-era export scripts had them.

torch.export stops at each such branch (a data-dependent guard); the TorchScript tracer exported
the branch the example took. Each ``Case`` gives the model, its example, an input of another size
that takes the same branch, and one that takes the other branch, so a test or benchmark can check
an exported model against eager where the bake holds and see what it does where it does not.
Written by hand after the idioms of torchvision's ``ops/boxes.py`` (``batched_nms``), Piper's
VITS (``transforms.py``'s discriminant assert, the duration-driven length regulator) and plain
``if x.mean() > 0:`` gates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


class MeanGate(nn.Module):
    def forward(self, x):
        if x.mean() > 0:
            return x * 2
        return x - 1


def _matrix_nms(boxes, scores, iou_threshold: float):
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    lt = torch.max(boxes[:, None, :2], boxes[None, :, :2])
    rb = torch.min(boxes[:, None, 2:], boxes[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    iou = inter / (area[:, None] + area[None, :] - inter)
    suppressed = ((iou > iou_threshold) & (scores[None, :] > scores[:, None])).any(1)
    return torch.nonzero(~suppressed).squeeze(1)


def _batched_nms_vanilla(boxes, scores, idxs, iou_threshold: float):
    keep_mask = torch.zeros_like(scores, dtype=torch.bool)
    for class_id in torch.unique(idxs):
        curr = torch.where(idxs == class_id)[0]
        keep_mask[curr[_matrix_nms(boxes[curr], scores[curr], iou_threshold)]] = True
    return torch.where(keep_mask)[0]


def _batched_nms_coordinate_trick(boxes, scores, idxs, iou_threshold: float):
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.int64, device=boxes.device)
    max_coordinate = boxes.max()
    offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
    boxes_for_nms = boxes + offsets[:, None]
    return _matrix_nms(boxes_for_nms, scores, iou_threshold)


def batched_nms(boxes, scores, idxs, iou_threshold: float):
    if boxes.numel() > 4000:
        return _batched_nms_vanilla(boxes, scores, idxs, iou_threshold)
    return _batched_nms_coordinate_trick(boxes, scores, idxs, iou_threshold)


class Detector(nn.Module):
    """A detection head's post-processing: score filter, then the batched_nms idiom."""

    def forward(self, boxes, scores, labels):
        keep = scores > 0.3
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
        kept = batched_nms(boxes, scores, labels, 0.5)
        return boxes[kept], scores[kept]


class FlowStep(nn.Module):
    """A VITS-style spline step: checks its input domain, asserts its discriminant is
    non-negative before the root (Piper's ``transforms.py``)."""

    tail_bound = 5.0

    def forward(self, x):
        if torch.min(x) < -self.tail_bound or torch.max(x) > self.tail_bound:
            raise ValueError("Input outside domain")
        a = x * x + 1.0
        b = 2.0 * x
        c = x * 0.5
        discriminant = b.pow(2) - 4 * a * c + 4.0
        assert (discriminant >= 0).all()
        return (2 * c) / (-b - torch.sqrt(discriminant))


class DurationExpand(nn.Module):
    """TTS length regulation: frames repeated by predicted durations (a data-dependent output
    length), cut at ``max_frames``, then a post-net."""

    max_frames = 40

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 1)
        self.post = nn.Conv1d(4, 4, 3, padding=1)

    def forward(self, x):  # x: [T, 4]
        durations = torch.ceil(torch.exp(self.proj(x)).squeeze(-1)).long().clamp(min=1)
        frames = torch.repeat_interleave(x, durations, dim=0)
        if frames.shape[0] > self.max_frames:
            frames = frames[: self.max_frames]
        return self.post(frames.t().unsqueeze(0))


class GatedEncoder(nn.Module):
    """A transformer layer behind a data-dependent gate, with dynamic batch and sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)

    def forward(self, x):
        if x.abs().mean() > 0.1:
            x = self.layer(x)
        return x * 2


class LengthMask(nn.Module):
    """VITS's ``sequence_mask`` with the length taken as a Python int, checked against the time
    axis (the tracer bakes the int; torch.export keeps it a symbol)."""

    def forward(self, x, lengths):  # x: [B, T, C], lengths: [B]
        max_len = int(lengths.max())
        if max_len > x.shape[1]:
            raise ValueError("a length exceeds the time axis")
        mask = torch.arange(max_len)[None, :] < lengths[:, None]
        return x[:, :max_len] * mask[..., None]


@dataclass
class Case:
    """A model, its example, an input of another size on the example's branch and one that takes
    the other branch; ``names`` are the input names, ``axes`` the dynamic axes (legacy form)."""

    name: str
    make: Callable[[], nn.Module]
    names: list[str]
    axes: dict[str, dict[int, str]]
    example: Callable[[], tuple[Any, ...]]
    same_branch: Callable[[], tuple[Any, ...]]
    other_branch: Callable[[], tuple[Any, ...]]
    #: the source text of each line torch.export stops at (the bakes a capture must record)
    baked: list[str] = field(default_factory=list)


def _boxes(n: int, low_scores: bool = False) -> tuple[torch.Tensor, ...]:
    boxes = torch.rand(n, 4) * 50
    boxes[:, 2:] += boxes[:, :2] + 5
    scores = torch.rand(n) * (0.2 if low_scores else 1.0)
    return boxes, scores, torch.randint(0, 3, (n,))


def _seeded(fn: Callable[[], tuple[Any, ...]], seed: int) -> Callable[[], tuple[Any, ...]]:
    def make() -> tuple[Any, ...]:
        torch.manual_seed(seed)
        return fn()

    return make


def _encoder() -> nn.Module:
    torch.manual_seed(0)
    return GatedEncoder().eval()


def _durations() -> nn.Module:
    torch.manual_seed(0)
    return DurationExpand().eval()


CASES: tuple[Case, ...] = (
    Case("mean_gate", lambda: MeanGate().eval(), ["x"], {"x": {0: "batch"}},
         _seeded(lambda: (torch.rand(2, 3),), 1), _seeded(lambda: (torch.rand(5, 3),), 2),
         _seeded(lambda: (-torch.rand(5, 3),), 3), ["if x.mean() > 0:"]),
    Case("batched_nms", lambda: Detector().eval(), ["boxes", "scores", "labels"],
         {"boxes": {0: "n"}, "scores": {0: "n"}, "labels": {0: "n"}},
         _seeded(lambda: _boxes(20), 1), _seeded(lambda: _boxes(40), 2),
         _seeded(lambda: _boxes(30, low_scores=True), 3),
         ["if boxes.numel() > 4000:", "if boxes.numel() == 0:"]),
    Case("vits_assert", lambda: FlowStep().eval(), ["x"], {"x": {0: "batch"}},
         _seeded(lambda: (torch.rand(2, 3),), 1), _seeded(lambda: (torch.rand(7, 3),), 2),
         _seeded(lambda: (torch.rand(7, 3) + 3,), 3),
         ["if torch.min(x) < -self.tail_bound or torch.max(x) > self.tail_bound:",
          "assert (discriminant >= 0).all()"]),
    Case("duration_length", _durations, ["x"], {"x": {0: "tokens"}},
         _seeded(lambda: (torch.rand(6, 4),), 1), _seeded(lambda: (torch.rand(9, 4),), 2),
         _seeded(lambda: (torch.rand(50, 4),), 3), ["if frames.shape[0] > self.max_frames:"]),
    Case("gated_encoder", _encoder, ["x"], {"x": {0: "batch", 1: "seq"}},
         _seeded(lambda: (torch.randn(2, 5, 16),), 1), _seeded(lambda: (torch.randn(3, 9, 16),), 2),
         _seeded(lambda: (torch.randn(3, 9, 16) * 0.01,), 3), ["if x.abs().mean() > 0.1:"]),
    Case("length_mask", lambda: LengthMask().eval(), ["x", "lengths"],
         {"x": {0: "batch", 1: "time"}, "lengths": {0: "batch"}},
         _seeded(lambda: (torch.randn(2, 8, 3), torch.tensor([5, 8])), 1),
         _seeded(lambda: (torch.randn(3, 12, 3), torch.tensor([4, 11, 7])), 2),
         _seeded(lambda: (torch.randn(2, 8, 3), torch.tensor([9, 6])), 3),
         ["if max_len > x.shape[1]:"]),
)

BY_NAME = {c.name: c for c in CASES}
