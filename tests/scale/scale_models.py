"""Small real models for the scale tests and benchmarks (importable by subprocesses)."""

from __future__ import annotations

import torch


class TorchScriptOnly(torch.nn.Module):
    """Refuses torch.export's capture (a stand-in for what torch.export cannot capture): auto falls
    back to the TorchScript tracer, which exports it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        if torch.compiler.is_exporting():
            raise NotImplementedError("captured by the TorchScript tracer only")
        return y * 2


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()


def transformer() -> torch.nn.Module:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
    return torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).eval()
