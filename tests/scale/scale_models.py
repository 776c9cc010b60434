"""Small real models for the scale tests and benchmarks (importable by subprocesses)."""

from __future__ import annotations

import torch


class DataDependent(torch.nn.Module):
    """Python control flow on a tensor value: torch.export fails, the TorchScript tracer exports."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        if y.sum() > 0:
            return y * 2
        return y - 1


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()


def transformer() -> torch.nn.Module:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
    return torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).eval()
