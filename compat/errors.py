"""Errors and warnings of the shim. Each error also inherits the fitting builtin."""

from __future__ import annotations

import re
from typing import Any


class CompatError(Exception):
    """Base of every error raised by torch-onnx-compat."""


class CompatValueError(CompatError, ValueError):
    """An argument has the right type but a bad value."""


class CompatTypeError(CompatError, TypeError):
    """An argument has the wrong type, or the call has the wrong shape."""


class CompatFileNotFoundError(CompatError, FileNotFoundError):
    """The output folder does not exist."""


class CompatPermissionError(CompatError, PermissionError):
    """The output file (or its folder) cannot be written by this user."""


class CompatFileExistsError(CompatError, FileExistsError):
    """The export's data file name (``<f>.data``) is taken by a file another model still uses."""


class RuntimeExtraMissing(CompatError, ImportError):
    """The shim needs the ``runtime`` extra (torch, onnx, onnxscript), which is not installed."""


class StrictModeError(CompatError, TypeError):
    """A legacy usage was found while strict mode is on."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class RouteUnavailable(CompatError, RuntimeError):
    """The installed torch lacks what a route needs (e.g. the TorchScript exporter)."""


class TorchInternalsMoved(CompatError, RuntimeError):
    """A private torch piece the shim relies on is gone from the installed torch (an upgrade moved
    or removed it): the shim stops here rather than silently doing less."""

    def __init__(self, what: str, torch_version: str) -> None:
        super().__init__(
            f"torch {torch_version} no longer has {what}, which torch-onnx-compat relies on; "
            "this torch is outside the tested range (README: Version matrix)"
        )
        self.what = what
        self.torch_version = torch_version


class RouteFailed(CompatError, RuntimeError):
    """One route could not export the model. ``reason`` is a short class of the cause; ``where``
    the model line that blocked it when known; ``log`` what torch printed while it tried."""

    where: str | None = None
    log: str | None = None

    def __init__(self, route: str, reason: str, cause: BaseException | None = None) -> None:
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else ""
        super().__init__(f"{route} route failed ({reason})" + (f": {detail}" if detail else ""))
        self.route = route
        self.reason = reason
        self.cause = cause


class SymbolicNotApplied(RouteFailed):
    """A symbolic registration the captured program reaches (``register_custom_op_symbolic``,
    ``autograd.Function.symbolic``, a ``torch.library`` op's symbolic) cannot be applied on this
    route: ``symbolic`` names it (qualified), ``construct`` says what stood in the way. Never a
    silent skip: ``auto`` falls back to another route or reports this."""

    def __init__(self, route: str, reason: str, cause: BaseException | None = None, *,
                 symbolic: str = "?", construct: str = "") -> None:
        super().__init__(route, reason, cause)
        self.symbolic = symbolic
        self.construct = construct


class DraftCaptureDeferred(RouteFailed):
    """torch.export stopped at a data-dependent guard and the draft capture that would bake the
    example's branch was left until the routes after this one have been tried (auto, below the
    opset the torch.export route builds at). ``first`` is torch.export's own failure: a later
    attempt of the route starts its draft capture from it. ``place`` (``{file, line, source}``):
    the branch it stopped at, which the TorchScript route's tracer bakes in its stead."""

    def __init__(self, route: str, reason: str, first: BaseException,
                 place: dict[str, Any] | None = None) -> None:
        super().__init__(route, reason, first)
        self.first = first
        self.place = place


class OpsetNotReached(RouteFailed):
    """torch.export exported the model, but it could not be brought down to the requested opset.

    ``program`` is the route's model at ``reached``, the lowest opset it could be brought to
    (it may be the opset it was built at); the dispatcher may deliver it rather than fail.
    """

    def __init__(
        self, route: str, wanted: int, reached: int, program: object,
        cause: BaseException | None = None, blockers: tuple[str, ...] = (),
    ) -> None:
        blocked = f": {', '.join(blockers)} has no opset-{wanted} form" if blockers else ""
        super().__init__(route, f"opset {wanted} not reachable{blocked}", cause)
        self.blockers = blockers  # the operators no down-conversion could write at ``wanted``
        self.wanted = wanted
        self.reached = reached
        self.program = program
        self.outcome: object | None = None  # the route's Outcome, when it got that far


class OpsetNotConvertible(CompatValueError):
    """``compat.convert_opset`` cannot bring the model down to ``wanted``: ``ops`` are the
    operators with no form there, ``reached`` the lowest opset the model converts to (call again
    with it), ``source`` the opset the model was at."""

    def __init__(self, message: str, *, wanted: int, reached: int, source: int, ops: tuple[str, ...]) -> None:
        super().__init__(message)
        self.wanted = wanted
        self.reached = reached
        self.source = source
        self.ops = ops
class AcceptanceFailed(RouteFailed):
    """The torch.export route exported a model that does not match eager torch or the TorchScript
    exporter's interface (``compat.routing.acceptance``). ``reason`` names the first difference,
    ``differences`` all of them, ``acceptance`` the check's numbers (the ledger records them)."""

    def __init__(self, route: str, differences: list[str], acceptance: dict[str, object], hint: str = "") -> None:
        details = acceptance.get("details") or []
        text = "; ".join([*differences, *(details if isinstance(details, list) else [])])
        super().__init__(route, differences[0], CompatValueError(text + (f". {hint}" if hint else "")))
        self.differences = differences
        self.acceptance = acceptance


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: torch's pointers to a traceback printed "above", which is not where compat puts it
_ABOVE = re.compile(r"(?:Refer to the full stack trace above for more information"
                    r"|see (?:the )?(?:full )?stack trace above)", re.IGNORECASE)


class ExportFailed(CompatError, RuntimeError):
    """Every planned route failed; ``failures`` maps route name to its ``RouteFailed``."""

    def __init__(self, failures: dict[str, RouteFailed]) -> None:
        self.failures = failures
        self.logs: dict[str, str] = {}
        super().__init__(self._text())

    def name_logs(self, logs: dict[str, str]) -> None:
        """Name where each route's log (what torch printed, its full traceback) was written."""
        self.logs = dict(logs)
        self.args = (self._text(),)

    def _text(self) -> str:
        lines = []
        for name, err in self.failures.items():
            text = _ANSI.sub("", str(err))  # torch colours its errors; logs and CI keep codes raw
            log = self.logs.get(name)
            where = (f"the {name} route's log {log}" if log else
                     "the exception's __cause__ (set TORCH_ONNX_COMPAT_LEDGER to keep a log file)")
            text, named = _ABOVE.subn(f"the full stack trace is in {where}", text)
            if log and not named:
                text += f"\n    (the {name} route's log, with what torch printed and the full traceback: {log})"
            lines.append(f"  {name}: {text}")
        return "every export route failed:\n" + "\n".join(lines)


class UntestedTorchWarning(UserWarning):
    """The installed torch is outside the range the suite passed on (shown once per process)."""


class ModelChangedWarning(RuntimeWarning):
    """An export changed the user's model in a way that could not be put back (names what)."""


class LegacyExportWarning(DeprecationWarning):
    """A legacy torch.onnx usage; ``code`` is its ONX catalog code."""

    code: str = ""
