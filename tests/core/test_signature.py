"""Every historical call form normalises into one ExportRequest, and bad input fails first."""

from __future__ import annotations

import io
import os
import pathlib

import pytest
import torch

import compat
from compat import catalog_facts as facts
from compat.request import normalize
from compat.errors import CompatError, CompatFileNotFoundError, CompatTypeError, CompatValueError


@pytest.fixture
def net() -> torch.nn.Module:
    return torch.nn.Linear(4, 2).eval()


X = torch.randn(2, 4)


def test_torch_1_4_positional_layout(net):
    req = normalize.normalize(net, X, "m.onnx", True, False, False, ["x"], ["y"], False, False, None, 11)
    assert req.input_names == ("x",) and req.output_names == ("y",)
    assert req.opset_version == 11 and req.training == "EVAL"
    assert req.operator_export_type == "ONNX"
    assert {u.code for u in req.usages} >= {"ONX206", "ONX208"}


def test_torch_1_10_layout_told_apart_by_aten_bool(net):
    # 1.10: ..., output_names, aten, operator_export_type, opset_version
    req = normalize.normalize(net, X, "m.onnx", True, False, None, ["x"], ["y"], False, None, 12)
    assert req.opset_version == 12
    assert normalize.pick_layout((True, False, None, ["x"], ["y"], False, None)) == ("1.10", facts.LAYOUT_1_10)


def test_torch_1_11_layout(net):
    ot = torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK
    req = normalize.normalize(net, X, "m.onnx", True, False, None, ["x"], ["y"], ot, 13, False)
    assert req.operator_export_type == "ONNX_ATEN_FALLBACK"
    assert req.opset_version == 13 and req.do_constant_folding is False
    assert normalize.pick_layout((True, False, None, ["x"], ["y"], ot)) == ("1.11-2.4", facts.LAYOUT_1_11)


def test_removed_keywords_are_accepted_and_recorded(net):
    req = normalize.normalize(
        net, (X,), "m.onnx", example_outputs=net(X), use_external_data_format=True,
        enable_onnx_checker=True, strip_doc_string=False, _retain_param_name=True,
        export_raw_ir=False, training=torch.onnx.TrainingMode.PRESERVE,
    )
    codes = {u.code for u in req.usages}
    assert {"ONX201", "ONX202", "ONX203", "ONX204", "ONX205", "ONX208", "ONX102"} <= codes
    assert req.external_data is True and req.enable_onnx_checker and not req.strip_doc_string
    assert req.training == "PRESERVE"


def test_aten_true_means_onnx_aten(net):
    assert normalize.normalize(net, X, None, aten=True).operator_export_type == "ONNX_ATEN"


def test_training_bool_of_torch_1x(net):
    assert normalize.normalize(net, X, None, training=True).training == "TRAINING"


def test_trailing_dict_becomes_kwargs(net):
    req = normalize.normalize(net, (X, {"scale": X}), None)
    assert req.args == (X,) and set(req.kwargs) == {"scale"}


def test_fallback_true_means_auto_route(net):
    req = normalize.normalize(net, X, None, fallback=True)
    assert req.route == "auto" and "ONX207" in {u.code for u in req.usages}


def test_onx001_only_for_torch_entry_without_dynamo(net):
    assert "ONX001" in {u.code for u in normalize.normalize(net, X, None, _entry="torch.onnx.export").usages}
    assert "ONX001" not in {u.code for u in normalize.normalize(
        net, X, None, _entry="torch.onnx.export", dynamo=True).usages}
    assert "ONX001" not in {u.code for u in normalize.normalize(net, X, None).usages}


@pytest.mark.parametrize("f", ["m.onnx", pathlib.Path("m.onnx"), io.BytesIO()])
def test_f_forms(net, f, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalize.normalize(net, X, f).f is f


def test_misspelled_keyword_suggests(net, tmp_path):
    with pytest.raises(TypeError, match="did you mean 'dynamic_axes'") as err:
        compat.export(net, X, tmp_path / "m.onnx", dynamic_axis={"x": [0]})
    assert isinstance(err.value, CompatError)
    assert not (tmp_path / "m.onnx").exists()


BAD_CALLS = [
    ("route", dict(route="fast"), CompatValueError),
    ("training", dict(training="sometimes"), CompatValueError),
    ("input_names", dict(input_names="x"), CompatTypeError),
    ("opset_version", dict(opset_version="17"), CompatTypeError),
    ("dynamic_axes", dict(input_names=["x"], dynamic_axes={"x": {5: "batch"}}), CompatValueError),
    ("dynamic_axes", dict(dynamic_axes={"x": "batch"}), CompatTypeError),
    ("export_params", dict(export_params="yes"), CompatTypeError),
    ("custom_opsets", dict(custom_opsets={"dom": "1"}), CompatTypeError),
]


@pytest.mark.parametrize("arg,kwargs,err", BAD_CALLS, ids=[b[0] + str(i) for i, b in enumerate(BAD_CALLS)])
def test_bad_input_named_before_export(net, tmp_path, arg, kwargs, err):
    target = tmp_path / "m.onnx"
    with pytest.raises(err, match=arg):
        compat.export(net, X, target, **kwargs)
    assert not target.exists() and os.listdir(tmp_path) == []


def test_too_many_positional(net, tmp_path):
    with pytest.raises(CompatTypeError, match="positional"):
        compat.export(net, X, tmp_path / "m.onnx", *([None] * 14))


def test_non_module_model(tmp_path):
    with pytest.raises(CompatTypeError, match="model"):
        compat.export(lambda x: x, X, tmp_path / "m.onnx")


def test_missing_output_folder(net, tmp_path):
    with pytest.raises(CompatFileNotFoundError, match="f: the output folder"):
        compat.export(net, X, tmp_path / "nope" / "m.onnx")
    assert isinstance(CompatFileNotFoundError("x"), FileNotFoundError)


def test_bad_f_type(net):
    with pytest.raises(CompatTypeError, match="f must be"):
        compat.export(net, X, 42)


def test_malformed_env_var(net, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_ONNX_COMPAT_ROUTE", "sideways")
    with pytest.raises(CompatValueError, match="TORCH_ONNX_COMPAT_ROUTE"):
        compat.export(net, X, tmp_path / "m.onnx")
    monkeypatch.setenv("TORCH_ONNX_COMPAT_ROUTE", "legacy")
    monkeypatch.setenv("TORCH_ONNX_COMPAT_STRICT", "maybe")
    with pytest.raises(CompatValueError, match="TORCH_ONNX_COMPAT_STRICT"):
        compat.export(net, X, tmp_path / "m.onnx")
    assert os.listdir(tmp_path) == []


def test_a_normalized_request_equals_one_built_field_by_field(net):
    """normalize fills the request's fields directly (ExportRequest.bound): the same request as
    the dataclass's own __init__ builds, frozen as that one is; a name __init__ refuses is refused."""
    import dataclasses

    from compat.request import ExportRequest

    req = normalize.normalize(net, (torch.rand(1, 4),), "m.onnx", True, opset_version=13, input_names=["x"],
                              dynamic_axes={"x": {0: "b"}}, training=torch.onnx.TrainingMode.EVAL)
    values = {f.name: getattr(req, f.name) for f in dataclasses.fields(req) if f.init}
    built = ExportRequest(**values)
    assert req == built and vars(req) == vars(built)
    assert (req.opset_version, req.input_names, req.params) == (13, ("x",), built.params)
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.route = "legacy"  # type: ignore[misc]
    with pytest.raises(TypeError, match="no_such_option"):
        ExportRequest.bound(**values, no_such_option=1)
