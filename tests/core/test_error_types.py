"""Every validated argument of ``compat.export`` fails as the builtins would: a wrong type is a
``CompatTypeError`` (a ``TypeError``), a right type with a bad value a ``CompatValueError`` (a
``ValueError``). The message names the argument, and nothing of the export has run yet."""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest
import torch

import compat
from compat.errors import CompatError, CompatTypeError, CompatValueError


class Counting(torch.nn.Module):
    """Counts forward calls: a validated call never reaches the model."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.fc(x)


def _aten_add(x: Any, y: Any) -> Any:  # any callable stands for an ONNX function here
    return x


T, V = CompatTypeError, CompatValueError
# (argument, the call's other arguments, the error class, the text the message must hold).
# "model", "args" and "f" replace the call's positional arguments instead of adding keywords.
ROWS: list[tuple[str, dict[str, Any], type, str]] = [
    ("model", {"model": "net.pt"}, T, "model"),
    ("args", {"args": 5}, T, "args"),
    ("args", {"args": (torch.randn(3, 4),), "dynamic_shapes": {"y": {0: "b"}}}, V, "dynamic_shapes"),
    ("kwargs", {"kwargs": [1]}, T, "kwargs"),
    ("f", {"f": 5}, T, "f"),
    ("f", {"f": ""}, V, "f"),
    ("f", {"f": "<folder>"}, V, "f"),
    ("route", {"route": 1}, T, "route"),
    ("route", {"route": "fast"}, V, "route"),
    ("training", {"training": 5}, T, "training"),
    ("training", {"training": torch.onnx.OperatorExportTypes.ONNX}, T, "training"),
    ("training", {"training": "sometimes"}, V, "training"),
    ("operator_export_type", {"operator_export_type": 3}, T, "operator_export_type"),
    ("operator_export_type", {"operator_export_type": torch.onnx.TrainingMode.EVAL}, T,
     "operator_export_type"),
    ("operator_export_type", {"operator_export_type": "ONNX_EVERYTHING"}, V, "operator_export_type"),
    ("input_names", {"input_names": "x"}, T, "input_names"),
    ("input_names", {"input_names": [1]}, T, "input_names"),
    ("input_names", {"input_names": ["x", "x"]}, V, "input_names"),
    ("output_names", {"output_names": ("y", 2)}, T, "output_names"),
    ("output_names", {"output_names": ["y", "y"]}, V, "output_names"),
    ("opset_version", {"opset_version": "17"}, T, "opset_version"),
    ("opset_version", {"opset_version": True}, T, "opset_version"),
    ("opset_version", {"opset_version": 0}, V, "opset_version"),
    ("opset_version", {"opset_version": 99}, V, "opset_version"),
    ("dynamic_axes", {"dynamic_axes": [("x", [0])]}, T, "dynamic_axes"),
    ("dynamic_axes", {"dynamic_axes": {0: [0]}}, T, "dynamic_axes"),
    ("dynamic_axes", {"dynamic_axes": {"x": "batch"}}, T, "dynamic_axes"),
    ("dynamic_axes", {"dynamic_axes": {"x": {0: 1}}}, T, "dynamic_axes"),
    ("dynamic_axes", {"dynamic_axes": {"x": {"0": "b"}}}, T, "dynamic_axes"),
    ("dynamic_axes", {"dynamic_axes": {"x": {0: ""}}}, V, "dynamic_axes"),
    ("dynamic_axes", {"input_names": ["x"], "dynamic_axes": {"x": {5: "b"}}}, V, "dynamic_axes"),
    ("dynamic_shapes", {"dynamic_shapes": 5}, T, "dynamic_shapes"),
    ("dynamic_shapes", {"dynamic_shapes": {"x": {0: 3.5}}}, T, "dynamic_shapes"),
    ("dynamic_shapes", {"dynamic_shapes": {"x": {0: ""}}}, V, "dynamic_shapes"),
    ("dynamic_shapes", {"dynamic_shapes": {"x": [None]}}, V, "dynamic_shapes"),
    ("custom_opsets", {"custom_opsets": ["dom"]}, T, "custom_opsets"),
    ("custom_opsets", {"custom_opsets": {"dom": "1"}}, T, "custom_opsets"),
    ("custom_opsets", {"custom_opsets": {"dom": -1}}, V, "custom_opsets"),
    ("custom_translation_table", {"custom_translation_table": [_aten_add]}, T,
     "custom_translation_table"),
    ("custom_translation_table", {"custom_translation_table": {torch.ops.aten.add.Tensor: []}}, V,
     "custom_translation_table"),
    ("export_modules_as_functions", {"export_modules_as_functions": "yes"}, T,
     "export_modules_as_functions"),
    ("export_modules_as_functions", {"export_modules_as_functions": {int}}, T,
     "export_modules_as_functions"),
    ("external_data", {"external_data": 1}, T, "external_data"),
    ("external_data", {"external_data": False, "use_external_data_format": True}, V,
     "external_data"),
    ("aten", {"aten": "yes"}, T, "aten"),
    ("aten", {"aten": True, "operator_export_type": "ONNX_FALLTHROUGH"}, V, "aten"),
    *[(name, {name: "yes"}, T, name) for name in (
        "export_params", "verbose", "do_constant_folding", "keep_initializers_as_inputs",
        "dynamo", "strict", "autograd_inlining", "report", "optimize", "verify", "profile",
        "dump_exported_program", "enable_onnx_checker", "strip_doc_string", "fallback",
        "use_external_data_format", "_retain_param_name", "export_raw_ir", "acceptance_check",
    )],
]


@pytest.mark.parametrize("arg,call,err,names", ROWS,
                         ids=[f"{r[0]}-{'type' if r[2] is T else 'value'}-{i}" for i, r in enumerate(ROWS)])
def test_wrong_type_is_a_type_error_and_wrong_value_a_value_error(tmp_path, arg, call, err, names):
    counting = Counting().eval()
    call = dict(call)
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous model")
    f = call.pop("f", target)
    if f == "<folder>":
        (tmp_path / "a_folder").mkdir()
        f = tmp_path / "a_folder"
    model = call.pop("model", counting)
    args = call.pop("args", (torch.randn(3, 4),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy options' own warnings are not under test
        with pytest.raises(CompatError) as info:
            compat.export(model, args, f, **call)
    exc = info.value
    assert type(exc) is err, f"{arg}: {type(exc).__name__}: {exc}"
    builtin, other = (TypeError, ValueError) if err is T else (ValueError, TypeError)
    assert isinstance(exc, builtin) and not isinstance(exc, other)
    assert names in str(exc), f"the message does not name {names!r}: {exc}"
    assert counting.calls == 0, "the model ran before the call was validated"
    assert target.read_bytes() == b"previous model"
    assert sorted(os.listdir(tmp_path)) in (["m.onnx"], ["a_folder", "m.onnx"])


def test_every_validated_option_has_a_row():
    """A new bool-valued option joins the table (its wrong type at least)."""
    from compat.request import normalize

    covered = {r[0] for r in ROWS}
    options = set(normalize._BOOL_OPTIONS) | set(normalize._OPTIONAL_BOOL_OPTIONS)
    assert options <= covered, sorted(options - covered)
