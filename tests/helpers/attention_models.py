"""Attention the way timm's BEiT computes it, reduced (docs/upstream/beit-sdpa-mask-view.md)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RelativeBiasAttention(nn.Module):
    """q/k/v unbound from one permuted projection, a relative position bias gathered from a
    parameter table as SDPA's mask, then ``transpose(1, 2).reshape``: torch's ONNX decomposition
    fails on it with autograd on ("Cannot view a tensor")."""

    def __init__(self, tokens: int = 5, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.table = nn.Parameter(torch.randn(tokens * tokens, heads))
        self.register_buffer("index", torch.randint(0, tokens * tokens, (tokens, tokens),
                                                    generator=torch.Generator().manual_seed(0)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = torch.cat([x, x, x], -1).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        bias = self.table[self.index.view(-1)].view(n, n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return x.transpose(1, 2).reshape(b, n, c)
