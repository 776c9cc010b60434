"""Models and onnxruntime parity helpers for the core (issue 2) tests."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest
import torch


class Parity:
    """Run an exported model in onnxruntime and compare with eager torch."""

    @staticmethod
    def run(model_path_or_bytes: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        import onnxruntime as ort

        src = model_path_or_bytes
        sess = ort.InferenceSession(src if isinstance(src, (bytes, str)) else str(src),
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)

    @staticmethod
    def input_names(model_path_or_bytes: Any) -> list[str]:
        import onnxruntime as ort

        src = model_path_or_bytes
        sess = ort.InferenceSession(src if isinstance(src, (bytes, str)) else str(src),
                                    providers=["CPUExecutionProvider"])
        return [i.name for i in sess.get_inputs()]

    def check(self, path: Any, model: torch.nn.Module, inputs: Sequence[torch.Tensor],
              names: Sequence[str] | None = None, atol: float = 1e-5) -> None:
        names = list(names) if names else self.input_names(path)
        feeds = {n: t.detach().numpy() for n, t in zip(names, inputs)}
        with torch.no_grad():
            expected = model(*inputs)
        if isinstance(expected, torch.Tensor):
            expected = (expected,)
        got = self.run(path, feeds)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e.numpy(), atol=atol, rtol=1e-4)


@pytest.fixture
def parity() -> Parity:
    return Parity()


class SmallNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


class DataDependent(torch.nn.Module):
    """Python `if` on a tensor value: torch.export stops at it, the torch.export route's draft
    capture bakes the example's branch (as the TorchScript tracer does)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        with torch.no_grad():
            self.fc.bias.fill_(2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if h.sum() > 0:
            return torch.tanh(h)
        return torch.sigmoid(h)


class TorchScriptOnly(DataDependent):
    """Exports on the TorchScript route only: its forward refuses torch.export's capture (a
    stand-in for whatever torch.export cannot capture), so auto falls back."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_exporting():
            raise NotImplementedError("this model is captured by the TorchScript tracer only")
        return torch.tanh(self.fc(x))


class Unexportable(torch.nn.Module):
    """Fails on both routes: a data-dependent branch (torch.export) returning a Python float
    (the TorchScript tracer only takes tensor outputs)."""

    def forward(self, x: torch.Tensor) -> Any:
        if x.sum() > 0:
            return float(x.sum())
        return x


class WithKwargs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor, scale: torch.Tensor | None = None) -> torch.Tensor:
        y = self.fc(x)
        return y * scale if scale is not None else y


@pytest.fixture
def small_net() -> SmallNet:
    torch.manual_seed(0)
    return SmallNet().eval()


class Models:
    SmallNet = SmallNet
    DataDependent = DataDependent
    TorchScriptOnly = TorchScriptOnly
    Unexportable = Unexportable
    WithKwargs = WithKwargs


@pytest.fixture
def models() -> type[Models]:
    return Models
