"""``compat.name_dims(path, {value: {axis: name}})``: the dim names of an exported model's inputs
and outputs set in the file, where torch's new exporter cannot name them itself.

torch names a dynamic dim after the ``dynamic_shapes`` entry of the input it comes from; the
legacy ``dynamic_axes`` also named output axes on their own (``{"out": {0: "out_rows"}}``), axes
the model fixes, and axes of size 1 at the example. The migration writes this step right after
the export (issue 30.2); ``compat run --observe`` records the file as it leaves it (part of the
call site). Needs onnx, not torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from compat.errors import CompatFileNotFoundError, CompatTypeError, CompatValueError


def name_dims(path: str | os.PathLike[str], dims: Mapping[str, Mapping[int, str]]) -> None:
    """Name axis ``axis`` of graph input or output ``value`` ``name`` (its ``dim_param``), for
    each entry of ``dims``, in the model file ``path`` (rewritten atomically; an external data
    file beside it stays as it is). A value or axis the model does not have is refused by name
    before anything is written."""
    if not isinstance(path, (str, os.PathLike)):
        raise CompatTypeError(f"path: expected a file path, got {type(path).__name__}")
    if not isinstance(dims, Mapping) or not all(
            isinstance(k, str) and isinstance(v, Mapping) for k, v in dims.items()):
        raise CompatTypeError("dims: expected {value name: {axis: dim name}}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise CompatFileNotFoundError(f"path: no such file: {path}")
    import onnx

    model = onnx.load(path, load_external_data=False)
    values = {v.name: v for v in (*model.graph.input, *model.graph.output)}
    for value, axes in dims.items():
        if value not in values:
            raise CompatValueError(f"dims: {value!r} is no graph input or output of {path} "
                                   f"(they are {sorted(values)})")
        shape = values[value].type.tensor_type.shape
        for axis, name in axes.items():
            if not isinstance(axis, int) or not -len(shape.dim) <= axis < len(shape.dim):
                raise CompatValueError(f"dims: {value!r} has no axis {axis!r} (rank {len(shape.dim)})")
            if not isinstance(name, str) or not name:
                raise CompatTypeError(f"dims: the name of {value!r} axis {axis} must be a string")
    for value, axes in dims.items():
        shape = values[value].type.tensor_type.shape
        for axis, name in axes.items():
            shape.dim[axis].dim_param = name  # replaces a dim_value (the oneof)
    tmp = f"{path}.name_dims.tmp"
    try:
        onnx.save(model, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    observing = sys.modules.get("compat.tools.observe")
    if observing is not None:  # ``compat run --observe``: the step is part of the call site
        observing.post_step(path, "name_dims")
