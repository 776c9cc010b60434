"""``compat.name_dims``: dim names written in the file, bad arguments refused by name first."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

import compat
from compat.errors import CompatError


def _model(path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["s0", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["s0", 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


def test_output_dims_are_named_in_the_file(tmp_path) -> None:
    path = tmp_path / "m.onnx"
    _model(path)
    compat.name_dims(path, {"y": {0: "out_rows"}, "x": {1: "width"}})
    model = onnx.load(path)
    assert [d.dim_param for d in model.graph.output[0].type.tensor_type.shape.dim] == ["out_rows", ""]
    assert model.graph.input[0].type.tensor_type.shape.dim[1].dim_param == "width"


@pytest.mark.parametrize("dims, word", [({"z": {0: "n"}}, "'z'"), ({"y": {2: "n"}}, "axis 2"),
                                        ({"y": {0: 3}}, "must be a string"), (["y"], "dims")])
def test_bad_dims_are_refused_before_writing(tmp_path, dims, word) -> None:
    path = tmp_path / "m.onnx"
    _model(path)
    before = path.read_bytes()
    with pytest.raises(CompatError, match=word):
        compat.name_dims(path, dims)
    assert path.read_bytes() == before
