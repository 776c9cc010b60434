"""The real architectures of ``bench_architectures``: each built from a small config with random
weights (``weights=None``, ``pretrained=False``: nothing is downloaded), an example input and a
second size along its dynamic axes, named and declared as a legacy export script would
(``input_names``, ``output_names``, ``dynamic_axes``, ``opset_version``).

Runs only in the benchmark's venv (torchvision, timm and piper-tts installed: ``make bench-venv``);
every library is imported inside the builder that needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

OPSET = 17  # what the TorchScript-era scripts of these families ask for (torchvision's tests: 11-17)
FAMILIES = ("classification", "detection", "segmentation", "timm", "tts", "rnn")


@dataclass(frozen=True)
class Case:
    """One model: ``build()`` gives it in eval mode, ``inputs(i)`` the export's args at size
    ``i`` (0: the example, 1: the second size), ``sizes`` says what each size is."""

    name: str
    family: str
    build: Callable[[], nn.Module]
    inputs: Callable[[int], tuple[Any, ...]]
    input_names: list[str]
    output_names: list[str]
    dynamic_axes: dict[str, Any]
    sizes: tuple[str, str]
    detection: bool = False  # outputs are boxes/scores/labels, compared as sets
    opset: int = OPSET
    quick: bool = False  # in the --quick subset (one model per family)
    notes: list[str] = field(default_factory=list)


def _rand(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _seeded(make: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        torch.manual_seed(0)
        return make().eval()

    return build


# --- torchvision classification ---------------------------------------------------------------

def _tv(name: str, **kwargs: Any) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        import torchvision

        return torchvision.models.get_model(name, weights=None, **kwargs)

    return _seeded(make)


_IMAGE_AXES = {"input": {0: "batch", 2: "height", 3: "width"}, "output": {0: "batch"}}
_BATCH_AXES = {"input": {0: "batch"}, "output": {0: "batch"}}


def _image(sizes: tuple[tuple[int, int, int], tuple[int, int, int]]) -> Callable[[int], tuple[Any, ...]]:
    def inputs(i: int) -> tuple[Any, ...]:
        b, h, w = sizes[i]
        return (_rand(b, 3, h, w, seed=i),)

    return inputs


def _classification() -> list[Case]:
    sizes = ((1, 96, 96), (2, 128, 112))
    label = ("1x3x96x96", "2x3x128x112")
    cases = [Case(name, "classification", _tv(name), _image(sizes), ["input"], ["output"], _IMAGE_AXES, label,
                  quick=name == "resnet18")
             for name in ("resnet18", "mobilenet_v3_small", "efficientnet_b0", "swin_t")]
    # ViT checks the image size in forward: only the batch is dynamic
    cases.append(Case("vit_b_16", "classification", _tv("vit_b_16", image_size=64),
                      _image(((1, 64, 64), (3, 64, 64))), ["input"], ["output"], _BATCH_AXES,
                      ("1x3x64x64", "3x3x64x64"), notes=["image_size=64 (12 layers, 86M parameters)"]))
    return cases


# --- torchvision detection and segmentation --------------------------------------------------

def _calibrated(make: Callable[[], nn.Module], size: tuple[int, int]) -> Callable[[], nn.Module]:
    """``make``'s detector with its BatchNorm statistics taken from two random images: with
    random weights and the default statistics the backbone's features collapse, and the detector
    finds nothing or only tied scores (whose order no exporter has to keep)."""

    def build() -> nn.Module:
        model = make()
        norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        for m in norms:
            m.reset_running_stats()
            m.momentum = None  # a plain average over the calibration batch
            m.train()
        with torch.no_grad():
            model([torch.rand(3, *size, generator=torch.Generator().manual_seed(7)) for _ in range(2)])
        return model.eval()

    return build


def _images(sizes: tuple[tuple[int, int], tuple[int, int]]) -> Callable[[int], tuple[Any, ...]]:
    def inputs(i: int) -> tuple[Any, ...]:
        h, w = sizes[i]
        return ([torch.rand(3, h, w, generator=torch.Generator().manual_seed(i))],)

    return inputs


def _detection() -> list[Case]:
    # torchvision's own ONNX tests: a list of one image, dynamic height/width, outputs per image
    axes = {"images": {1: "height", 2: "width"}, "boxes": {0: "detections"}, "scores": {0: "detections"},
            "labels": {0: "detections"}}
    sizes = ((192, 224), (160, 200))
    small = {"weights_backbone": None, "num_classes": 5}
    resize = {"min_size": 160, "max_size": 224}  # ssdlite resizes to its fixed 320x320
    cases = []
    for name, outputs, extra in (
            ("fasterrcnn_mobilenet_v3_large_320_fpn", ["boxes", "labels", "scores"], resize),
            ("retinanet_resnet50_fpn", ["boxes", "scores", "labels"], {**resize, "score_thresh": 0.001}),
            ("ssdlite320_mobilenet_v3_large", ["boxes", "scores", "labels"], {}),
            ("fcos_resnet50_fpn", ["boxes", "scores", "labels"], {**resize, "score_thresh": 0.001})):
        cases.append(Case(name, "detection", _calibrated(_tv(name, **small, **extra), sizes[0]), _images(sizes),
                          ["images"], outputs, axes, ("3x192x224", "3x160x200"), detection=True,
                          quick=name.startswith("fasterrcnn"),
                          notes=["num_classes=5, BatchNorm statistics from two random images"
                                 + (", score_thresh=0.001" if "score_thresh" in extra else "")]))
    return cases


def _segmentation() -> list[Case]:
    axes = {"input": {0: "batch", 2: "height", 3: "width"}, "out": {0: "batch", 2: "height", 3: "width"}}
    sizes = ((1, 96, 96), (2, 128, 112))
    return [Case(name, "segmentation", _tv(name, weights_backbone=None, num_classes=5), _image(sizes), ["input"],
                 ["out"], axes, ("1x3x96x96", "2x3x128x112"), quick=name.startswith("lraspp"))
            for name in ("deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large", "fcn_resnet50")]


# --- timm transformers -------------------------------------------------------------------------

def _timm(name: str, **kwargs: Any) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        import timm

        return timm.create_model(name, pretrained=False, num_classes=10, **kwargs)

    return _seeded(make)


def _timm_cases() -> list[Case]:
    small = {"img_size": 64, "depth": 2, "embed_dim": 64, "num_heads": 2}
    fixed = ((1, 64, 64), (3, 64, 64))
    fixed_label = ("1x3x64x64", "3x3x64x64")
    return [
        Case("timm vit_tiny_patch16_224", "timm", _timm("vit_tiny_patch16_224", **small), _image(fixed), ["input"],
             ["output"], _BATCH_AXES, fixed_label, quick=True, notes=["img_size=64 depth=2 embed_dim=64"]),
        Case("timm deit_tiny_patch16_224", "timm", _timm("deit_tiny_patch16_224", **small), _image(fixed),
             ["input"], ["output"], _BATCH_AXES, fixed_label, notes=["img_size=64 depth=2 embed_dim=64"]),
        Case("timm beit_base_patch16_224", "timm", _timm("beit_base_patch16_224", **small), _image(fixed),
             ["input"], ["output"], _BATCH_AXES, fixed_label, notes=["img_size=64 depth=2 embed_dim=64"]),
        Case("timm swin_tiny_patch4_window7_224", "timm",
             _timm("swin_tiny_patch4_window7_224", img_size=64, window_size=4, embed_dim=32, depths=(1, 1, 2, 1),
                   num_heads=(1, 2, 4, 8)), _image(fixed), ["input"], ["output"], _BATCH_AXES, fixed_label,
             notes=["img_size=64 window_size=4 embed_dim=32 depths=(1,1,2,1)"]),
        # ConvNeXt is fully convolutional: image size dynamic too
        Case("timm convnext_atto", "timm", _timm("convnext_atto"), _image(((1, 64, 64), (2, 96, 80))), ["input"],
             ["output"], _IMAGE_AXES, ("1x3x64x64", "2x3x96x80")),
    ]


# --- a TTS model with data-dependent lengths: piper's VITS generator ---------------------------

class PiperInfer(nn.Module):
    """piper's ``export_onnx.py``: the generator's ``infer`` with ``(text, text_lengths, scales)``
    inputs, ``audio.unsqueeze(1)`` out; the decoder's weight norm removed as there."""

    def __init__(self) -> None:
        super().__init__()
        from piper.train.vits.models import SynthesizerTrn

        self.model_g = SynthesizerTrn(
            n_vocab=40, spec_channels=33, segment_size=32, inter_channels=16, hidden_channels=16,
            filter_channels=32, n_heads=2, n_layers=2, kernel_size=3, p_dropout=0.0, resblock="2",
            resblock_kernel_sizes=(3, 5), resblock_dilation_sizes=((1, 2), (2, 6)), upsample_rates=(4, 4),
            upsample_initial_channel=32, upsample_kernel_sizes=(8, 8), n_speakers=1, gin_channels=0,
            use_sdp=True)
        with torch.no_grad():
            self.model_g.dec.remove_weight_norm()

    def forward(self, text: torch.Tensor, text_lengths: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        return self.model_g.infer(text, text_lengths, noise_scale=scales[0], length_scale=scales[1],
                                  noise_scale_w=scales[2])[0].unsqueeze(1)


def _piper_inputs(i: int) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(i)
    batch, length, lengths = ((1, 50, [50]), (2, 23, [23, 17]))[i]
    text = torch.randint(1, 40, (batch, length), generator=g)
    # noise scales 0: the generator's randn terms vanish, so eager and ONNX can be compared
    return text, torch.tensor(lengths, dtype=torch.long), torch.tensor([0.0, 1.0, 0.0])


def _tts() -> list[Case]:
    axes = {"input": {0: "batch_size", 1: "phonemes"}, "input_lengths": {0: "batch_size"},
            "output": {0: "batch_size", 2: "time"}}
    return [Case("piper vits (SynthesizerTrn.infer)", "tts", _seeded(PiperInfer), _piper_inputs,
                 ["input", "input_lengths", "scales"], ["output"], axes, ("1x50 phonemes", "2x23 (lengths 23, 17)"),
                 opset=15, quick=True,
                 notes=[("piper-tts 1.8.0 piper.train.vits, tiny config, stochastic duration predictor; "
                         "scales [0, 1, 0] (noise off); opset 15 as piper's export_onnx.py")])]


# --- GRU / LSTM ----------------------------------------------------------------------------------

class Seq2Seq(nn.Module):
    """GRU encoder-decoder with dot attention, teacher-forced decoder inputs (tutorial style)."""

    def __init__(self, vocab: int = 50, d: int = 32) -> None:
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(vocab, d), nn.Embedding(vocab, d)
        self.encoder = nn.GRU(d, d, batch_first=True)
        self.decoder = nn.GRU(d, d, batch_first=True)
        self.out = nn.Linear(2 * d, vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        memory, h = self.encoder(self.src_emb(src))
        dec, _ = self.decoder(self.tgt_emb(tgt), h)
        attn = torch.softmax(dec @ memory.transpose(1, 2), dim=-1)
        return self.out(torch.cat([dec, attn @ memory], dim=-1)).log_softmax(-1)


class BiLSTMTagger(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 24) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(2 * d, 7)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.lstm(self.emb(tokens))[0])


class PackedLSTM(nn.Module):
    """Padded batch + lengths through pack_padded_sequence (as torch's own ONNX test model)."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.lstm = nn.LSTM(d, d, bidirectional=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths)
        out, _ = self.lstm(packed)
        return nn.utils.rnn.pad_packed_sequence(out)[0]


def _tokens(shapes: tuple[tuple[int, ...], ...], count: int = 1) -> Callable[[int], tuple[Any, ...]]:
    def inputs(i: int) -> tuple[Any, ...]:
        g = torch.Generator().manual_seed(i)
        return tuple(torch.randint(0, 50, shapes[i][2 * k:2 * k + 2], generator=g) for k in range(count))

    return inputs


def _packed_inputs(i: int) -> tuple[Any, ...]:
    length, batch = ((7, 3), (11, 4))[i]
    lengths = torch.tensor(([7, 5, 2], [11, 9, 9, 4])[i])
    return _rand(length, batch, 16, seed=i), lengths


def _rnn() -> list[Case]:
    return [
        Case("gru seq2seq (attention)", "rnn", _seeded(Seq2Seq), _tokens(((2, 7, 2, 5), (3, 12, 3, 9)), count=2),
             ["src", "tgt"], ["logp"],
             {"src": {0: "batch", 1: "src_len"}, "tgt": {0: "batch", 1: "tgt_len"},
              "logp": {0: "batch", 1: "tgt_len"}}, ("2x7 -> 2x5", "3x12 -> 3x9")),
        Case("bilstm tagger (2 layers)", "rnn", _seeded(BiLSTMTagger), _tokens(((1, 9), (4, 15))), ["tokens"],
             ["tags"], {"tokens": {0: "batch", 1: "seq"}, "tags": {0: "batch", 1: "seq"}}, ("1x9", "4x15"),
             quick=True),
        Case("lstm packed sequence", "rnn", _seeded(PackedLSTM), _packed_inputs, ["x", "lengths"], ["y"],
             {"x": {0: "seq", 1: "batch"}, "lengths": {0: "batch"}, "y": {0: "seq", 1: "batch"}},
             ("7x3 lengths 7,5,2", "11x4 lengths 11,9,9,4")),
    ]


def cases() -> list[Case]:
    return [*_classification(), *_detection(), *_segmentation(), *_timm_cases(), *_tts(), *_rnn()]


def by_name() -> dict[str, Case]:
    return {c.name: c for c in cases()}
