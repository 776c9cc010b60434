"""Operator cases: elementwise, reductions, indexing (the bulk of torch's TorchScript-era
``test_pytorch_onnx_onnxruntime.py``: one small module per operator, checked at the example and,
where the call declares dynamic axes, at another size)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import Binary, Ternary, Unary, ints, rand
from .case import Case

XY = {"input_names": ["x", "y"], "output_names": ["out"]}


def _batch(*names: str) -> dict:
    return {n: {0: "batch"} for n in names}


ELEMENTWISE = [
    Case("add_broadcast", "elementwise", lambda: Binary(lambda x, y: x + y), lambda: (rand(2, 3, 4), rand(4)),
         quick=True),
    Case("mul_sub_constant", "elementwise", lambda: Unary(lambda x: x * 2.5 - 1), lambda: (rand(3, 4),),
         {"input_names": ["x"], "dynamic_axes": _batch("x")}, others=lambda: [(rand(6, 4),)]),
    Case("div_pow", "elementwise", lambda: Binary(lambda x, y: (x / (y.abs() + 1)) ** 2),
         lambda: (rand(2, 5), rand(2, 5)), XY),
    Case("clamp_dynamic_batch", "elementwise", lambda: Unary(lambda x: x.clamp(-0.5, 0.5)), lambda: (rand(4, 6),),
         {"input_names": ["x"], "output_names": ["y"], "dynamic_axes": {"x": {0: "n"}, "y": {0: "n"}}},
         others=lambda: [(rand(9, 6),)]),
    Case("where_compare", "elementwise", lambda: Binary(lambda x, y: torch.where(x > y, x, y * 0.1)),
         lambda: (rand(3, 4), rand(3, 4))),
    Case("activations", "elementwise",
         lambda: Unary(lambda x: F.gelu(x) + torch.sigmoid(x) * torch.tanh(x) + F.hardswish(x) + F.silu(x)),
         lambda: (rand(2, 8),), {"opset_version": 14}),
    Case("softplus_by_hand", "elementwise", lambda: Unary(lambda x: torch.log(torch.exp(x) + 1)),
         lambda: (rand(2, 3, 4),)),
    Case("remainder_floor", "elementwise",
         lambda: Binary(lambda x, y: torch.remainder(x, y.abs() + 0.5) + torch.floor(x)),
         lambda: (rand(4, 4), rand(4, 4)), atol=1e-4),
    Case("cross_without_dim", "elementwise", lambda: Binary(lambda x, y: torch.cross(x, y)),
         lambda: (rand(4, 3, 2, 3), rand(4, 3, 2, 3)), note="torch.cross without dim: the first dim of size 3"),
    Case("logical_ops", "elementwise", lambda: Binary(lambda x, y: ((x > 0) & (y < 0.5)) | (x == y)),
         lambda: (rand(3, 5), rand(3, 5)), XY),
    Case("integer_arith", "elementwise", lambda: Binary(lambda x, y: x * y + x // (y.abs() + 1)),
         lambda: (ints(20, 3, 4) - 10, ints(20, 3, 4) - 10)),
    Case("erf_rsqrt", "elementwise", lambda: Unary(lambda x: torch.erf(x) + torch.rsqrt(x.abs() + 1)),
         lambda: (rand(5, 5),)),
    Case("casts", "elementwise",
         lambda: Unary(lambda x: x.round().long().float() + x.to(torch.int32).sum(-1, keepdim=True).float()),
         lambda: (rand(3, 4) * 10,)),
]

REDUCTION = [
    Case("sum_keepdim", "reduction", lambda: Unary(lambda x: x.sum(1, keepdim=True)), lambda: (rand(2, 5, 3),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch", 1: "n"}}},
         others=lambda: [(rand(4, 7, 3),)], quick=True),
    Case("mean_dims", "reduction", lambda: Unary(lambda x: x.mean((1, 2))), lambda: (rand(3, 4, 5),)),
    Case("var_unbiased", "reduction", lambda: Unary(lambda x: x.var(dim=1) + x.var(dim=-1, keepdim=True).sum(1)),
         lambda: (rand(4, 6),), atol=1e-6),
    Case("std_mean", "reduction", lambda: Unary(lambda x: torch.std_mean(x, dim=1)), lambda: (rand(3, 8),)),
    Case("max_with_indices", "reduction", lambda: Unary(lambda x: x.max(dim=1)), lambda: (rand(3, 7),)),
    Case("argmax_argmin", "reduction", lambda: Unary(lambda x: x.argmax(-1) + x.argmin(dim=0, keepdim=True)),
         lambda: (rand(5, 5),)),
    Case("prod_dim", "reduction", lambda: Unary(lambda x: x.prod(1)), lambda: (rand(3, 4),)),
    Case("logsumexp", "reduction", lambda: Unary(lambda x: torch.logsumexp(x, 1)), lambda: (rand(2, 9),),
         {"input_names": ["x"], "dynamic_axes": {"x": {1: "n"}}}, others=lambda: [(rand(2, 4),)]),
    Case("norms", "reduction", lambda: Unary(lambda x: x.norm(p=2, dim=1).sum() + torch.norm(x)),
         lambda: (rand(4, 5),)),
    # torch's test_cdist / test_dist: each fails one route (cdist the torch.export route, which
    # has no aten._cdist_forward translation; dist the TorchScript exporter)
    Case("cdist_euclidean", "reduction", lambda: Binary(lambda x, y: torch.cdist(x, y)),
         lambda: (rand(2, 5, 3), rand(2, 4, 3)), atol=1e-4),
    Case("cdist_manhattan", "reduction", lambda: Binary(lambda x, y: torch.cdist(x, y, p=1.0)),
         lambda: (rand(2, 5, 3), rand(2, 4, 3)), atol=1e-4),
    Case("dist_p3", "reduction", lambda: Binary(lambda x, y: torch.dist(x, y, p=3)),
         lambda: (rand(3, 4), rand(3, 4)), atol=1e-4),
    Case("group_norm_large_values", "reduction",
         lambda: Unary(lambda x: F.group_norm(x * 1000 + 1000, 2)), lambda: (rand(2, 6, 4, 4),), atol=1e-4),
    Case("amax_amin", "reduction", lambda: Unary(lambda x: x.amax((0, 2)) - x.amin(1).sum(0)),
         lambda: (rand(3, 4, 4),)),
    Case("cumsum", "reduction", lambda: Unary(lambda x: x.cumsum(1)), lambda: (rand(2, 6),),
         {"input_names": ["x"], "dynamic_axes": {"x": {1: "n"}}}, others=lambda: [(rand(2, 11),)]),
    Case("all_any", "reduction", lambda: Unary(lambda x: (x > -1).all(1) | (x > 1.5).any(1)),
         lambda: (rand(6, 5),)),
]


class Gather(nn.Module):
    def forward(self, x, idx):
        return torch.gather(x, 1, idx)


class IndexPut(nn.Module):
    def forward(self, x, idx, value):
        y = x.clone()
        y[idx] = value
        return y


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 8)

    def forward(self, ids):
        return self.emb(ids)


INDEXING = [
    Case("slice_step", "indexing", lambda: Unary(lambda x: x[:, 1::2, :-1]), lambda: (rand(2, 7, 5),),
         quick=True),
    Case("negative_index", "indexing", lambda: Unary(lambda x: x[-1] + x[:, -2].sum()), lambda: (rand(3, 4),)),
    Case("gather", "indexing", Gather, lambda: (rand(3, 5), ints(5, 3, 2)), {"input_names": ["x", "idx"]}),
    Case("index_select", "indexing", lambda: Binary(lambda x, idx: x.index_select(1, idx)),
         lambda: (rand(3, 6), torch.tensor([0, 2, 5]))),
    Case("masked_fill", "indexing", lambda: Binary(lambda x, mask: x.masked_fill(mask, 0.0)),
         lambda: (rand(4, 4), rand(4, 4) > 0)),
    Case("boolean_mask_select", "indexing", lambda: Unary(lambda x: x[x > 0]), lambda: (rand(4, 5),),
         others=lambda: [(rand(4, 5),)], note="data-dependent output size; other values select other counts"),
    Case("index_put", "indexing", IndexPut, lambda: (rand(5, 3), torch.tensor([0, 3]), rand(2, 3)),
         {"input_names": ["input_data", "idx", "value"]}),
    Case("scatter", "indexing", lambda: Ternary(lambda x, idx, src: x.scatter(1, idx, src)),
         lambda: (rand(3, 5), torch.tensor([[0, 1], [2, 3], [4, 0]]), rand(3, 2))),
    Case("chunk_narrow", "indexing",
         lambda: Unary(lambda x: x.chunk(2, dim=1)[0] * x.chunk(2, dim=1)[1] + x.narrow(2, 1, 2).sum()),
         lambda: (rand(2, 4, 3),)),
    Case("topk", "indexing", lambda: Unary(lambda x: torch.topk(x, 3, dim=1)), lambda: (rand(3, 8),)),
    Case("flip_roll", "indexing", lambda: Unary(lambda x: torch.flip(x, [1]) + torch.roll(x, 1, 2)),
         lambda: (rand(2, 3, 4),)),
    Case("advanced_index_pairs", "indexing", lambda: Ternary(lambda x, i, j: x[i, j]),
         lambda: (rand(4, 5, 2), torch.tensor([0, 3, 1]), torch.tensor([4, 0, 2]))),
    Case("embedding_dynamic", "indexing", Embed, lambda: (ints(50, 2, 7),),
         {"input_names": ["ids"], "dynamic_axes": {"ids": {0: "batch", 1: "seq"}}},
         others=lambda: [(ints(50, 3, 12),)]),
    Case("half_by_size", "indexing", lambda: Unary(lambda x: x[:, : x.size(1) // 2]), lambda: (rand(2, 8),),
         {"input_names": ["x"], "dynamic_axes": {"x": {1: "seq"}}}, others=lambda: [(rand(2, 12),)]),
]

CASES = ELEMENTWISE + REDUCTION + INDEXING
