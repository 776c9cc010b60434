"""Real exports on each route and through auto, with onnxruntime parity against eager torch."""

from __future__ import annotations

import io
import os
import pathlib
import warnings

import numpy as np
import onnx
import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm
import torch

import compat
from compat.errors import CompatValueError, ExportFailed


def test_legacy_route_1x_call_with_removed_keywords(small_net, parity, tmp_path):
    x = torch.randn(3, 4)
    target = tmp_path / "net.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ret = compat.export(
            small_net, x, str(target), True, False, False, ["x"], ["y"], False,
            opset_version=13, example_outputs=small_net(x), enable_onnx_checker=True,
            strip_doc_string=True, _retain_param_name=True, route="legacy",
            dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
        )
    assert ret is None  # what torch.onnx.export returns on the TorchScript route
    out = compat.last_outcome()
    assert out.route == "legacy"
    assert any(t.code == "ONX203" for t in out.translations)
    proto = onnx.load(target)
    assert proto.opset_import[0].version == 13
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    for n in (1, 3, 7):
        parity.check(target, small_net, [torch.randn(n, 4)], ["x"])


def test_dynamo_route_returns_program_and_single_file(small_net, parity, tmp_path):
    x = torch.randn(2, 4)
    target = tmp_path / "net.onnx"
    ret = compat.export(small_net, (x,), target, dynamo=True, input_names=["x"], output_names=["y"])
    assert isinstance(ret, torch.onnx.ONNXProgram)
    assert compat.last_outcome().route == "dynamo"
    assert sorted(os.listdir(tmp_path)) == ["net.onnx"]  # legacy file semantics: no .data file
    parity.check(target, small_net, [x], ["x"])


def test_external_data_when_asked(small_net, parity, tmp_path):
    x = torch.randn(2, 4)
    target = tmp_path / "net.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(small_net, (x,), target, route="legacy", use_external_data_format=True,
                      input_names=["x"])
    assert sorted(os.listdir(tmp_path)) == ["net.onnx", "net.onnx.data"]
    parity.check(str(target), small_net, [x], ["x"])


def test_bytesio_and_pathlike(small_net, parity, tmp_path):
    x = torch.randn(2, 4)
    buf = io.BytesIO()
    compat.export(small_net, (x,), buf, route="legacy", input_names=["x"])
    parity.check(buf.getvalue(), small_net, [x], ["x"])
    buf2 = io.BytesIO()
    compat.export(small_net, (x,), buf2, route="dynamo", input_names=["x"])
    parity.check(buf2.getvalue(), small_net, [x], ["x"])
    path = pathlib.Path(tmp_path) / "p.onnx"
    compat.export(small_net, (x,), path, route="legacy", input_names=["x"])
    parity.check(str(path), small_net, [x], ["x"])


def test_trailing_dict_in_args_is_keyword_inputs(models, parity, tmp_path):
    torch.manual_seed(0)
    m = models.WithKwargs().eval()
    x, s = torch.randn(2, 4), torch.full((2, 2), 3.0)
    target = tmp_path / "kw.onnx"
    compat.export(m, (x, {"scale": s}), target, route="legacy", input_names=["x", "scale"])
    got = parity.run(str(target), {"x": x.numpy(), "scale": s.numpy()})[0]
    np.testing.assert_allclose(got, m(x, scale=s).detach().numpy(), atol=1e-5)


def test_auto_bakes_data_dependent_control_flow_on_torch_export(models, parity, tmp_path):
    torch.manual_seed(0)
    m = models.DataDependent().eval()
    x = torch.rand(2, 4)
    target = tmp_path / "dd.onnx"
    with pytest.warns(compat.LegacyExportWarning, match="ONX003 branch baked"):
        ret = compat.export(m, (x,), target, input_names=["x"])
    out = compat.last_outcome()
    assert ret is not None and out.route == "dynamo" and out.fallback_reason is None
    assert [b["source"] for b in out.baked] == ["if h.sum() > 0:"] and "ONX003" in out.warnings
    parity.check(target, m, [x], ["x"])


def test_auto_falls_back_when_torch_export_cannot_capture(models, parity, tmp_path):
    m = models.TorchScriptOnly().eval()
    x = torch.rand(2, 4)
    target = tmp_path / "ts.onnx"
    ret = compat.export(m, (x,), target, input_names=["x"])
    out = compat.last_outcome()
    assert ret is None and out.route == "legacy"
    assert out.fallback_reason.startswith("dynamo: torch.export failed (NotImplementedError) at ")
    parity.check(target, m, [x], ["x"])


