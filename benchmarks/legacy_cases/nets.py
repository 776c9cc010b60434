"""Small networks of the kind torch's ``test_models.py`` and torchvision's ONNX tests exported
(narrow versions written by hand: LeNet/MNIST, VGG, ResNet, MobileNet, SqueezeNet, DCGAN,
super-resolution, a U-Net), and transformer encoder layers with dynamic batch/sequence axes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .blocks import image, ints, rand
from .case import Case

NCHW = {"input_names": ["input"], "output_names": ["output"],
        "dynamic_axes": {"input": {0: "batch"}, "output": {0: "batch"}}}


class LeNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 6, 5), nn.Conv2d(6, 16, 5)
        self.f1, self.f2 = nn.Linear(16 * 4 * 4, 32), nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return F.log_softmax(self.f2(F.relu(self.f1(x.view(x.size(0), -1)))), dim=1)


class VggBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(8, 8, 3, padding=1),
                                      nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Linear(8 * 8 * 8, 16), nn.ReLU(True), nn.Dropout(), nn.Linear(16, 5))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class BasicBlock(nn.Module):
    def __init__(self, cin: int = 8, cout: int = 16) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, 2, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, 2, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.down(x))


class DepthwiseSeparable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
                                  nn.Conv2d(8, 12, 1, bias=False), nn.BatchNorm2d(12), nn.Hardswish())

    def forward(self, x):
        return self.body(x)


class Fire(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(8, 4, 1)
        self.e1, self.e3 = nn.Conv2d(4, 6, 1), nn.Conv2d(4, 6, 3, padding=1)

    def forward(self, x):
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.e1(s)), F.relu(self.e3(s))], 1)


class DcganGenerator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(16, 12, 4, 1, 0, bias=False), nn.BatchNorm2d(12), nn.ReLU(True),
            nn.ConvTranspose2d(12, 6, 4, 2, 1, bias=False), nn.BatchNorm2d(6), nn.ReLU(True),
            nn.ConvTranspose2d(6, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.main(z)


class SuperResolution(nn.Module):
    def __init__(self, factor: int = 2) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.Conv2d(16, 8, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(8, factor**2, 3, padding=1), nn.PixelShuffle(factor))

    def forward(self, x):
        return self.body(x)


class AudioConv1d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(4, 8, 5, stride=2, padding=2), nn.BatchNorm1d(8), nn.GELU(),
                                  nn.Conv1d(8, 8, 3, dilation=2, padding=2), nn.ReLU())

    def forward(self, x):
        return self.body(x).mean(-1)


class Conv3dNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv3d(2, 4, 3, padding=1)
        self.pool = nn.AvgPool3d(2)

    def forward(self, x):
        return self.pool(F.relu(self.conv(x)))


class SqueezeExcite(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.fc1, self.fc2 = nn.Conv2d(8, 2, 1), nn.Conv2d(2, 8, 1)

    def forward(self, x):
        y = self.conv(x)
        w = torch.sigmoid(self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(y, 1)))))
        return y * w


class TinyUNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.mid = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.out = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        d = self.down(x)
        return self.out(torch.cat([d, self.up(self.mid(d))], 1))


def _ev(make):
    return lambda: make().eval()


CONVNETS = [
    Case("lenet_mnist", "convnet", _ev(LeNet), lambda: (image(2, 1, 28, 28),), NCHW,
         others=lambda: [(image(5, 1, 28, 28),)], quick=True),
    Case("vgg_block", "convnet", _ev(VggBlock), lambda: (image(2, 3, 16, 16),)),
    Case("resnet_basic_block", "convnet", _ev(BasicBlock), lambda: (image(2, 8, 16, 16),),
         {"input_names": ["input"], "dynamic_axes": {"input": {0: "batch", 2: "h", 3: "w"}}},
         others=lambda: [(image(3, 8, 20, 12),)]),
    Case("depthwise_separable", "convnet", _ev(DepthwiseSeparable), lambda: (image(1, 8, 10, 10),)),
    Case("squeezenet_fire", "convnet", _ev(Fire), lambda: (image(2, 8, 7, 7),), NCHW,
         others=lambda: [(image(1, 8, 7, 7),)]),
    Case("dcgan_generator", "convnet", _ev(DcganGenerator), lambda: (rand(2, 16, 1, 1),), {"opset_version": 11}),
    Case("super_resolution", "convnet", _ev(SuperResolution), lambda: (image(1, 1, 12, 12),),
         {"input_names": ["input"], "output_names": ["output"],
          "dynamic_axes": {"input": {0: "batch_size", 2: "h", 3: "w"}, "output": {0: "batch_size", 2: "h", 3: "w"}}},
         others=lambda: [(image(2, 1, 16, 10),)], note="the PyTorch super-resolution tutorial's call"),
    Case("audio_conv1d", "convnet", _ev(AudioConv1d), lambda: (rand(2, 4, 40),),
         {"input_names": ["audio"], "dynamic_axes": {"audio": {0: "batch", 2: "time"}}},
         others=lambda: [(rand(1, 4, 64),)]),
    Case("conv3d", "convnet", _ev(Conv3dNet), lambda: (rand(1, 2, 4, 6, 6),)),
    Case("squeeze_excite", "convnet", _ev(SqueezeExcite), lambda: (image(2, 8, 6, 6),)),
    Case("tiny_unet", "convnet", _ev(TinyUNet), lambda: (image(1, 3, 16, 16),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "n", 2: "h", 3: "w"}}},
         others=lambda: [(image(2, 3, 24, 32),)]),
]


D = 16


def _layer(batch_first: bool = True, norm_first: bool = False, activation: str = "relu") -> nn.Module:
    return nn.TransformerEncoderLayer(D, 4, 32, dropout=0.0, batch_first=batch_first, norm_first=norm_first,
                                      activation=activation)


class Encoder(nn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, D)
        self.encoder = nn.TransformerEncoder(_layer(), layers, enable_nested_tensor=False)
        self.out = nn.Linear(D, 3)

    def forward(self, ids):
        return self.out(self.encoder(self.emb(ids)))


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)

    def forward(self, x, key_padding_mask):
        return self.attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)[0]


class CausalLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = _layer()

    def forward(self, x):
        n = x.size(1)
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        return self.layer(x, src_mask=mask)


SEQ = {"input_names": ["x"], "output_names": ["y"],
       "dynamic_axes": {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}}

TRANSFORMER = [
    Case("encoder_layer_static", "transformer", lambda: _layer().eval(), lambda: (rand(2, 6, D),), atol=1e-4),
    Case("encoder_layer_dynamic", "transformer", lambda: _layer().eval(), lambda: (rand(2, 6, D),), SEQ,
         others=lambda: [(rand(3, 9, D),)], atol=1e-4, quick=True),
    Case("encoder_layer_seq_first", "transformer", lambda: _layer(batch_first=False).eval(),
         lambda: (rand(6, 2, D),),
         {"input_names": ["x"], "dynamic_axes": {"x": {0: "seq", 1: "batch"}}},
         others=lambda: [(rand(4, 3, D),)], atol=1e-4),
    Case("encoder_layer_norm_first_gelu", "transformer", lambda: _layer(norm_first=True, activation="gelu").eval(),
         lambda: (rand(2, 5, D),), SEQ, others=lambda: [(rand(1, 7, D),)], atol=1e-4),
    Case("encoder_two_layers_ids", "transformer", lambda: Encoder().eval(), lambda: (ints(30, 2, 7),),
         {"input_names": ["ids"], "output_names": ["logits"],
          "dynamic_axes": {"ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}},
         others=lambda: [(ints(30, 3, 11),)], atol=1e-4),
    Case("mha_key_padding_mask", "transformer", lambda: SelfAttention().eval(),
         lambda: (rand(2, 5, D), torch.tensor([[False] * 5, [False] * 3 + [True] * 2])),
         {"input_names": ["x", "key_padding_mask"], "opset_version": 14}, atol=1e-4),
    Case("causal_mask_from_size", "transformer", lambda: CausalLayer().eval(), lambda: (rand(2, 6, D),), SEQ,
         others=lambda: [(rand(2, 9, D),)], atol=1e-4),
]

CASES = CONVNETS + TRANSFORMER
