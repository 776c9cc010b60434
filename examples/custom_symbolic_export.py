"""A legacy export with custom symbolics: gelu written as onnxruntime's com.microsoft Gelu, and an
autograd.Function whose symbolic writes its own nodes. Unchanged torch 1.x-era code."""
import sys

import torch


def ms_gelu(g, self, approximate="none"):
    return g.op("com.microsoft::Gelu", self)


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.tanh(x) * 2.0

    @staticmethod
    def symbolic(g, x):
        return g.op("Mul", g.op("Tanh", x), g.op("Constant", value_t=torch.tensor(2.0)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return ScaledTanh.apply(torch.nn.functional.gelu(self.fc(x)))


def main(out_dir):
    torch.onnx.register_custom_op_symbolic("::gelu", ms_gelu, 20)
    torch.manual_seed(0)
    model = Net().eval()
    torch.onnx.export(model, (torch.randn(2, 8),), f"{out_dir}/custom_symbolic.onnx",
                      input_names=["x"], output_names=["y"])


if __name__ == "__main__":
    main(sys.argv[1])
