"""The normalised form of one export call, and the result of one route.

``normalize`` turns every historical call form into an ``ExportRequest`` and binds the call to
the model's forward() once (``binding``); ``layout`` reads the bound call as the graph sees it
(leaves, names, dynamic axes), and ``shapes_to_axes`` gives the TorchScript route
``dynamic_axes`` for a ``dynamic_shapes`` call. Nothing here loads a route package.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compat.catalog_facts import OPERATOR_EXPORT_TYPES, TRAINING_MODES
from compat.request.binding import Param, split_legacy_args, try_bind

if TYPE_CHECKING:
    from compat.request.layout import InputLayout

ROUTES = ("auto", "dynamo", "legacy")
__all__ = ["OPERATOR_EXPORT_TYPES", "ROUTES", "TRAINING_MODES", "ExportRequest", "Outcome",
           "Translation", "Usage"]


@dataclass(frozen=True)
class Usage:
    """A legacy usage found while normalising a call (a catalog code and the option).

    ``via_shim``: found at a ``compat.export`` call, which the rewriter leaves as it is (its
    messages then name no migrate command)."""

    code: str
    option: str
    detail: str = ""
    via_shim: bool = False


@dataclass(frozen=True)
class Translation:
    """What a route did with a legacy option: ``{code, option, action}`` in the ledger."""

    code: str
    option: str
    action: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ExportRequest:
    """Every historical call form of ``torch.onnx.export``, in its modern spelling.

    Routes read this; they never re-parse user arguments. ``args``/``kwargs`` are the inputs as
    the caller gave them (a legacy trailing dict already moved into ``kwargs``); ``params`` is the
    call bound to forward() (``unbound`` says why not, when it does not bind); ``layout`` reads it
    as graph inputs. ``given`` names the options the caller passed explicitly (so a route can tell
    a default from a choice).
    """

    model: Any
    args: tuple[Any, ...]
    f: Any = None
    kwargs: Mapping[str, Any] | None = None
    export_params: bool = True
    verbose: bool | None = None
    training: str = "EVAL"
    input_names: tuple[str, ...] | None = None
    output_names: tuple[str, ...] | None = None
    operator_export_type: str = "ONNX"
    opset_version: int | None = None
    do_constant_folding: bool = True
    dynamic_axes: Mapping[str, Any] | None = None
    keep_initializers_as_inputs: bool | None = None
    custom_opsets: Mapping[str, int] | None = None
    export_modules_as_functions: Any = False
    autograd_inlining: bool = True
    # torch.export-route options
    dynamo: bool | None = None
    external_data: bool | None = None
    dynamic_shapes: Any = None
    custom_translation_table: Mapping[Any, Any] | None = None
    report: bool = False
    optimize: bool = True
    verify: bool = False
    profile: bool = False
    dump_exported_program: bool = False
    artifacts_dir: Any = "."
    # removed torch 1.x options, emulated by the legacy route
    enable_onnx_checker: bool = False
    strip_doc_string: bool = True
    # compat's own
    route: str | None = None
    strict: bool | None = None
    #: check the torch.export route's model against eager torch and the legacy interface before
    #: accepting it (None: environment, pyproject, else yes); ``verify`` is torch's own option
    acceptance_check: bool | None = None
    call_site: str = "<unknown>:0"
    given: frozenset[str] = frozenset()
    usages: tuple[Usage, ...] = ()
    # the call bound to forward(), derived from args/kwargs (normalize passes it in)
    params: tuple[Param, ...] | None = field(default=None, repr=False, compare=False)
    unbound: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.params is None and self.unbound is None:
            # built directly (tests, tools) rather than by normalize(): bind here, once
            args, kwargs = self.args, self.kwargs
            if isinstance(args, (tuple, list)):
                args, kwargs = split_legacy_args(tuple(args), kwargs)
                params, unbound = try_bind(self.model, args, kwargs)
            else:
                params, unbound = None, f"args must be a tuple of inputs, got {type(args).__name__}"
            object.__setattr__(self, "args", args)
            object.__setattr__(self, "kwargs", kwargs)
            object.__setattr__(self, "params", params)
            object.__setattr__(self, "unbound", unbound)

    @classmethod
    def bound(cls, **values: Any) -> ExportRequest:
        """``cls(**values)`` for a call ``normalize`` checked and bound (``params``/``unbound``
        given): the defaults filled in directly, without the frozen ``__init__``'s
        ``object.__setattr__`` per field (5 of ``normalize``'s 13 us, for 37 fields)."""
        defaults = _defaults(cls)
        if values.keys() - defaults.keys() or "model" not in values or "args" not in values \
                or (values.get("params") is None and values.get("unbound") is None):
            return cls(**values)  # an unknown or missing field (__init__ says so), or not bound
        req = object.__new__(cls)
        fields = req.__dict__
        fields.update(defaults)
        fields.update(values)
        return req

    def replace(self, **changes: Any) -> ExportRequest:
        if "args" in changes or "kwargs" in changes or "model" in changes:
            changes.setdefault("params", None)  # other inputs: bound again
            changes.setdefault("unbound", None)
        return dataclasses.replace(self, **changes)

    @functools.cached_property
    def layout(self) -> InputLayout:
        """The call's inputs as graph inputs (imports torch on first use)."""
        from compat.request.layout import input_layout

        return input_layout(self)

    @property
    def model_name(self) -> str:
        cls = type(self.model)
        return f"{cls.__module__}.{cls.__qualname__}"


@functools.cache
def _defaults(cls: type) -> dict[str, Any]:
    """Each init field of the dataclass ``cls`` and its default (``model`` and ``args``, which
    have none, map to None: ``bound`` requires them)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: a default factory needs __init__")
        else:
            out[f.name] = None
    return out


@dataclass
class Outcome:
    """What one route produced: ``program``, the ONNXProgram (torch.export route); or
    ``model_bytes``, the serialized model (TorchScript route); or ``staged``, the path of a model
    the TorchScript route wrote into a staging folder beside ``f`` (a model over 2 GB, with its
    external data files). Saving reads whichever is set."""

    route: str
    program: Any = None
    model_bytes: bytes | None = None
    staged: str | None = None
    translations: list[Translation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fallback_reason: str | None = None
    duration_s: float = 0.0
    output: str | None = None
    notes: list[str] = field(default_factory=list)
    #: TracerWarnings of a TorchScript-route export (``{file, line, message}``): a branch or value
    #: baked into the graph at that line
    tracer_warnings: list[dict[str, Any]] = field(default_factory=list)
    #: torch.export route: for each graph input of ``program``, the index of the call's leaf
    #: (``InputLayout.leaves``) it takes; None when unknown
    input_leaves: list[int] | None = None
    #: the acceptance check of a torch.export-route model (``compat.routing.acceptance``)
    acceptance: dict[str, Any] | None = None
    #: places a torch.export-route draft capture specialised on the example's values
    #: (``{file, line, source, guard}``): a branch baked into the graph, as a TracerWarning says
    baked: list[dict[str, Any]] = field(default_factory=list)

    def __repr__(self) -> str:
        # the default repr would print the whole ONNXProgram or model bytes
        parts = [f"route={self.route!r}", f"output={self.output!r}"]
        if self.fallback_reason:
            parts.append(f"fallback_reason={_clip(self.fallback_reason)!r}")
        if self.warnings:
            parts.append(f"warnings={self.warnings!r}")
        if self.translations:
            parts.append("translations=" + repr([f"{t.code} {t.option}" for t in self.translations]))
        parts.append(f"duration_s={self.duration_s:.2f}")
        return f"Outcome({', '.join(parts)})"

    def model_proto(self) -> Any:
        """The ``onnx.ModelProto`` of the result (imports onnx)."""
        if self.program is not None:
            return self.program.model_proto
        import onnx

        if self.staged is not None:
            return onnx.load(self.staged, load_external_data=False)
        return onnx.load_from_string(self.model_bytes)


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
