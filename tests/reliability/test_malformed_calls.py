"""Malformed calls fail before any export work, with a CompatError of the fitting builtin kind that
names the argument; the target file is never touched and the model's forward never runs."""

from __future__ import annotations

import io
import os
import warnings

import numpy as np
import pytest
import torch
from rel_helpers import Tiny, check_parity, run_onnx

import compat
from compat.errors import CompatError, CompatTypeError, CompatValueError

X = (torch.randn(2, 4),)
_CUSTOM = "custom.domain"


def _adder(x, y):  # a stand-in "ONNX function": a callable is what the table takes
    return x


# (id, kwargs, error class, text the message names)
BAD_OPTIONS = [
    ("opset-str", {"opset_version": "17"}, CompatTypeError, "opset_version"),
    ("opset-float", {"opset_version": 17.0}, CompatTypeError, "opset_version"),
    ("opset-bool", {"opset_version": True}, CompatTypeError, "opset_version"),
    ("opset-99", {"opset_version": 99}, CompatValueError, "opset_version"),
    ("opset-0", {"opset_version": 0}, CompatValueError, "opset_version"),
    ("dynshapes-str", {"dynamic_shapes": "batch"}, CompatTypeError, "dynamic_shapes"),
    ("dynshapes-unknown-name", {"dynamic_shapes": {"y": {0: "batch"}}}, CompatValueError, "'y'"),
    ("dynshapes-int-key", {"dynamic_shapes": {0: {0: "batch"}}}, CompatTypeError, "dynamic_shapes"),
    ("dynshapes-axis-range", {"dynamic_shapes": {"x": {5: "batch"}}}, CompatValueError, "axis 5"),
    ("dynshapes-axis-type", {"dynamic_shapes": {"x": {"0": "batch"}}}, CompatTypeError, "axis '0'"),
    ("dynshapes-dim-type", {"dynamic_shapes": {"x": {0: 3.5}}}, CompatTypeError, "dynamic_shapes['x'][0]"),
    ("dynshapes-rank", {"dynamic_shapes": {"x": [None]}}, CompatValueError, "rank 2"),
    ("dynshapes-static-size", {"dynamic_shapes": {"x": {0: 7}}}, CompatValueError, "static size 7"),
    ("dynshapes-too-many", {"dynamic_shapes": ({0: "b"}, {0: "b"})}, CompatValueError, "dynamic_shapes"),
    ("dynshapes-leaf-type", {"dynamic_shapes": {"x": "batch"}}, CompatTypeError, "dynamic_shapes['x']"),
    ("table-list", {"custom_translation_table": [_adder]}, CompatTypeError, "custom_translation_table"),
    ("table-str-key", {"custom_translation_table": {"aten::add": _adder}}, CompatTypeError,
     "custom_translation_table"),
    ("table-str-value", {"custom_translation_table": {torch.ops.aten.add.Tensor: "Add"}}, CompatTypeError,
     "custom_translation_table"),
    ("table-empty-list", {"custom_translation_table": {torch.ops.aten.add.Tensor: []}}, CompatValueError,
     "custom_translation_table"),
    ("custom-opsets-negative", {"custom_opsets": {_CUSTOM: -1}}, CompatValueError, "custom_opsets"),
    ("modules-as-functions-str", {"export_modules_as_functions": "yes"}, CompatTypeError,
     "export_modules_as_functions"),
    ("modules-as-functions-not-class", {"export_modules_as_functions": {1}}, CompatTypeError,
     "export_modules_as_functions"),
    ("modules-as-functions-not-module", {"export_modules_as_functions": {int}}, CompatTypeError,
     "export_modules_as_functions"),
]


@pytest.mark.parametrize("kwargs,err,names", [b[1:] for b in BAD_OPTIONS], ids=[b[0] for b in BAD_OPTIONS])
@pytest.mark.parametrize("route", ["auto", "legacy"])
def test_bad_option_fails_before_any_work(counting, tmp_path, route, kwargs, err, names):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(err) as info:
            compat.export(counting, X, target, route=route, input_names=["x"], **kwargs)
    assert isinstance(info.value, CompatError)
    assert names in str(info.value)
    assert counting.calls == 0, "the model ran before the call was validated"
    assert target.read_bytes() == b"previous model" and os.listdir(tmp_path) == ["m.onnx"]


