"""Each torch.export-route result gets its strict shape/type check once: a model the
down-converter already checked is not inferred again, unless its graph changed since."""

from __future__ import annotations

import collections
import contextlib
import warnings
from collections.abc import Iterator

import numpy as np
import onnx.shape_inference as si
import onnx_ir as ir
import pytest
import torch

import compat
from compat.errors import RouteFailed
from dynamo import downconvert, validate


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return torch.softmax(self.fc(y), -1)


@contextlib.contextmanager
def _strict_runs() -> Iterator[collections.Counter[str]]:
    counts: collections.Counter[str] = collections.Counter()
    real = si.infer_shapes

    def counted(*args, **kwargs):
        if kwargs.get("strict_mode"):
            counts["strict"] += 1
        return real(*args, **kwargs)

    si.infer_shapes = counted
    try:
        yield counts
    finally:
        si.infer_shapes = real


@pytest.mark.parametrize("opset", [18, 13, 11])
def test_one_strict_inference_per_result(tmp_path, opset):
    model, x = Net().eval(), torch.randn(1, 3, 8, 8)
    with _strict_runs() as counts, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (x,), tmp_path / "m.onnx", route="dynamo", opset_version=opset,
                      input_names=["x"])
    assert counts["strict"] == 1
    import onnxruntime as ort

    got = ort.InferenceSession(str(tmp_path / "m.onnx")).run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def _program(opset: int):
    class Program:  # what validate.check reads of an ONNXProgram
        def __init__(self, model: ir.Model) -> None:
            self.model = model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = torch.onnx.export(Net().eval(), (torch.randn(1, 3, 8, 8),), dynamo=True)
    conversion = downconvert.downconvert(built.model, opset)
    assert conversion.complete and conversion.checked
    return Program(conversion.model)


def test_a_converted_model_changed_afterwards_is_checked_again():
    program = _program(13)
    with _strict_runs() as counts:
        validate.check(program)
    assert counts["strict"] == 0  # the down-converter checked this very graph
    node = next(n for n in program.model.graph if n.op_type == "Softmax")
    add = ir.node("Add", [node.inputs[0], ir.Value(name="extra", type=ir.TensorType(ir.DataType.DOUBLE),
                                                   shape=ir.Shape([1, 2]))])
    program.model.graph.insert_after(node, add)
    program.model.graph.inputs.append(add.inputs[1])
    with _strict_runs() as counts, pytest.raises(RouteFailed):
        validate.check(program)  # float + double: strict inference rejects it
    assert counts["strict"] == 1
