"""The catalog's facts about the arguments of ``torch.onnx.export`` across torch versions.

The positional layouts, the keyword sets, and for every legacy option and value what it means
today (its ``Disposition``): dropped, spelled in plain torch, translated by the shim alone,
honoured only by the TorchScript exporter, or honoured by nothing. The shim (normalisation and
route choice), the rewriter (its pins and findings) and the catalog's texts all read this table;
``needs_torchscript`` is the one answer to "does this need the TorchScript exporter?".

Torch-free: the rewriter imports it where torch is not installed. Values are given as the
runtime holds them after normalisation (enum members by name: ``"TRAINING"``) or as the rewriter
reads them from source (literals, enum member names, ``UNKNOWN`` for anything else).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

# --- positional layouts ---------------------------------------------------------------------------

#: options after (model, args, f) in torch 1.3-1.9 (custom_opsets and the two after it: 1.5+)
LAYOUT_1_3 = (
    "export_params", "verbose", "training", "input_names", "output_names", "aten",
    "export_raw_ir", "operator_export_type", "opset_version", "_retain_param_name",
    "do_constant_folding", "example_outputs", "strip_doc_string", "dynamic_axes",
    "keep_initializers_as_inputs", "custom_opsets", "enable_onnx_checker",
    "use_external_data_format",
)
#: torch 1.10: as 1.3-1.9 without export_raw_ir
LAYOUT_1_10 = tuple(n for n in LAYOUT_1_3 if n != "export_raw_ir")
#: torch 1.11-2.4 (autograd_inlining: 2.1+); torch 2.5 made everything after f keyword-only
LAYOUT_1_11 = (
    "export_params", "verbose", "training", "input_names", "output_names",
    "operator_export_type", "opset_version", "do_constant_folding", "dynamic_axes",
    "keep_initializers_as_inputs", "custom_opsets", "export_modules_as_functions",
    "autograd_inlining",
)
LAYOUTS: dict[str, tuple[str, ...]] = {
    "1.3-1.9": LAYOUT_1_3, "1.10": LAYOUT_1_10, "1.11-2.4": LAYOUT_1_11,
}
#: the first options after f name the same arguments in every layout
SHARED_POSITIONS = 5
SHARED_LABEL = "1.3-2.4"


def positional_layout(count: int, is_bool: Callable[[int], bool | None]
                      ) -> tuple[str, tuple[str, ...]] | None:
    """(label, option names) of the layout that ``count`` positional options after ``f``
    follow; None when it cannot be told. ``is_bool(i)`` says whether the i-th of them (0-based)
    is a bool (None: cannot tell, e.g. a name in source code).

    A bool 6th option is ``aten`` (torch 1.x), anything else ``operator_export_type`` (1.11+);
    after a bool 6th, a bool 7th is ``export_raw_ir`` (1.3-1.9). The caller checks ``count``
    against the layout's length.
    """
    if count <= SHARED_POSITIONS:
        return SHARED_LABEL, LAYOUT_1_11
    sixth = is_bool(SHARED_POSITIONS)
    if sixth is None:
        return None
    if not sixth:
        return "1.11-2.4", LAYOUT_1_11
    if count <= SHARED_POSITIONS + 1:
        return "1.10", LAYOUT_1_10
    seventh = is_bool(SHARED_POSITIONS + 1)
    if seventh is None:
        return None
    return ("1.3-1.9", LAYOUT_1_3) if seventh else ("1.10", LAYOUT_1_10)


# --- keyword sets ---------------------------------------------------------------------------------

#: keywords of ``torch.onnx.export`` on current torch (2.5-2.14), legacy ones included
CURRENT_KEYWORDS = (
    "kwargs", "verbose", "input_names", "output_names", "opset_version", "dynamo",
    "external_data", "dynamic_shapes", "custom_translation_table", "report", "optimize",
    "verify", "profile", "dump_exported_program", "artifacts_dir", "export_params",
    "keep_initializers_as_inputs", "dynamic_axes", "training", "operator_export_type",
    "do_constant_folding", "custom_opsets", "export_modules_as_functions", "autograd_inlining",
)
#: keywords torch removed (a TypeError on current torch)
REMOVED_KEYWORDS = (
    "example_outputs", "use_external_data_format", "enable_onnx_checker", "strip_doc_string",
    "_retain_param_name", "aten", "export_raw_ir", "export_type", "fallback",
)
#: legacy export entry points (reached through ``compat.patch()``) and their catalog codes
ENTRY_CODES = {
    "torch.onnx.utils.export": "ONX403",
    "torch.onnx._export": "ONX403",
    "torch.onnx.dynamo_export": "ONX401",
}
TRAINING_MODES = ("EVAL", "PRESERVE", "TRAINING")
#: the ``OperatorExportTypes`` current torch takes (torch 1.x also had ``RAW``)
OPERATOR_EXPORT_TYPES = ("ONNX", "ONNX_ATEN", "ONNX_ATEN_FALLBACK", "ONNX_FALLTHROUGH")
OPERATOR_EXPORT_TYPES_1X = (*OPERATOR_EXPORT_TYPES, "RAW")

# --- what each legacy option and value means today ------------------------------------------------

#: a value the rewriter cannot read from source (a name, a call, ...)
UNKNOWN: Any = ...

Kind = Literal["dropped", "plain", "shim", "torchscript", "lost"]
#: what each kind means, in the words of the catalog's tables
KINDS: dict[str, str] = {
    "dropped": "no meaning left: what the torch.export exporter does anyway",
    "plain": "plain torch spells it on the torch.export route",
    "shim": "the shim translates it on the torch.export route; plain torch ignores it there",
    "torchscript": "only the TorchScript exporter honours it",
    "lost": "no exporter of current torch honours it",
}
_REWRITE = {
    "dropped": "dropped",
    "shim": "pins `dynamo=False` (or `compat.export` where a ledger shows the TorchScript "
            "route failing)",
    "torchscript": "pins `dynamo=False` with the reason",
    "lost": "reported (no fix)",
}
# canonical stand-ins for values a case matches by shape, not by equality
EMPTY = "<empty>"  # None, {} or an empty collection where that means "nothing"
NONEMPTY = "<non-empty>"  # a non-empty dict or collection


@dataclass(frozen=True)
class Case:
    """Some values of one option and what they mean today."""

    values: tuple[Any, ...]  # canonical values (see ``canonical``); () matches every other value
    shown: str  # the values as the catalog's tables show them
    kind: Kind
    runtime: str  # what compat.export does with them
    plain: str = ""  # kind "plain": what plain torch writes instead (``optimize=False``)
    rewrite: str = ""  # what compat.migrate does, when not what the kind says


@dataclass(frozen=True)
class OptionFacts:
    """One legacy option of ``torch.onnx.export``: its catalog code and its cases."""

    name: str
    code: str
    cases: tuple[Case, ...]
    unknown: Kind  # what a value unknown before run time counts as (the rewriter's non-literals)
    enum: tuple[str, ...] = ()  # member names, when the option takes a torch enum
    default: Any = None  # the canonical value of None


@dataclass(frozen=True)
class Disposition:
    """What one value of one legacy option means today."""

    option: str
    code: str
    kind: Kind
    case: Case | None  # None: a value unknown before run time

    def reason(self, shown: str) -> str:
        """Why this value pins a route, for ``option=shown`` (shown as the caller has it)."""
        what = f"{self.option}={shown}"
        if self.kind == "torchscript":
            return f"{what} is honoured only by the TorchScript exporter"
        if self.kind == "shim":
            return (f"{what} is ignored by torch's torch.export exporter (only compat.export "
                    "translates it there)")
        if self.kind == "lost":
            return f"{what} is honoured by no exporter of current torch"
        return f"{what}: {KINDS[self.kind]}"


_E = Case
OPTIONS: tuple[OptionFacts, ...] = (
    OptionFacts("dynamic_axes", "ONX101", (
        _E((EMPTY,), "`None`, `{}`", "dropped", "nothing to translate"),
        _E((), "a dict", "plain",
           "translated to `dynamic_shapes` keyed by forward() parameter names (axis names kept "
           "as dim_params, size-0/1 examples handled)", plain="dynamic_shapes=",
           rewrite="a literal becomes `dynamic_shapes`; another value pins `dynamo=False` with a "
                   "TODO"),
    ), unknown="plain"),
    OptionFacts("training", "ONX102", (
        _E(("EVAL",), "`EVAL` (`False`, `None`)", "plain",
           "the model is captured in eval mode (its own mode restored after)",
           plain="model.eval() before the export",
           rewrite="dropped where the model is evidently in eval mode, else replaced by "
                   "`model.eval()` before the call (unsafe)"),
        _E(("PRESERVE",), "`PRESERVE`", "shim",
           "the model is captured in its own mode (in train mode: BatchNorm with batch "
           "statistics)",
           rewrite="where a ledger shows the shim's torch.export route: dropped, and the shim's "
                   "batch-statistics translations passed as `custom_translation_table=` from "
                   "the generated module `<module>_onnx.py`; else (no ledger, a call passing its "
                   "own table or `**kwargs`) pins `dynamo=False`"),
        _E(("TRAINING",), "`TRAINING` (`True`)", "shim",
           "the model is captured in train mode (restored after): BatchNorm with batch "
           "statistics, Dropout with training_mode=True",
           rewrite="where a ledger shows the shim's torch.export route: dropped, the call "
                   "exported inside `with <module>_onnx.train_mode(model):` (train mode for the "
                   "capture, every mode and buffer restored after) with the shim's "
                   "batch-statistics translations as `custom_translation_table=` from the "
                   "generated module `<module>_onnx.py`; else (no ledger, a model or call this "
                   "tool cannot wrap, a call passing its own table) pins `dynamo=False`"),
    ), unknown="shim", enum=TRAINING_MODES, default="EVAL"),
    OptionFacts("operator_export_type", "ONX103", (
        _E(("ONNX",), "`ONNX`", "dropped", "what the torch.export route does"),
        _E(("ONNX_ATEN_FALLBACK", "ONNX_FALLTHROUGH"), "`ONNX_ATEN_FALLBACK`, `ONNX_FALLTHROUGH`",
           "shim",
           "every operator with an ONNX translation is translated; one without is written as the "
           "TorchScript exporter wrote it (an `org.pytorch.aten` `ATen` node with `operator` and "
           "`overload_name`, or a fall-through node in the operator's domain), named in the "
           "ledger"),
        _E(("ONNX_ATEN",), "`ONNX_ATEN`", "shim",
           "every aten operator is written as an `org.pytorch.aten` `ATen` node (`operator`, "
           "`overload_name`), as the TorchScript exporter wrote it, each named in the ledger"),
    ), unknown="shim", enum=OPERATOR_EXPORT_TYPES_1X, default="ONNX"),
    OptionFacts("do_constant_folding", "ONX104", (
        _E((True,), "`True`", "dropped", "the torch.export route always folds (`optimize=True`)"),
        _E((False,), "`False`", "plain",
           "exported on the torch.export route with `optimize=False`: parameters stay "
           "un-folded initializers under their own names", plain="optimize=False",
           rewrite="becomes `optimize=False` (dropped when `optimize=` is given)"),
    ), unknown="plain"),
    OptionFacts("custom_opsets", "ONX105", (
        _E((EMPTY,), "`None`, `{}`", "dropped", "nothing to set"),
        _E((), "a non-empty dict", "shim",
           "the versions become the custom domains' opset imports",
           rewrite="pins `dynamo=False`, or `compat.export` where custom symbolics are migrated "
                   "or a ledger shows the TorchScript route failing"),
    ), unknown="shim"),
    OptionFacts("export_modules_as_functions", "ONX106", (
        _E((False, EMPTY), "`False`", "dropped", "what the torch.export route does"),
        _E((), "`True`, a set of module classes", "torchscript",
           "routed to the TorchScript exporter, which honours it"),
    ), unknown="torchscript", default=False),
    OptionFacts("autograd_inlining", "ONX107", (
        _E((True,), "`True`", "dropped", "what the torch.export route does"),
        _E((), "`False`", "torchscript", "routed to the TorchScript exporter, which honours it"),
    ), unknown="torchscript", default=True),
    OptionFacts("example_outputs", "ONX201", (
        _E((), "any value", "dropped", "dropped with a warning (tracing infers the outputs)",
           rewrite="dropped (a ScriptModule in the file pins `dynamo=False`)"),
    ), unknown="dropped"),
    OptionFacts("use_external_data_format", "ONX202", (
        _E((True,), "`True`", "plain", "the weights are saved to an external data file `<f>.data`",
           plain="external_data=True",
           rewrite="becomes `external_data=True`; with `dynamo=False` (which ignores "
                   "`external_data=`) an `onnx.save_model(..., save_as_external_data=True)` "
                   "after the export moves the weights to `<f>.data`"),
        _E((), "`False`, `None`", "plain", "the weights stay in the model file",
           plain="external_data=False",
           rewrite="becomes `external_data=` with the same value (dropped with `dynamo=False`)"),
    ), unknown="plain"),
    OptionFacts("enable_onnx_checker", "ONX203", (
        _E((True,), "`True`", "plain",
           "`onnx.checker.check_model` runs after the export (a rejected model is a failed "
           "export)", plain="onnx.checker.check_model(f) after the export",
           rewrite="an `onnx.checker.check_model(f)` call after the export (unsafe)"),
        _E((False, EMPTY), "`False`, `None`", "dropped", "dropped"),
    ), unknown="plain"),
    OptionFacts("strip_doc_string", "ONX204", (
        _E((), "any value", "dropped",
           "dropped; with `verbose=True` the doc strings are stripped unless it is `False`, as "
           "torch 1.x did (doc strings never change the model)"),
    ), unknown="dropped"),
    OptionFacts("_retain_param_name", "ONX205", (
        _E((), "any value", "dropped", "dropped (parameter names are always kept)"),
    ), unknown="dropped"),
    OptionFacts("fallback", "ONX207", (
        _E((), "any value", "dropped",
           "`True` is the auto route (torch.export first, then TorchScript), as torch 2.5-2.10 "
           "took it on every torch; beside `dynamo=False`, the TorchScript route alone",
           rewrite="dropped; ONX001 pins the route (from a ledger, or unsafe without one)"),
    ), unknown="dropped"),
    OptionFacts("aten", "ONX208", (
        _E((True,), "`True`", "shim",
           "`operator_export_type=ONNX_ATEN`: every aten operator written as an `ATen` node",
           rewrite="becomes `operator_export_type=OperatorExportTypes.ONNX_ATEN` and pins "
                   "`dynamo=False`"),
        _E((False, EMPTY), "`False`", "dropped", "dropped"),
    ), unknown="shim"),
    OptionFacts("export_raw_ir", "ONX208", (
        _E((False, EMPTY), "`False`", "dropped", "dropped"),
        _E((), "`True`", "lost", "dropped with a warning (no exporter of current torch writes "
                                 "raw IR)"),
    ), unknown="lost"),
    OptionFacts("export_type", "ONX208", (
        _E(("PROTOBUF_FILE", EMPTY), "`ExportTypes.PROTOBUF_FILE`", "dropped", "dropped"),
        _E((), "other `ExportTypes`", "lost",
           "dropped with a warning (current torch writes only a protobuf file)"),
    ), unknown="lost",
       enum=("PROTOBUF_FILE", "ZIP_ARCHIVE", "COMPRESSED_ZIP_ARCHIVE", "DIRECTORY")),
)
BY_OPTION: dict[str, OptionFacts] = {o.name: o for o in OPTIONS}
#: keyword -> catalog code for every legacy keyword argument of torch.onnx.export
OPTION_CODES: dict[str, str] = {o.name: o.code for o in OPTIONS}
#: option words too common to mean legacy export code on their own (``training=`` of a data
#: loader, ``fallback=`` of a config): they count only on a call already known to export
GENERIC_OPTIONS = frozenset({"training", "fallback", "aten", "export_raw_ir", "export_type"})
#: the legacy options current torch still takes, which its torch.export exporter ignores
IGNORED_BY_TORCH_EXPORT = tuple(o.name for o in OPTIONS if o.name in CURRENT_KEYWORDS)


def canonical(option: str, value: Any) -> Any:
    """``value`` as the cases of ``option`` name it: enum members by name (``"TRAINING"``),
    torch 1.x bools of ``training``, ``EMPTY``/``NONEMPTY`` for dicts and collections,
    ``UNKNOWN`` for what cannot be told."""
    facts = BY_OPTION[option]
    if value is UNKNOWN:
        return UNKNOWN
    if value is None:
        return facts.default if facts.default is not None else EMPTY
    if facts.enum:
        if option == "training" and isinstance(value, bool):  # torch 1.x: training=True/False
            return "TRAINING" if value else "EVAL"
        name = value if isinstance(value, str) else getattr(value, "name", None)
        return name if isinstance(name, str) and name in facts.enum else UNKNOWN
    if isinstance(value, bool):
        return value
    if isinstance(value, (Mapping, Collection)) and not isinstance(value, (str, bytes)):
        return NONEMPTY if len(value) else EMPTY
    return UNKNOWN


def disposition(option: str, value: Any) -> Disposition | None:
    """What ``option=value`` means today; None when ``option`` is not a legacy option."""
    facts = BY_OPTION.get(option)
    if facts is None:
        return None
    value = canonical(option, value)
    if value is UNKNOWN:
        if len({c.kind for c in facts.cases}) == 1:  # every value means the same
            return Disposition(option, facts.code, facts.cases[0].kind, facts.cases[0])
        return Disposition(option, facts.code, facts.unknown, None)
    for case in facts.cases:
        if value in case.values:
            return Disposition(option, facts.code, case.kind, case)
    other = next((c for c in facts.cases if not c.values), None)
    if other is None:  # every value is listed: a canonical value none matches is unknown
        return Disposition(option, facts.code, facts.unknown, None)
    return Disposition(option, facts.code, other.kind, other)


def needs_torchscript(option: str, value: Any, shown: str | None = None) -> str | None:
    """The reason ``option=value`` needs the TorchScript exporter (only it honours that
    value), or None. ``shown`` is the value as the reason spells it (default: its name)."""
    found = disposition(option, value)
    if found is None or found.kind != "torchscript":
        return None
    return found.reason(shown if shown is not None else show(option, value))


def show(option: str, value: Any) -> str:
    """A short spelling of a runtime value: enum members by name, other values by repr
    (collections of classes by their names)."""
    value = canonical(option, value) if BY_OPTION[option].enum else value
    if isinstance(value, (set, frozenset, list, tuple)):
        names = sorted(getattr(v, "__name__", repr(v)) for v in value)
        return "{" + ", ".join(names) + "}"
    return value if isinstance(value, str) and BY_OPTION[option].enum else repr(value)


#: why a model needs the TorchScript exporter, whatever its options (runtime code ONX001)
SCRIPT_MODEL_REASON = "ScriptModule/ScriptFunction models export only on the TorchScript route"


# --- the catalog's texts --------------------------------------------------------------------------

def rewrite_of(case: Case) -> str:
    """What compat.migrate does with the values of ``case``."""
    if case.rewrite:
        return case.rewrite
    if case.kind == "plain":
        return f"becomes `{case.plain}`"
    return _REWRITE[case.kind]


def runtime_text(code: str) -> str:
    """The catalog's "at run time" text of an option entry, value by value."""
    return _by_value(code, lambda o, c: c.runtime)


def rewrite_text(code: str) -> str:
    """The catalog's "compat.migrate" text of an option entry, value by value."""
    return _by_value(code, lambda o, c: rewrite_of(c))


def _by_value(code: str, text: Callable[[OptionFacts, Case], str]) -> str:
    options = [o for o in OPTIONS if o.code == code]
    several = len(options) > 1
    parts = []
    for o in options:
        for c in o.cases:
            shown = f"`{o.name}=` {c.shown}" if several else c.shown
            parts.append(f"{shown}: {text(o, c)}")
    return "; ".join(parts)


def rows() -> list[tuple[str, str, str, str, str, str]]:
    """(code, option, values, kind, compat.export, compat.migrate) for every case."""
    return [(o.code, o.name, c.shown, c.kind, c.runtime, rewrite_of(c))
            for o in OPTIONS for c in o.cases]
