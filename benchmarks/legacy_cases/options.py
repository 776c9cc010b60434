"""Legacy export options as old scripts passed them: training modes with constant folding off,
``keep_initializers_as_inputs``, custom input/output names, ``operator_export_type``, options
passed positionally (torch 1.x-2.4 layouts) and torch 1.x keywords current torch rejects."""

from __future__ import annotations

import torch
from torch import nn

from .blocks import image, rand
from .case import Case

TRAINING = torch.onnx.TrainingMode


class ConvBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class DropoutHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.5), nn.Linear(12, 2))

    def forward(self, x):
        return self.net(x)


class ConstantBranch(nn.Module):
    """A subgraph on weights only: folded by default, kept with do_constant_folding=False."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(rand(5, 5))

    def forward(self, x):
        return x @ (self.weight.t() @ self.weight + torch.eye(5))


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 6, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.cls = nn.Linear(6, 4)

    def forward(self, images):
        logits = self.cls(self.body(images))
        return logits, logits.softmax(-1)


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))

    def forward(self, x):
        return self.net(x)


def _train(module: nn.Module) -> nn.Module:
    return module.train()


CASES = [
    Case("training_mode_train_no_folding", "legacy_options", lambda: ConvBn().eval(), lambda: (image(2, 3, 6, 6),),
         {"training": TRAINING.TRAINING, "do_constant_folding": False, "opset_version": 14},
         note="onnxruntime-training / yolov5 style: BatchNorm exported in training mode", quick=True),
    Case("training_mode_preserve_train", "legacy_options", lambda: _train(ConvBn()), lambda: (image(2, 3, 6, 6),),
         {"training": TRAINING.PRESERVE, "do_constant_folding": False, "opset_version": 14}),
    Case("training_mode_eval_of_train_model", "legacy_options", lambda: _train(DropoutHead()),
         lambda: (rand(4, 6),), {"training": TRAINING.EVAL}, note="dropout off in the exported model"),
    Case("keep_initializers_as_inputs", "legacy_options", lambda: Mlp().eval(), lambda: (rand(2, 8),),
         {"input_names": ["x"], "keep_initializers_as_inputs": True, "opset_version": 11},
         note="insightface / mmdeploy style"),
    Case("no_constant_folding", "legacy_options", ConstantBranch, lambda: (rand(3, 5),),
         {"do_constant_folding": False}),
    Case("custom_names_two_outputs", "legacy_options", lambda: TwoHeads().eval(), lambda: (image(2, 3, 12, 12),),
         {"input_names": ["images"], "output_names": ["logits", "probs"],
          "dynamic_axes": {"images": {0: "batch"}, "logits": {0: "batch"}, "probs": {0: "batch"}}},
         others=lambda: [(image(5, 3, 12, 12),)]),
    Case("explicit_defaults", "legacy_options", lambda: Mlp().eval(), lambda: (rand(2, 8),),
         {"export_params": True, "verbose": False, "operator_export_type": torch.onnx.OperatorExportTypes.ONNX,
          "opset_version": 13, "input_names": ["x"], "output_names": ["y"]}),
    Case("positional_options_1_11_layout", "legacy_options", lambda: Mlp().eval(), lambda: (rand(2, 8),),
         positional=(True, False, TRAINING.EVAL, ["x"], ["y"], torch.onnx.OperatorExportTypes.ONNX, 13),
         note="options after f passed positionally (torch 1.11-2.4)"),
    Case("example_outputs_1x", "legacy_options", lambda: Mlp().eval(), lambda: (rand(2, 8),),
         {"example_outputs": torch.zeros(2, 3), "input_names": ["x"], "output_names": ["y"]},
         note="torch 1.x keyword, removed"),
    Case("checker_and_external_data_1x", "legacy_options", lambda: Mlp().eval(), lambda: (rand(2, 8),),
         {"enable_onnx_checker": True, "use_external_data_format": False, "opset_version": 12,
          "input_names": ["input_ids"]}, note="the original transformers.onnx converter's keywords"),
    Case("retain_param_name_strip_doc_1x", "legacy_options", lambda: Mlp().eval(), lambda: (rand(2, 8),),
         {"_retain_param_name": True, "strip_doc_string": False, "do_constant_folding": True}),
    Case("partial_input_names", "legacy_options", lambda: ConvBn().eval(),
         lambda: (image(1, 3, 6, 6),), {"input_names": ["input"], "output_names": ["output"],
                                         "dynamic_axes": {"input": {0: "batch_size"}, "output": {0: "batch_size"}}},
         others=lambda: [(image(4, 3, 6, 6),)], note="the torch tutorial's call with a batch-1 dummy"),
]
