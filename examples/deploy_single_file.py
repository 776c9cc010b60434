"""A deploy step that ships only `model.onnx`: with torch >= 2.9's default exporter the weights
land in `model.onnx.data`, which this copy step leaves behind, and the deployed model breaks.
"""
import os
import shutil
import sys

import torch
import torch.nn as nn

out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
build = os.path.join(out_dir, "build")
deploy = os.path.join(out_dir, "deploy")
os.makedirs(build, exist_ok=True)
os.makedirs(deploy, exist_ok=True)

torch.manual_seed(2)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).eval()
torch.onnx.export(model, (torch.randn(4, 16),), os.path.join(build, "model.onnx"),
                  input_names=["features"], output_names=["embedding"],
                  dynamic_axes={"features": {0: "batch"}, "embedding": {0: "batch"}})
shutil.copy(os.path.join(build, "model.onnx"), os.path.join(deploy, "model.onnx"))
print("deployed", os.path.join(deploy, "model.onnx"))
