"""A helper taking the opset and the axes as parameters migrates once, with the values its
callers pass (issue 30.7); callers that disagree leave it as it was decided before."""

from __future__ import annotations

from migration.core import Options, fix_text

HELPER = """\
import torch


def export_onnx(model, x, path, opset=13, axes=None):
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                      opset_version=opset, dynamic_axes=axes)


export_onnx(a, x, "a.onnx", 13, {{"x": {{0: "batch"}}, "y": {{0: "batch"}}}})
export_onnx(b, x, "b.onnx", {second}, {{"x": {{0: "batch"}}, "y": {{0: "batch"}}}})
"""
RECORDS = {5: {"route_taken": "dynamo", "output": "/o/a.onnx",
               "records": [{"route_taken": "dynamo", "model": m, "status": "ok",
                            "output": f"/o/{m}.onnx"} for m in ("A", "B")]}}


def test_callers_agreeing_give_the_helper_their_values() -> None:
    out, _, _, _ = fix_text(HELPER.format(second=13), "t.py", Options(fix=True), RECORDS)
    assert 'opset_version=18, dynamic_shapes=({0: "batch"},), dynamo=True' in out, out
    assert "compat.convert_opset(path, opset, out=path)" in out


def test_callers_disagreeing_leave_that_parameter_alone() -> None:
    """The opsets differ (13, 17): the parameter stays (torch's own conversion, then the step);
    the axes agree: they become dynamic_shapes."""
    out, _, _, _ = fix_text(HELPER.format(second=17), "t.py", Options(fix=True), RECORDS)
    assert 'opset_version=opset, dynamic_shapes=({0: "batch"},)' in out, out
    assert "compat.convert_opset(path, opset, out=path)" in out
