"""Fails loudly when a torch/onnxscript upgrade moves what the torch.export route relies on."""

from __future__ import annotations

import torch


def test_batch_norm_overloads_we_translate_exist():
    from dynamo import training

    for op in training.translation_table():
        assert isinstance(op, torch._ops.OpOverload), op


def test_dynamic_shape_hints_and_pytree():
    from torch.utils import _pytree

    assert torch.export.Dim.DYNAMIC is not None
    leaves, spec = _pytree.tree_flatten((1, (2, None), {"a": 3}))
    assert leaves == [1, 2, None, 3] and _pytree.tree_unflatten(leaves, spec) == (1, (2, None), {"a": 3})


def test_onnx_program_exposes_an_onnx_ir_model():
    import onnx_ir
    from torch.onnx._internal.exporter import _onnx_program

    assert isinstance(_onnx_program.ONNXProgram.model_proto, property)
    assert hasattr(onnx_ir, "SymbolicDim") and hasattr(onnx_ir.traversal, "RecursiveGraphIterator")


def test_capabilities_import_stays_light():
    import subprocess
    import sys

    code = ("import sys, dynamo, dynamo.capabilities; "
            "print([m for m in ('onnx', 'onnxscript', 'onnx_ir') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
