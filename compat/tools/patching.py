"""``compat.patch()``: make unchanged scripts go through the shim.

Replaces ``torch.onnx.export``, ``torch.onnx.utils.export``, ``torch.onnx._export``,
``register_custom_op_symbolic`` / ``unregister_custom_op_symbolic`` and
``select_model_mode_for_export``, and re-provides the removed ``torch.onnx.dynamo_export`` and
``torch.onnx.ExportOptions``. Usable as a context manager or with ``install()``/``uninstall()``;
nested installs are counted.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from compat import catalog
from compat.installed import torch_api
from compat.policy import notices

_lock = threading.Lock()
_depth = 0


def _doc(code: str, fn: Any) -> Any:
    """Give ``fn`` the deprecation docstring of its catalog entry (``deprecation``'s format)."""
    import deprecation

    entry = catalog.get(code)
    decorated = deprecation.deprecated(
        deprecated_in=entry.deprecated_in, removed_in=entry.removed_in,
        current_version=None, details=f"{entry.code}: use {entry.replacement}",
    )(fn)
    fn.__doc__ = decorated.__doc__
    return fn


def _warn(code: str, api: str | None = None) -> None:
    """A legacy API that is not an export call: warn (or raise in strict mode) at the caller's
    line, and keep the code for the ledger record of the next export (an installed library's
    call is only counted: ``notices.third_party_usages``)."""
    notices.api_usage(code, notices.find_call_site(), api)


def export(model: Any, args: Any = (), f: Any = None, *positional: Any, **options: Any) -> Any:
    """``torch.onnx.export`` under the shim."""
    from compat.api import export as _export

    return _export(model, args, f, *positional, _entry="torch.onnx.export", **options)


def utils_export(model: Any, args: Any = (), f: Any = None, *positional: Any, **options: Any) -> Any:
    from compat.api import export as _export

    return _export(model, args, f, *positional, _entry="torch.onnx.utils.export", **options)


def register_custom_op_symbolic(symbolic_name: str, symbolic_fn: Any, opset_version: int) -> None:
    _warn("ONX301")
    from compat.routing import registry

    registry.register_custom_op_symbolic(symbolic_name, symbolic_fn, opset_version)


def unregister_custom_op_symbolic(symbolic_name: str, opset_version: int) -> None:
    _warn("ONX301", "torch.onnx.unregister_custom_op_symbolic")
    from compat.routing import registry

    registry.unregister_custom_op_symbolic(symbolic_name, opset_version)


@contextlib.contextmanager
def select_model_mode_for_export(model: Any, mode: Any) -> Iterator[None]:
    """Put ``model`` in the mode ``mode`` asks for while the block runs."""
    _warn("ONX404")
    name = getattr(mode, "name", mode)
    if name not in ("EVAL", "PRESERVE", "TRAINING", None):
        from compat.errors import CompatValueError

        raise CompatValueError(f"mode must be a torch.onnx.TrainingMode, got {mode!r}")
    was = model.training
    if name == "EVAL":
        model.train(False)
    elif name == "TRAINING":
        model.train(True)
    try:
        yield
    finally:
        model.train(was)


class ExportOptions:
    """The removed ``torch.onnx.ExportOptions``: only ``dynamic_shapes`` still means anything."""

    def __init__(self, *, dynamic_shapes: bool | None = None, **ignored: Any) -> None:
        _warn("ONX402")
        self.dynamic_shapes = dynamic_shapes
        self.ignored = ignored


def dynamo_export(model: Any, /, *model_args: Any, export_options: ExportOptions | None = None,
                  **model_kwargs: Any) -> Any:
    """The removed ``torch.onnx.dynamo_export``: an ``ONNXProgram`` (it has ``.save()``)."""
    from compat.api import export as _export

    options: dict[str, Any] = {"kwargs": model_kwargs or None, "dynamo": True}
    if export_options is not None and export_options.dynamic_shapes:
        options["dynamic_shapes"] = _all_dims_dynamic(model_args, model_kwargs)
    return _export(model, tuple(model_args), None, _entry="torch.onnx.dynamo_export", **options)


def _all_dims_dynamic(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``ExportOptions(dynamic_shapes=True)`` made every tensor dimension dynamic."""
    import torch
    from torch.export import Dim

    def spec(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return {i: Dim.AUTO for i in range(x.dim())}
        if isinstance(x, (list, tuple)):
            return type(x)(spec(y) for y in x)
        if isinstance(x, dict):
            return {k: spec(v) for k, v in x.items()}
        return None

    if kwargs:
        return None  # torch wants a dict keyed by parameter names then; leave it to the AUTO default
    return tuple(spec(a) for a in args)


_doc("ONX401", dynamo_export)
_doc("ONX402", ExportOptions)
_doc("ONX403", utils_export)
_doc("ONX404", select_model_mode_for_export)


def _replacements() -> dict[str, Any]:
    return {
        "export": export,
        "_export": utils_export,
        "register_custom_op_symbolic": register_custom_op_symbolic,
        "unregister_custom_op_symbolic": unregister_custom_op_symbolic,
        "select_model_mode_for_export": select_model_mode_for_export,
        "dynamo_export": dynamo_export,
        "ExportOptions": ExportOptions,
    }


def _mirror_signatures() -> None:
    """Our replacements show torch's own signatures, so version gates such as
    ``"dynamo" in inspect.signature(torch.onnx.export).parameters`` decide as they would unpatched."""
    import inspect

    for ours, name in ((export, "export"), (utils_export, "utils.export")):
        theirs = torch_api.original(name)
        if theirs is not None and not hasattr(ours, "__signature__"):
            try:
                ours.__signature__ = inspect.signature(theirs)  # type: ignore[attr-defined]
            except (TypeError, ValueError):
                pass


def install() -> None:
    """Install the patch (counted: each ``install`` needs one ``uninstall``)."""
    global _depth
    with _lock:
        _depth += 1
        if _depth > 1:
            return
        torch_api.capture()
        import torch.onnx

        _mirror_signatures()
        for name, value in _replacements().items():
            setattr(torch.onnx, name, value)
        utils = getattr(torch.onnx, "utils", None)
        if utils is not None:
            utils.export = utils_export


def uninstall() -> None:
    """Undo ``install``; torch's own attributes come back (removed ones disappear again)."""
    global _depth
    with _lock:
        if _depth == 0:
            return
        _depth -= 1
        if _depth:
            return
        import torch.onnx

        saved = torch_api.originals()
        for name in _replacements():
            value = saved.get(name)
            if torch_api.is_missing(value):
                if hasattr(torch.onnx, name):
                    delattr(torch.onnx, name)
            else:
                setattr(torch.onnx, name, value)
        utils = getattr(torch.onnx, "utils", None)
        if utils is not None and not torch_api.is_missing(saved.get("utils.export")):
            utils.export = saved["utils.export"]


def installed() -> bool:
    return _depth > 0


class patch(contextlib.ContextDecorator):
    """``with compat.patch(): ...`` or ``p = compat.patch(); p.install(); ...; p.uninstall()``."""

    def __enter__(self) -> patch:  # noqa: PYI034 - patch is not meant to be subclassed
        install()
        return self

    def __exit__(self, *exc: object) -> None:
        uninstall()

    install = staticmethod(install)
    uninstall = staticmethod(uninstall)
