"""The real third-party symbolics (issue 31): 48 cases from mmcv, mmdeploy, onnxruntime,
torchvision and transformers, each reached by a tiny model.

Sources: mmcv-lite 2.2.0 and mmdeploy 1.3.1 from the pinned wheels (``sources``); onnxruntime's
``onnxruntime.tools.pytorch_export_contrib_ops``, torchvision's ``torchvision.ops.
_register_onnx_ops`` and transformers' SEW-D ``XSoftmax``/``XDropout`` (the DeBERTa-v2 code,
which transformers 5 keeps only there) from the installed packages. Not counted: yolov7's
``ORT_NMS``/``TRT_NMS`` and detectron2's patches (only in their repositories, in no package the
registry has), mmdeploy's LSTM (a function rewriter, no symbolic).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .case import Case, Setup
from .sources import load


class Call(torch.nn.Module):
    """``forward(*xs) = fn(self, *xs)``; keyword tensors become parameters."""

    def __init__(self, fn: Callable[..., Any], **params: torch.Tensor) -> None:
        super().__init__()
        self.fn = fn
        for name, value in params.items():
            setattr(self, name, torch.nn.Parameter(value, requires_grad=False))

    def forward(self, *xs: Any) -> Any:
        return self.fn(self, *xs)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def rois(n: int = 4, batch: int = 2, size: float = 16.0, rotated: bool = False) -> torch.Tensor:
    g = _gen(n)
    xy = torch.rand(n, 2, generator=g) * size * 0.5
    wh = torch.rand(n, 2, generator=g) * size * 0.4 + 1.0
    idx = torch.randint(0, batch, (n, 1), generator=g).float()
    if rotated:
        return torch.cat([idx, xy + wh / 2, wh, torch.rand(n, 1, generator=g)], 1)
    return torch.cat([idx, xy, xy + wh], 1)


def boxes(n: int = 6, size: float = 32.0) -> torch.Tensor:
    g = _gen(n)
    xy = torch.rand(n, 2, generator=g) * size
    return torch.cat([xy, xy + torch.rand(n, 2, generator=g) * 8 + 1], 1)


def feat(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed))


CASES: list[Case] = []


def case(name: str, origin: str, *needs: str) -> Callable[[Callable[[], Setup]], Callable[[], Setup]]:
    def add(build: Callable[[], Setup]) -> Callable[[], Setup]:
        CASES.append(Case(name, origin, needs, build))
        return build
    return add


def _fn(module: str, name: str) -> Any:
    return getattr(load(module), name)


def _mmcv(module: str, cls: str) -> Any:
    fn_cls = _fn(f"mmcv.ops.{module}", cls)
    return fn_cls, fn_cls.symbolic


# ---------------------------------------------------------------- mmcv: Function.symbolic

MMCV = ("mmcv-lite",)


def _mmcv_case(name: str, module: str, cls: str, make: Callable[[Any], tuple[Any, tuple[Any, ...]]],
               **kw: Any) -> None:
    @case(name, f"mmcv-lite 2.2.0: mmcv/ops/{module}.py {cls}.symbolic", *MMCV)
    def build() -> Setup:
        fn_cls, sym = _mmcv(module, cls)
        model, args = make(fn_cls)
        return Setup(model, args, symbolic=sym, custom_opsets={"mmcv": 1}, **kw)


_mmcv_case("mmcv.roi_align", "roi_align", "RoIAlignFunction",
           lambda F: (Call(lambda m, x, r: F.apply(x, r, (3, 3), 0.5, 2, "avg", True)),
                      (feat(2, 4, 16, 16), rois())))
_mmcv_case("mmcv.roi_pool", "roi_pool", "RoIPoolFunction",
           lambda F: (Call(lambda m, x, r: F.apply(x, r, (2, 2), 0.5)), (feat(2, 4, 16, 16), rois())))
_mmcv_case("mmcv.soft_nms", "nms", "SoftNMSop",
           lambda F: (Call(lambda m, b, s: F.apply(b, s, 0.3, 0.5, 0.001, 1, 0)),
                      (boxes(), torch.rand(6, generator=_gen(1)))))
_mmcv_case("mmcv.deform_conv", "deform_conv", "DeformConv2dFunction",
           lambda F: (Call(lambda m, x, o: F.apply(x, o, m.w, 1, 1, 1, 1, 1, False, 32),
                           w=feat(6, 4, 3, 3)), (feat(1, 4, 8, 8), feat(1, 18, 8, 8, seed=1))))
_mmcv_case("mmcv.modulated_deform_conv", "modulated_deform_conv", "ModulatedDeformConv2dFunction",
           lambda F: (Call(lambda m, x, o, k: F.apply(x, o, k, m.w, m.b, 1, 1, 1, 1, 1),
                           w=feat(6, 4, 3, 3), b=feat(6)),
                      (feat(1, 4, 8, 8), feat(1, 18, 8, 8, seed=1), torch.rand(1, 9, 8, 8))))
_mmcv_case("mmcv.border_align", "border_align", "BorderAlignFunction",
           lambda F: (Call(lambda m, x, b: F.apply(x, b, 3)),
                      (feat(1, 8, 4, 4), boxes(16, 4.0).unsqueeze(0))))
_mmcv_case("mmcv.carafe_naive", "carafe", "CARAFENaiveFunction",
           lambda F: (Call(lambda m, x, k: F.apply(x, k, 3, 1, 2)),
                      (feat(1, 4, 6, 6), torch.rand(1, 9, 12, 12))))
_mmcv_case("mmcv.carafe", "carafe", "CARAFEFunction",
           lambda F: (Call(lambda m, x, k: F.apply(x, k, 3, 1, 2)),
                      (feat(1, 4, 6, 6), torch.rand(1, 9, 12, 12))))
_mmcv_case("mmcv.deform_roi_pool", "deform_roi_pool", "DeformRoIPoolFunction",
           lambda F: (Call(lambda m, x, r, o: F.apply(x, r, o, (2, 2), 0.5, 2, 0.1)),
                      (feat(2, 4, 16, 16), rois(), feat(4, 2, 2, 2, seed=2))))
_mmcv_case("mmcv.masked_conv", "masked_conv", "MaskedConv2dFunction",
           lambda F: (Call(lambda m, x, k: F.apply(x, k, m.w, m.b, 1, 1), w=feat(6, 4, 3, 3), b=feat(6)),
                      (feat(1, 4, 8, 8), (torch.rand(1, 8, 8) > 0.5).float())))
_mmcv_case("mmcv.psa_mask", "psa_mask", "PSAMaskFunction",
           lambda F: (Call(lambda m, x: F.apply(x, 0, (3, 3))), (feat(1, 9, 4, 4),)))
_mmcv_case("mmcv.roi_align_rotated", "roi_align_rotated", "RoIAlignRotatedFunction",
           lambda F: (Call(lambda m, x, r: F.apply(x, r, (2, 2), 0.5, 2, True, False)),
                      (feat(2, 4, 16, 16), rois(rotated=True))))
_mmcv_case("mmcv.rotated_feature_align", "rotated_feature_align", "RotatedFeatureAlignFunction",
           lambda F: (Call(lambda m, x, b: F.apply(x, b, 0.5, 1)), (feat(1, 4, 8, 8), torch.rand(1, 5, 8, 8))))
_mmcv_case("mmcv.prroi_pool", "prroi_pool", "PrRoIPoolFunction",
           lambda F: (Call(lambda m, x, r: F.apply(x, r, (2, 2), 0.5)), (feat(2, 4, 16, 16), rois())))


# ---------------------------------------------------------------- mmdeploy: Function overrides

MMDEPLOY = ("mmcv-lite", "mmdeploy")


def _override_case(name: str, module: str, fn_name: str, mmcv_module: str, cls: str,
                   make: Callable[[Any], tuple[Any, tuple[Any, ...]]], backend: str = "onnxruntime",
                   opset: int = 11) -> None:
    @case(name, f"mmdeploy 1.3.1: {module.replace('.', '/')}.py {fn_name}", *MMDEPLOY)
    def build() -> Setup:
        from . import _stand_ins

        load(module)
        record = _stand_ins.SYMBOLIC_REWRITER.record_of(fn_name)
        fn_cls = _fn(f"mmcv.ops.{mmcv_module}", cls)
        _stand_ins.CONFIG.update(onnx_config={"opset_version": opset}, backend_config={"type": backend})
        model, args = make(fn_cls)
        return Setup(model, args, symbolic_overrides=[(fn_cls, record.fn)], opset=opset,
                     custom_opsets={"mmdeploy": 1, "mmcv": 1}, symbolic=record.fn)


# mmcv's DeformConv2d passes its _pair()ed stride/padding/dilation, as mmdeploy's symbolic expects
_deform = lambda F: (Call(lambda m, x, o: F.apply(x, o, m.w, (1, 1), (1, 1), (1, 1), 1, 1, False, 32),
                          w=feat(6, 4, 3, 3)),
                     (feat(1, 4, 8, 8), feat(1, 18, 8, 8, seed=1)))
_override_case("mmdeploy.deform_conv", "mmdeploy.mmcv.ops.deform_conv", "deform_conv__default",
               "deform_conv", "DeformConv2dFunction", _deform)
_override_case("mmdeploy.deform_conv_openvino", "mmdeploy.mmcv.ops.deform_conv", "deform_conv_openvino",
               "deform_conv", "DeformConv2dFunction", _deform, backend="openvino")
_override_case("mmdeploy.modulated_deform_conv", "mmdeploy.mmcv.ops.modulated_deform_conv",
               "modulated_deform_conv_default", "modulated_deform_conv", "ModulatedDeformConv2dFunction",
               lambda F: (Call(lambda m, x, o, k: F.apply(x, o, k, m.w, m.b, (1, 1), (1, 1), (1, 1), 1, 1),
                               w=feat(6, 4, 3, 3), b=feat(6)),
                          (feat(1, 4, 8, 8), feat(1, 18, 8, 8, seed=1), torch.rand(1, 9, 8, 8))))
# the onnxruntime branch imports symbolic_opset9._cast_Long, which torch >= 2.1 no longer has
_override_case("mmdeploy.roi_align", "mmdeploy.mmcv.ops.roi_align", "roi_align_default",
               "roi_align", "RoIAlignFunction",
               lambda F: (Call(lambda m, x, r: F.apply(x, r, (3, 3), 0.5, 2, "avg", True)),
                          (feat(2, 4, 16, 16), rois())), backend="tensorrt")
_override_case("mmdeploy.roi_align_rotated", "mmdeploy.mmcv.ops.roi_align_rotated",
               "roi_align_rotated_default", "roi_align_rotated", "RoIAlignRotatedFunction",
               lambda F: (Call(lambda m, x, r: F.apply(x, r, (2, 2), 0.5, 2, True, False)),
                          (feat(2, 4, 16, 16), rois(rotated=True))))


def _mmdeploy_function_case(name: str, module: str, cls: str, make: Callable[[Any], tuple[Any, tuple[Any, ...]]],
                            opset: int = 11) -> None:
    @case(name, f"mmdeploy 1.3.1: {module.replace('.', '/')}.py {cls}.symbolic", *MMDEPLOY)
    def build() -> Setup:
        from . import _stand_ins

        _stand_ins.mmcv_ops_functions(load("mmcv.ops.nms"))
        fn_cls = _fn(module, cls)
        model, args = make(fn_cls)
        return Setup(model, args, opset=opset, custom_opsets={"mmdeploy": 1}, symbolic=fn_cls.symbolic)


_mmdeploy_function_case("mmdeploy.onnx_nms", "mmdeploy.mmcv.ops.nms", "ONNXNMSop",
                        lambda F: (Call(lambda m, b, s: F.apply(b, s, 3, 0.5, 0.05)),
                                   (boxes().unsqueeze(0), torch.rand(1, 2, 6, generator=_gen(3)))))
_mmdeploy_function_case("mmdeploy.trt_batched_nms", "mmdeploy.mmcv.ops.nms", "TRTBatchedNMSop",
                        lambda F: (Call(lambda m, b, s: F.apply(b, s, 2, 5, 3, 0.5, 0.05, -1, False)),
                                   (boxes().view(1, 6, 1, 4), torch.rand(1, 6, 2, generator=_gen(3)))))
_mmdeploy_function_case("mmdeploy.ascend_batch_nms", "mmdeploy.mmcv.ops.nms", "AscendBatchNMSOp",
                        lambda F: (Call(lambda m, b, s: F.apply(b, s, 0.05, 0.5, 3, 5)),
                                   (boxes().view(1, 6, 1, 4), torch.rand(1, 6, 2, generator=_gen(3)))))
_mmdeploy_function_case("mmdeploy.onnx_nms_match", "mmdeploy.mmcv.ops.nms_match", "ONNXNMSMatchOp",
                        lambda F: (Call(lambda m, b, s: F.apply(b, s, 0.5, 0.05)),
                                   (boxes().unsqueeze(0), torch.rand(1, 2, 6, generator=_gen(3)))))
_mmdeploy_function_case("mmdeploy.onnx_nms_rotated", "mmdeploy.mmcv.ops.nms_rotated", "ONNXNMSRotatedOp",
                        lambda F: (Call(lambda m, b, s: F.apply(b, s, 0.5, 0.05)),
                                   (rois(6, rotated=True)[:, 1:].unsqueeze(0), torch.rand(1, 2, 6, generator=_gen(3)))))
_mmdeploy_function_case("mmdeploy.trt_batched_rotated_nms", "mmdeploy.mmcv.ops.nms_rotated",
                        "TRTBatchedRotatedNMSop",
                        lambda F: (Call(lambda m, b, s: F.apply(b, s, 2, 5, 3, 0.5, 0.05, -1)),
                                   (rois(6, rotated=True)[:, 1:].view(1, 6, 1, 5),
                                    torch.rand(1, 6, 2, generator=_gen(3)))))


# ---------------------------------------------------------------- mmdeploy: aten overrides

def _aten_case(name: str, module: str, fn_name: str, make: Callable[[], tuple[Any, tuple[Any, ...]]],
               backend: str = "onnxruntime", opset: int = 11) -> None:
    @case(name, f"mmdeploy 1.3.1: {module.replace('.', '/')}.py {fn_name}", "mmdeploy")
    def build() -> Setup:
        from torch.onnx.symbolic_helper import parse_args

        from . import _stand_ins

        load(module)
        record = _stand_ins.SYMBOLIC_REWRITER.record_of(fn_name)
        _stand_ins.CONFIG.update(onnx_config={"opset_version": opset}, backend_config={"type": backend})
        fn = record.fn
        if record.arg_descriptors:  # as mmdeploy's SymbolicRewriter.enter wraps it
            fn = parse_args(*record.arg_descriptors)(fn)
        model, args = make()
        return Setup(model, args, registrations=[(f"::{record.func_name}", fn, opset)], opset=opset,
                     custom_opsets={"mmdeploy": 1, "mmcv": 1}, symbolic=record.fn)


F = torch.nn.functional
_aten_case("mmdeploy.gelu_ncnn", "mmdeploy.pytorch.symbolics.gelu", "gelu__ncnn",
           lambda: (Call(lambda m, x: F.gelu(x) * 2), (feat(2, 5),)), backend="ncnn")
_aten_case("mmdeploy.grid_sampler", "mmdeploy.pytorch.symbolics.grid_sampler", "grid_sampler__default",
           lambda: (Call(lambda m, x, g: F.grid_sample(x, g, align_corners=False)),
                    (feat(1, 2, 5, 5), torch.rand(1, 3, 3, 2) * 2 - 1)))
_aten_case("mmdeploy.grid_sampler_pplnn", "mmdeploy.pytorch.symbolics.grid_sampler", "grid_sampler__default",
           lambda: (Call(lambda m, x, g: F.grid_sample(x, g, align_corners=True)),
                    (feat(1, 2, 5, 5), torch.rand(1, 3, 3, 2) * 2 - 1)), backend="pplnn")
_aten_case("mmdeploy.hardsigmoid", "mmdeploy.pytorch.symbolics.hardsigmoid", "hardsigmoid__default",
           lambda: (Call(lambda m, x: F.hardsigmoid(x)), (feat(2, 5) * 4,)))
_aten_case("mmdeploy.group_norm_trt", "mmdeploy.pytorch.symbolics.instance_norm", "instance_norm__tensorrt",
           lambda: (Call(lambda m, x: F.group_norm(x, 2, m.w, m.b), w=feat(4, seed=1), b=feat(4, seed=2)),
                    (feat(2, 4, 3, 3),)), backend="tensorrt")
_aten_case("mmdeploy.layer_norm", "mmdeploy.pytorch.symbolics.layer_norm", "layer_norm__default",
           lambda: (Call(lambda m, x: F.layer_norm(x, (8,), m.w, m.b), w=feat(8, seed=1), b=feat(8, seed=2)),
                    (feat(3, 5, 8),)))
_aten_case("mmdeploy.layer_norm_ncnn", "mmdeploy.pytorch.symbolics.layer_norm", "layer_norm__ncnn",
           lambda: (Call(lambda m, x: F.layer_norm(x, (8,), m.w, m.b), w=feat(8, seed=1), b=feat(8, seed=2)),
                    (feat(3, 5, 8),)), backend="ncnn")
_aten_case("mmdeploy.linear_ncnn", "mmdeploy.pytorch.symbolics.linear", "linear__ncnn",
           lambda: (Call(lambda m, x: F.linear(x, m.w, m.b), w=feat(6, 8, seed=1), b=feat(6, seed=2)),
                    (feat(3, 8),)), backend="ncnn")
_aten_case("mmdeploy.adaptive_avg_pool2d_ncnn", "mmdeploy.pytorch.symbolics.adaptive_pool",
           "adaptive_avg_pool2d__ncnn",
           lambda: (Call(lambda m, x: F.adaptive_avg_pool2d(x, (2, 2))), (feat(1, 3, 8, 8),)), backend="ncnn")
_aten_case("mmdeploy.roll", "mmdeploy.pytorch.symbolics.roll", "roll_default",
           lambda: (Call(lambda m, x: torch.roll(x, (1, -2), (0, 1))), (feat(4, 5),)))
_aten_case("mmdeploy.squeeze", "mmdeploy.pytorch.symbolics.squeeze", "squeeze__default",
           lambda: (Call(lambda m, x: torch.squeeze(x, 1) + 1), (feat(3, 1, 4),)))


# ---------------------------------------------------------------- onnxruntime's contrib ops

def _ort_case(name: str, fn_name: str, make: Callable[[], tuple[Any, tuple[Any, ...]]], opset: int = 14) -> None:
    @case(name, f"onnxruntime: onnxruntime/tools/pytorch_export_contrib_ops.py register.<locals>.{fn_name}",
          "onnxruntime")
    def build() -> Setup:
        from onnxruntime.tools import pytorch_export_contrib_ops as contrib

        model, args = make()
        return Setup(model, args, register=contrib.register, unregister=contrib.unregister, opset=opset,
                     custom_opsets={"com.microsoft": 1})


_ort_case("onnxruntime.gelu", "gelu", lambda: (Call(lambda m, x: F.gelu(x)), (feat(2, 5),)))
_ort_case("onnxruntime.gelu_tanh", "gelu", lambda: (Call(lambda m, x: F.gelu(x, approximate="tanh")), (feat(2, 5),)))
_ort_case("onnxruntime.triu", "triu", lambda: (Call(lambda m, x: torch.triu(x, 1)), (feat(4, 5),)), opset=11)
_ort_case("onnxruntime.tril", "tril", lambda: (Call(lambda m, x: torch.tril(x, -1)), (feat(4, 5),)), opset=11)
_ort_case("onnxruntime.grid_sampler", "grid_sampler",
          lambda: (Call(lambda m, x, g: F.grid_sample(x, g, align_corners=False)),
                   (feat(1, 2, 5, 5), torch.rand(1, 3, 3, 2) * 2 - 1)))
_ort_case("onnxruntime.inverse", "inverse",
          lambda: (Call(lambda m, x: torch.linalg.inv(x)), (feat(2, 3, 3) + 3 * torch.eye(3),)))


# ---------------------------------------------------------------- torchvision

def _tv_case(name: str, fn_name: str, make: Callable[[], tuple[Any, tuple[Any, ...]]], opset: int = 11) -> None:
    @case(name, f"torchvision: torchvision/ops/_register_onnx_ops.py {fn_name}", "torchvision")
    def build() -> Setup:
        import torchvision  # noqa: F401 - loads the torchvision ops
        from torchvision.ops import _register_onnx_ops as tv

        model, args = make()
        return Setup(model, args, register=tv._register_custom_op, opset=opset,
                     unregister=lambda: [torch.onnx.unregister_custom_op_symbolic(f"torchvision::{n}", o)
                                         for n, o in (("nms", 11), ("roi_align", 11), ("roi_align", 16),
                                                      ("roi_pool", 11))])


def _tvops() -> Any:
    import torchvision

    return torchvision.ops


_tv_case("torchvision.nms", "symbolic_multi_label_nms",
         lambda: (Call(lambda m, b, s: _tvops().nms(b, s, 0.5)), (boxes(), torch.rand(6, generator=_gen(4)))))
_tv_case("torchvision.roi_align_opset11", "roi_align_opset11",
         lambda: (Call(lambda m, x, r: _tvops().roi_align(x, r, (3, 3), 0.5, 2, False)), (feat(2, 4, 16, 16), rois())))
_tv_case("torchvision.roi_align_opset16", "roi_align_opset16",
         lambda: (Call(lambda m, x, r: _tvops().roi_align(x, r, (3, 3), 0.5, 2, True)), (feat(2, 4, 16, 16), rois())),
         opset=16)
_tv_case("torchvision.roi_pool", "roi_pool",
         lambda: (Call(lambda m, x, r: _tvops().roi_pool(x, r, (2, 2), 0.5)), (feat(2, 4, 16, 16), rois())))


# ---------------------------------------------------------------- transformers (DeBERTa-v2's, in SEW-D)

@case("transformers.xsoftmax", "transformers: transformers/models/sew_d/modeling_sew_d.py XSoftmax.symbolic",
      "transformers")
def _xsoftmax() -> Setup:
    from transformers.models.sew_d.modeling_sew_d import XSoftmax

    mask = (torch.rand(2, 1, 4, 4, generator=_gen(5)) > 0.3)
    return Setup(Call(lambda m, x, k: XSoftmax.apply(x, k, -1)), (feat(2, 3, 4, 4), mask), opset=12,
                 symbolic=XSoftmax.symbolic)


@case("transformers.xdropout", "transformers: transformers/models/sew_d/modeling_sew_d.py XDropout.symbolic",
      "transformers")
def _xdropout() -> Setup:
    from transformers.models.sew_d.modeling_sew_d import XDropout

    # StableDropout calls it in training only: the symbolic emits Dropout in training mode
    return Setup(Call(lambda m, x: XDropout.apply(x, 0.1) * 2), (feat(2, 6),), opset=12,
                 symbolic=XDropout.symbolic, compare_values=False)
