"""Stand-ins for the framework names the real symbolic modules import (ours, a few lines each).

mmcv's op modules import mmengine helpers and a compiled ``_ext`` module; mmdeploy's symbolic
modules import its rewriter registry and config helpers. None of that is the symbolic: the
kernels here only give outputs of the right shape (the TorchScript exporter traces forward;
the torch.export route runs it on fake tensors), and ``SYMBOLIC_REWRITER`` records the
registrations so that a case applies them as mmdeploy's rewriter does.
"""

from __future__ import annotations

import enum
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


def _module(name: str, **attrs: Any) -> types.ModuleType:
    mod = sys.modules.get(name)
    if mod is None:
        mod = types.ModuleType(name)
        sys.modules[name] = mod
        parent, _, leaf = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], leaf, mod)
    for key, value in attrs.items():
        setattr(mod, key, value)
    return mod


def _identity_decorator(*_a: Any, **_k: Any) -> Callable[[Any], Any]:
    return lambda fn: fn


class _Registry:
    def register_module(self, *_a: Any, **_k: Any) -> Callable[[Any], Any]:
        return lambda cls: cls


# ------------------------------------------------------------------ mmcv: the compiled kernels

def _nms(boxes: torch.Tensor, scores: torch.Tensor, **_: Any) -> torch.Tensor:
    return torch.argsort(scores, descending=True)


def _softnms(boxes: torch.Tensor, scores: torch.Tensor, dets: torch.Tensor, **_: Any) -> torch.Tensor:
    dets[:, :4] = boxes
    dets[:, 4] = scores
    return torch.arange(boxes.size(0))


def _nms_match(dets: torch.Tensor, iou_threshold: float) -> list[list[int]]:
    return [[i] for i in range(int(dets.shape[0]))]


def _nms_rotated(dets: torch.Tensor, scores: torch.Tensor, order: torch.Tensor, *_: Any, **__: Any) -> torch.Tensor:
    return order


class _Ext:
    """``ext_loader.load_ext('_ext', [...])``: kernels that write into the outputs forward
    allocated do nothing (the outputs keep their shape); the few that return a result return
    one of the right shape."""

    nms = staticmethod(_nms)
    softnms = staticmethod(_softnms)
    nms_match = staticmethod(_nms_match)
    nms_rotated = staticmethod(_nms_rotated)

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: None


def _install_mmcv(path: Path) -> None:
    _module("mmengine", __path__=[])
    _module("mmengine.utils", deprecated_api_warning=_identity_decorator,
            digit_version=lambda v: tuple(int(p) for p in v.split("+")[0].split(".")[:3] if p.isdigit()))
    _module("mmengine.utils.dl_utils", TORCH_VERSION=torch.__version__)
    _module("mmengine.logging", print_log=lambda *a, **k: None)
    _module("mmengine.model", normal_init=lambda *a, **k: None, xavier_init=lambda *a, **k: None)
    _module("mmengine.registry", MODELS=_Registry())
    _module("mmcv", __path__=[str(path)])
    _module("mmcv.utils", __path__=[], IS_MLU_AVAILABLE=False, IS_CUDA_AVAILABLE=False,
            IS_NPU_AVAILABLE=False, IS_MPS_AVAILABLE=False)
    _module("mmcv.utils.ext_loader", load_ext=lambda name, funcs: _Ext(),
            check_ops_exist=lambda: False)
    sys.modules["mmcv.utils"].ext_loader = sys.modules["mmcv.utils.ext_loader"]


def mmcv_ops_functions(nms_module: types.ModuleType) -> None:
    """``from mmcv.ops import nms`` means the function (mmcv/ops/__init__.py re-exports it)."""
    ops = sys.modules["mmcv.ops"]
    for name in ("nms", "soft_nms", "batched_nms", "nms_match", "nms_rotated"):
        setattr(ops, name, getattr(nms_module, name))


# ------------------------------------------------------------------ mmdeploy: its rewriter registry

class Backend(str, enum.Enum):
    PYTORCH = "pytorch"
    TENSORRT = "tensorrt"
    ONNXRUNTIME = "onnxruntime"
    PPLNN = "pplnn"
    NCNN = "ncnn"
    SNPE = "snpe"
    OPENVINO = "openvino"
    SDK = "sdk"
    TORCHSCRIPT = "torchscript"
    RKNN = "rknn"
    ASCEND = "ascend"
    COREML = "coreml"
    TVM = "tvm"
    VACC = "vacc"
    DEFAULT = "default"


class IR(str, enum.Enum):
    ONNX = "onnx"
    TORCHSCRIPT = "torchscript"
    DEFAULT = "default"


#: the deploy config mmdeploy's symbolics read through ``get_context().cfg``; a case sets it
CONFIG: dict[str, Any] = {"onnx_config": {"opset_version": 11}, "backend_config": {"type": "onnxruntime"}}


@dataclass
class SymbolicRecord:
    """One ``@SYMBOLIC_REWRITER.register_symbolic(...)``: what mmdeploy's rewriter would apply."""

    func_name: str
    fn: Callable[..., Any]
    backend: str = "default"
    is_pytorch: bool = False
    arg_descriptors: list[str] | None = None


@dataclass
class _Context:
    cfg: dict[str, Any] = field(default_factory=lambda: CONFIG)


class _SymbolicRewriter:
    def __init__(self) -> None:
        self.records: list[SymbolicRecord] = []

    def register_symbolic(self, func_name: str, backend: str = "default", is_pytorch: bool = False,
                          arg_descriptors: list[str] | None = None, **_: Any) -> Callable[[Any], Any]:
        def record(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.records.append(SymbolicRecord(func_name, fn, str(getattr(backend, "value", backend)),
                                               is_pytorch, arg_descriptors))
            return fn
        return record

    def get_context(self, key: str | None = None) -> _Context:
        return _Context()

    def record_of(self, fn_name: str) -> SymbolicRecord:
        return next(r for r in self.records if r.fn.__name__ == fn_name)


class _FunctionRewriter:
    def register_rewriter(self, *_a: Any, **_k: Any) -> Callable[[Any], Any]:
        return lambda fn: fn

    def get_context(self, key: str | None = None) -> _Context:
        return _Context()


SYMBOLIC_REWRITER = _SymbolicRewriter()


def _install_mmdeploy(path: Path) -> None:
    _module("mmdeploy", __path__=[str(path)], __version__="1.3.1")
    _module("mmdeploy.core", SYMBOLIC_REWRITER=SYMBOLIC_REWRITER, FUNCTION_REWRITER=_FunctionRewriter(),
            mark=_identity_decorator)
    _module("mmdeploy.utils", __path__=[], Backend=Backend, IR=IR,
            get_backend=lambda cfg: Backend(cfg["backend_config"]["type"]),
            get_ir_config=lambda cfg: cfg["onnx_config"], is_dynamic_batch=lambda *a, **k: False)
    _module("mmdeploy.utils.constants", Backend=Backend, IR=IR)


def install(top: str, path: Path) -> None:
    """Make ``import <top>.<module>`` of the unpacked wheel work (idempotent)."""
    if getattr(sys.modules.get(top), "__path__", None) == [str(path)]:
        return
    {"mmcv": _install_mmcv, "mmdeploy": _install_mmdeploy}[top](path)
