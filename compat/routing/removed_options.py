"""Emulation of removed torch 1.x options that act on the exported model, on either route."""

from __future__ import annotations

from compat.errors import RouteFailed
from compat.request import ExportRequest, Outcome, Translation


def apply(req: ExportRequest, outcome: Outcome) -> None:
    """``enable_onnx_checker=True`` (removed in 1.11) and ``strip_doc_string`` (removed in 1.13).

    A model the checker rejects is a route failure, so nothing is written to ``f``.
    """
    strip = req.strip_doc_string and bool(req.verbose) and outcome.model_bytes is not None
    if not (req.enable_onnx_checker or strip):
        return
    import onnx

    proto = outcome.model_proto() if outcome.staged is None else None
    if strip:
        for node in proto.graph.node:
            node.doc_string = ""
        proto.doc_string = ""
        outcome.model_bytes = proto.SerializeToString()
        outcome.translations.append(Translation("ONX204", "strip_doc_string", "doc strings stripped"))
    if req.enable_onnx_checker:
        try:
            # a staged model may be over 2 GB: the checker reads it (and its data) by path
            onnx.checker.check_model(outcome.staged if outcome.staged is not None else proto)
        except onnx.checker.ValidationError as exc:
            raise RouteFailed(outcome.route, "onnx checker rejected the model", exc) from exc
        outcome.translations.append(
            Translation("ONX203", "enable_onnx_checker", "onnx.checker.check_model passed")
        )
