"""The export settings legacy symbolics read (``GLOBALS.export_onnx_opset_version``)."""

from __future__ import annotations

import threading

from compat.catalog import DYNAMO_MIN_OPSET


class _Globals(threading.local):
    """Per thread: each export's symbolics see its own opset."""

    def __init__(self) -> None:
        self.export_onnx_opset_version = DYNAMO_MIN_OPSET
        self.in_onnx_export = False
        self.onnx_shape_inference = True
        self.autograd_inlining = True
        self.export_training = False
        self.operator_export_type = None
        self.training_mode = None


GLOBALS = _Globals()