def test_both_routes_fail_names_each_cause(models, tmp_path):
    target = tmp_path / "u.onnx"
    with pytest.raises(ExportFailed) as err:
        compat.export(models.Unexportable(), (torch.rand(2, 2),), target)
    assert set(err.value.failures) == {"dynamo", "legacy"}
    text = str(err.value)
    assert "dynamo:" in text and "legacy:" in text
    assert isinstance(err.value, RuntimeError) and isinstance(err.value, compat.CompatError)
    assert os.listdir(tmp_path) == []


def test_legacy_only_option_goes_straight_to_torchscript(small_net, tmp_path):
    target = tmp_path / "a.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(small_net, (torch.randn(2, 4),), target, export_modules_as_functions=True)
    out = compat.last_outcome()
    assert out.route == "legacy" and "export_modules_as_functions" in out.fallback_reason
    assert any(t.code == "ONX106" for t in out.translations)


def test_dynamo_route_refuses_legacy_only_option(small_net, tmp_path):
    with pytest.raises(CompatValueError, match="autograd_inlining"):
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "a.onnx", route="dynamo",
                      autograd_inlining=False)
    assert os.listdir(tmp_path) == []


def test_route_from_env_and_pyproject(small_net, tmp_path, monkeypatch):
    x = (torch.randn(2, 4),)
    monkeypatch.setenv("TORCH_ONNX_COMPAT_ROUTE", "legacy")
    compat.export(small_net, x, tmp_path / "a.onnx")
    assert compat.last_outcome().route == "legacy"
    # the call argument beats the environment
    compat.export(small_net, x, tmp_path / "b.onnx", dynamo=False)
    assert compat.last_outcome().route == "legacy"
    monkeypatch.delenv("TORCH_ONNX_COMPAT_ROUTE")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torch-onnx-compat]\nroute = "legacy"\n'
    )
    script = tmp_path / "job.py"
    script.write_text(
        "import torch, compat\n"
        "m = torch.nn.Linear(4, 2).eval()\n"
        "compat.export(m, (torch.randn(2, 4),), 'c.onnx')\n"
        "print(compat.last_outcome().route)\n"
    )
    import subprocess
    import sys

    out = warm_python.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "legacy"


def test_pyproject_per_module_rule(small_net, tmp_path, monkeypatch):
    from compat.policy import config

    (tmp_path / "pyproject.toml").write_text(
        '[tool.torch-onnx-compat]\nroute = "dynamo"\n'
        '[tool.torch-onnx-compat.routes]\n"tts.*" = "legacy"\n"tts.fast.*" = "auto"\n'
    )
    site = f"{tmp_path / 'x.py'}:1"
    (tmp_path / "x.py").write_text("")
    assert config.resolve_route(None, site, ("tts.vits",)) == ("legacy", "pyproject-rule")
    assert config.resolve_route(None, site, ("tts.fast.glow",)) == ("auto", "pyproject-rule")
    assert config.resolve_route(None, site, ("vision.resnet",)) == ("dynamo", "pyproject")
    assert config.resolve_route("legacy", site, ("tts.fast.glow",)) == ("legacy", "call")


@pytest.mark.parametrize("route", ["legacy", "dynamo"])
def test_positional_dict_input_before_an_empty_trailing_dict(route, tmp_path):
    """Legacy convention: ``args=(x, extras, {})`` keeps the dict ``extras`` positional."""

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x, extras, mask=None):
            return self.fc(x) * extras["scale"]

    torch.manual_seed(0)
    m = M().eval()
    x, scale = torch.randn(2, 4), torch.full((2, 4), 3.0)
    target = tmp_path / "d.onnx"
    compat.export(m, (x, {"scale": scale}, {}), target, route=route)
    import onnxruntime as ort

    sess = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    feeds = dict(zip([i.name for i in sess.get_inputs()], [x.numpy(), scale.numpy()]))
    np.testing.assert_allclose(sess.run(None, feeds)[0], m(x, {"scale": scale}).detach().numpy(), atol=1e-5)


def test_fallback_keeps_dynamic_shapes_as_dynamic_axes(models, parity, tmp_path):
    """A call written for the new exporter (dynamic_shapes) that falls back still gets its
    dynamic axes on the TorchScript route, named after the Dims."""
    from torch.export import Dim

    m = models.TorchScriptOnly().eval()
    target = tmp_path / "dd.onnx"
    compat.export(m, (torch.rand(2, 4),), target, dynamic_shapes={"x": {0: Dim("batch")}})
    out = compat.last_outcome()
    assert out.route == "legacy"
    assert any(t.option == "dynamic_shapes" and "'batch'" in t.action for t in out.translations)
    dims = onnx.load(str(target)).graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch"
    for n in (1, 5):
        parity.check(target, m, [torch.rand(n, 4)], ["x"])
