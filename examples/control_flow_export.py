"""A model with Python control flow on a tensor value: torch.export stops at it.

Old scripts exported it with the tracer (one branch, a TracerWarning). Under compat the torch.export
route captures it with torch.export.draft_export, which keeps the branch the example takes; at this
call's opset 17 with fixed input shapes, auto tries the TorchScript route first (its tracer bakes the
same branch). Either way compat says so: an ONX003 warning at the call, the line in the ledger's
`baked`.
"""
import os
import sys

import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x):
        h = self.proj(x)
        if h.sum() > 0:  # data-dependent: the export keeps the branch the example takes
            return torch.tanh(h)
        return torch.sigmoid(h)


out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
torch.manual_seed(1)
model = Gate().eval()
with torch.no_grad():
    model.proj.bias.fill_(1.0)  # the traced branch is the one every test input takes
x = torch.rand(2, 6)
torch.onnx.export(model, (x,), os.path.join(out_dir, "gate.onnx"),
                  input_names=["x"], output_names=["y"], opset_version=17)
print("exported", os.path.join(out_dir, "gate.onnx"))
