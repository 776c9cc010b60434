"""``g.onnxscript_op`` (issue 31): the node calls the onnxscript function, and the function is
in the model, so onnxruntime runs it (with TorchScript present or hidden)."""

from __future__ import annotations

import numpy as np
import symbolics_helpers as H
import torch
from onnxscript import opset18 as op
from onnxscript import script, values

EXAMPLE = values.Opset("com.example.compat", 1)


@script(EXAMPLE)
def DoubleRelu(x):
    return op.Add(op.Relu(x), op.Relu(x))


def relu_symbolic(g, x):
    return g.onnxscript_op(DoubleRelu, x).setType(x.type())


class Net(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1


def test_onnxscript_function_is_added_to_the_model(registered):
    registered("aten::relu", relu_symbolic, 15)
    x = torch.randn(3, 4)
    proto = H.export_new(Net().eval(), (x,)).program.model_proto
    assert [(f.domain, f.name) for f in proto.functions] == [("com.example.compat", "DoubleRelu")]
    assert ("com.example.compat", "DoubleRelu") in {(n.domain, n.op_type) for n in proto.graph.node}
    for seed in (0, 1):  # a static export: other values, same shape
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))
        (got,) = H.run_ort(proto, {"x": x})
        np.testing.assert_allclose(got, (2 * torch.relu(x) + 1).numpy(), rtol=1e-6)