def _file_objects(tmp_path):
    existing = tmp_path / "existing.onnx"
    existing.write_bytes(b"x")
    closed = io.BytesIO()
    closed.close()
    return {
        "read-only": (lambda: open(existing, "rb"), CompatValueError, "not opened for writing"),
        "closed": (lambda: closed, CompatValueError, "closed"),
        "text-mode": (lambda: open(tmp_path / "t.onnx", "w"), CompatTypeError, "text-mode"),
        "stringio": (lambda: io.StringIO(), CompatTypeError, "text-mode"),
    }


@pytest.mark.parametrize("kind", ["read-only", "closed", "text-mode", "stringio"])
def test_unusable_file_object(counting, tmp_path, kind):
    make, err, text = _file_objects(tmp_path)[kind]
    f = make()
    try:
        with pytest.raises(err, match=text) as info:
            compat.export(counting, X, f)
        assert "f " in str(info.value) or str(info.value).startswith("f ")
    finally:
        f.close()
    assert counting.calls == 0


def test_binary_file_objects_still_work(tmp_path):
    model = Tiny().eval()
    with open(tmp_path / "m.onnx", "wb") as fh:
        compat.export(model, X, fh, route="legacy", input_names=["x"])
    check_parity(tmp_path / "m.onnx", model, X, ["x"])


def test_highest_supported_opset_is_accepted(tmp_path):
    from compat.installed import torch_caps

    assert torch_caps.max_opset() >= 18
    with pytest.raises(CompatValueError, match=f"between 1 and {torch_caps.max_opset()}"):
        compat.export(Tiny(), X, tmp_path / "m.onnx", opset_version=torch_caps.max_opset() + 1)


@pytest.mark.slow
def test_output_names_longer_than_the_outputs_on_the_torch_export_route(tmp_path):
    """torch.export's exporter ignores the extra names silently; compat refuses before saving."""
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous model")
    with pytest.raises(CompatValueError, match="output_names has 2 names but the model has 1 output"):
        compat.export(Tiny().eval(), X, target, route="dynamo", output_names=["y", "extra"])
    assert target.read_bytes() == b"previous model" and os.listdir(tmp_path) == ["m.onnx"]


@pytest.mark.slow
def test_well_formed_dynamic_shapes_still_export_dynamic(tmp_path):
    """The validation accepts every legitimate spelling: str names, Dim, Dim hints, None, static
    ints; the exported model runs at other sizes along the dynamic axis."""
    dim = torch.export.Dim("batch", min=1, max=64)
    model = Tiny().eval()
    x = torch.randn(3, 4)
    for spec in ({"x": {0: "batch"}}, {"x": {0: dim, 1: 4}}, ({0: torch.export.Dim.DYNAMIC},),
                 {"x": [dim, None]}):
        target = tmp_path / "m.onnx"
        compat.export(model, (x,), target, route="dynamo", input_names=["x"], dynamic_shapes=spec)
        for batch in (3, 1, 7):
            xb = torch.randn(batch, 4)
            got = run_onnx(target, {"x": xb.numpy()})[0]
            np.testing.assert_allclose(got, model(xb).detach().numpy(), atol=1e-5, rtol=1e-4)


# --- ExportedProgram ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def program():
    model = Tiny().eval()
    return model, torch.export.export(model, X)


BAD_PROGRAM_CALLS = [
    ("route-legacy", {"route": "legacy"}, "route='legacy'"),
    ("dynamo-false", {"dynamo": False}, "dynamo=False"),
    ("dynamic-shapes", {"dynamic_shapes": {"x": {0: "batch"}}}, "dynamic_shapes"),
    ("other-args", {"args": (torch.randn(5, 4),)}, "args"),
    ("inlining", {"autograd_inlining": False}, "autograd_inlining"),
    ("modules-as-functions", {"export_modules_as_functions": True}, "export_modules_as_functions"),
]


@pytest.mark.slow
@pytest.mark.parametrize("kwargs,text", [b[1:] for b in BAD_PROGRAM_CALLS], ids=[b[0] for b in BAD_PROGRAM_CALLS])
def test_exported_program_with_what_it_cannot_honour(program, tmp_path, kwargs, text):
    _, ep = program
    target = tmp_path / "m.onnx"
    kwargs = dict(kwargs)
    args = kwargs.pop("args", X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CompatValueError, match="ExportedProgram") as info:
            compat.export(ep, args, target, **kwargs)
    assert text in str(info.value)
    assert not target.exists()


@pytest.mark.slow
def test_exported_program_with_its_own_inputs_exports(program, tmp_path):
    model, ep = program
    for args in (X, ()):
        target = tmp_path / "ep.onnx"
        compat.export(ep, args, target, input_names=["x"])
        check_parity(target, model, X, ["x"])

