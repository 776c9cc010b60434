"""compat.patch(): torch.onnx's old names go through the shim, and come back afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import compat
from compat.tools import patching


def test_patch_installs_and_restores():
    original = torch.onnx.export
    original_sel = torch.onnx.select_model_mode_for_export
    assert not hasattr(torch.onnx, "dynamo_export")
    with compat.patch():
        assert torch.onnx.export is patching.export
        assert torch.onnx.utils.export is patching.utils_export
        assert torch.onnx._export is patching.utils_export
        assert callable(torch.onnx.dynamo_export) and torch.onnx.ExportOptions is patching.ExportOptions
        with compat.patch():  # nested installs are counted
            pass
        assert torch.onnx.export is patching.export
    assert torch.onnx.export is original
    assert torch.onnx.select_model_mode_for_export is original_sel
    assert not hasattr(torch.onnx, "dynamo_export") and not hasattr(torch.onnx, "ExportOptions")
    p = compat.patch()
    p.install()
    try:
        assert torch.onnx.export is patching.export
    finally:
        p.uninstall()
    assert torch.onnx.export is original


def test_patched_export_and_utils_export_warn_at_caller(small_net, parity, tmp_path):
    x = torch.randn(2, 4)
    with compat.patch(), pytest.warns(compat.LegacyExportWarning) as rec:
        torch.onnx.utils.export(small_net, (x,), str(tmp_path / "u.onnx"), input_names=["x"])
    codes = {w.message.code for w in rec if isinstance(w.message, compat.LegacyExportWarning)}
    assert {"ONX403", "ONX001"} <= codes
    assert all(w.filename == __file__ for w in rec if isinstance(w.message, compat.LegacyExportWarning))
    parity.check(tmp_path / "u.onnx", small_net, [x], ["x"])


def test_dynamo_export_reprovided_with_save(small_net, parity, tmp_path):
    x = torch.randn(3, 4)
    with compat.patch(), pytest.warns(compat.LegacyExportWarning, match="ONX401"):
        program = torch.onnx.dynamo_export(small_net, x)
    program.save(str(tmp_path / "d.onnx"))
    parity.check(str(tmp_path / "d.onnx"), small_net, [x])
    assert "deprecated" in patching.dynamo_export.__doc__.lower()


def test_dynamo_export_with_export_options_dynamic(small_net, tmp_path):
    import onnxruntime as ort

    x = torch.randn(3, 4)
    with compat.patch(), pytest.warns(compat.LegacyExportWarning):
        opts = torch.onnx.ExportOptions(dynamic_shapes=True)
        program = torch.onnx.dynamo_export(small_net, x, export_options=opts)
    program.save(str(tmp_path / "d.onnx"))
    sess = ort.InferenceSession(str(tmp_path / "d.onnx"), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    y = torch.randn(6, 4)
    np.testing.assert_allclose(sess.run(None, {name: y.numpy()})[0], small_net(y).detach().numpy(),
                               atol=1e-5, rtol=1e-4)


def test_select_model_mode_for_export(small_net):
    small_net.train()
    with compat.patch(), pytest.warns(compat.LegacyExportWarning, match="ONX404"):
        with torch.onnx.select_model_mode_for_export(small_net, torch.onnx.TrainingMode.EVAL):
            assert not small_net.training
    assert small_net.training


def test_import_and_legacy_export_stay_light(tmp_path):
    """Importing compat loads nothing heavy; exporting on the TorchScript route loads neither
    onnxscript nor the torch.export-based exporter (torch's TorchScript exporter itself imports
    onnx, in onnx_proto_utils._add_onnxscript_fn, so onnx is not checked after the export)."""
    code = textwrap.dedent(f"""
        import sys, json
        import compat
        light = [m for m in ("torch", "onnx", "onnxscript") if m in sys.modules]
        import torch
        m = torch.nn.Linear(3, 2).eval()
        compat.export(m, (torch.randn(1, 3),), {str(tmp_path / 'm.onnx')!r}, route="legacy")
        heavy = [m for m in ("onnxscript", "torch.onnx._internal.exporter._core",
                             "torch.onnx._internal.exporter._compat") if m in sys.modules]
        print(json.dumps({{"at_import": light, "after_legacy_export": heavy}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info == {"at_import": [], "after_legacy_export": []}


def test_version_gates_see_torchs_signature():
    """ultralytics-style gate: `"dynamo" in inspect.signature(torch.onnx.export).parameters`."""
    import inspect

    unpatched = inspect.signature(torch.onnx.export)
    with compat.patch():
        assert torch.onnx.export is patching.export
        assert inspect.signature(torch.onnx.export) == unpatched
        assert "dynamo" in inspect.signature(torch.onnx.export).parameters
