"""What the torch.export route cannot honour, so that auto routing sends the call elsewhere.

Decided from the request alone, before any export, in ``compat.request.torchscript_only`` (where
``normalize`` reads it too, without loading this package); kept free of onnx/onnxscript imports
(the TorchScript route must not pay for them).
"""

from __future__ import annotations

from compat.request.torchscript_only import legacy_only_reasons

__all__ = ["legacy_only_reasons"]
