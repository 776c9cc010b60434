"""A torch 1.x-era export script, kept exactly as it was written (positional options, removed keywords).

Run it unchanged with:  python -m compat run examples/legacy_1x_export.py OUT_DIR
"""
import os
import sys

import torch
import torch.nn as nn


class TinyClassifier(nn.Module):
    def __init__(self):
        super(TinyClassifier, self).__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(self.pool(x).flatten(1))


out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
torch.manual_seed(0)
model = TinyClassifier()
model.eval()
dummy = torch.randn(1, 3, 32, 32)

# torch 1.4 layout: export_params, verbose, training, input_names, output_names, aten, ...
torch.onnx.export(model, dummy, os.path.join(out_dir, "classifier.onnx"),
                  True, False, False, ["image"], ["logits"], False,
                  opset_version=11,
                  example_outputs=model(dummy),
                  enable_onnx_checker=True,
                  strip_doc_string=True,
                  dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
print("exported", os.path.join(out_dir, "classifier.onnx"))
