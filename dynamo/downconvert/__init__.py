"""compat's own down-conversion of the torch.export route's graph (built at opset 18) to opset
11..17: onnx_ir passes, one adapter module per operator family (``registry.MODULES``).

Type-only schema changes are relabelled (after checking the node's types fit the older schema);
semantic ones are rewritten by adapters. ``downconvert`` never changes the model it is given: it
converts copies, so the result is either fully at the wanted opset or fully at the lowest opset
it could reach, never half-converted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import onnx_ir as ir

from .base import LOWEST, NoForm
from .check import check
from .convert import Unreachable, convert_in_place, fit_pool_sizes, onnx_opset
from .ir_version import lower_ir_version

__all__ = ["LOWEST", "Conversion", "NoForm", "downconvert", "fit_pool_sizes"]

log = logging.getLogger(__name__)


@dataclass
class Conversion:
    """The outcome of ``downconvert``: ``model`` is a new model at ``reached``."""

    model: ir.Model
    wanted: int
    reached: int
    source: int
    rewritten: int = 0
    relabelled: int = 0
    #: why ``wanted`` was not reached by compat's adapters (each names the op and the opset)
    gaps: tuple[NoForm, ...] = ()
    #: the rest of the way was done by onnx's version converter
    by_onnx_converter: bool = False
    #: False when the given model already fails onnx's strict checks (the result is not judged)
    checked: bool = True

    @property
    def complete(self) -> bool:
        return self.reached == self.wanted

    def describe(self) -> str:
        """One line for the ledger."""
        return f"built at {self.source}, {self.steps()}"

    def steps(self) -> str:
        """What was done: the nodes rewritten and relabelled, the IR version."""
        if self.reached == self.source:
            return "not converted"
        how = f"converted to {self.reached} by compat's down-conversion ({self.rewritten} nodes rewritten"
        how += f", {self.relabelled} relabelled)"
        if self.by_onnx_converter:
            how += f", then to {self.wanted} by onnx's version converter"
        how += f"; IR version {self.model.ir_version}"
        return how + ("" if self.checked else "; not checked: the model given fails onnx's strict checks already")

    def reason(self) -> str:
        """Why ``wanted`` was not reached."""
        return "; ".join(str(g) for g in self.gaps) or f"opset {self.wanted} not reached"


def downconvert(model: ir.Model, wanted: int, *, onnx_fallback: bool = True) -> Conversion:
    """``model`` (unchanged) brought to opset ``wanted``, or to the lowest opset above it that
    every node can be written at. With ``onnx_fallback``, onnx's version converter is tried for
    the remaining steps when an operator has no adapter; its result is kept only if it passes
    onnx's checker and strict shape inference."""
    source = onnx_opset(model.opset_imports)
    if source is None or wanted >= source:
        return Conversion(model, wanted, source or wanted, source or wanted)
    gaps: tuple[NoForm, ...] = ()
    if wanted < LOWEST:
        gaps = (NoForm("the model", wanted, LOWEST, f"compat's down-conversion writes opset {LOWEST} and up"),)
    target = max(wanted, LOWEST)
    while target < source:
        copy = model.clone()
        try:
            stats = convert_in_place(copy, target)
            lower_ir_version(copy, target)
            checked = _check(copy, model)
        except Unreachable as exc:
            gaps = gaps or tuple(exc.gaps)
            target = max(target + 1, *(g.needs for g in exc.gaps))
            continue
        except Exception as exc:  # noqa: BLE001 - never deliver a model we broke; try one opset up
            gaps = gaps or (NoForm("the model", target, target + 1, f"{type(exc).__name__}: {exc}"),)
            target += 1
            continue
        result = Conversion(copy, wanted, target, source, stats["rewritten"], stats["relabelled"], gaps,
                            checked=checked)
        break
    else:
        result = Conversion(model, wanted, source, source, gaps=gaps)
    if not result.complete and onnx_fallback:
        rest = _onnx_converter(result.model, wanted)
        if rest is not None:
            result.model, result.reached, result.by_onnx_converter = rest, wanted, True
    return result


def _check(converted: ir.Model, source: ir.Model) -> bool:
    """Strict checks of ``converted``; False when ``source`` already fails them (not ours to
    judge). Raises when the conversion made a valid model invalid."""
    try:
        return check(converted)
    except Exception:
        try:
            check(source)
        except Exception:  # noqa: BLE001 - onnx raises ValidationError, InferenceError, ...
            return False
        raise


def _onnx_converter(model: ir.Model, wanted: int) -> ir.Model | None:
    """onnx's C++ version converter for the steps our adapters could not take (None if it fails)."""
    import onnx.version_converter

    try:
        converted = ir.from_proto(onnx.version_converter.convert_version(ir.to_proto(model), wanted))
        lower_ir_version(converted, wanted)
        check(converted)
    except Exception as exc:  # noqa: BLE001 - onnx's converter fails with many exception types
        log.debug("onnx's version converter could not take the model to opset %d: %s", wanted, exc)
        return None
    return converted
