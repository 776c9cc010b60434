"""The catalog: one entry per legacy option, call form or API of ``torch.onnx``.

Runtime warnings, strict-mode errors, rewriter findings, ``python -m compat catalog``, the
README's rule table and the rule docs are all generated from here; the facts about the export
call's arguments (positional layouts, keyword sets, what each option value means today and
``needs_torchscript``) are in ``compat.catalog_facts``, which the option entries' texts come
from. This module imports nothing heavy (no torch): the rewriter and lint jobs use it where
torch is not installed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from compat import catalog_facts as facts
from compat.commands import MIGRATE, RULE

Applicability = Literal["safe", "unsafe", "none"]

#: the lowest opset torch's torch.export-based exporter builds (torch 2.9-2.13): it converts down
#: from there, and silently stays at this opset when an operator has no version adapter
DYNAMO_MIN_OPSET = 18
#: transformers' own cache pytree registration, which the torch.export route applies for one export
#: (dynamo/hf_caches.py) and plain torch does not: migrate calls it before such call sites
HF_CACHE_REGISTRATION = ("transformers.exporters.exporter_dynamo", "register_cache_pytrees_for_model")
#: the torch.export route's ledger note where it attached ``input_names`` to other forward()
#: parameters than plain torch would: plain torch names the graph inputs in the call's order (a
#: trailing dict of keyword inputs in its own order), the shim in forward()'s (the TorchScript
#: exporter's). Migrate puts the keyword dict in forward()'s order before such call sites.
INPUT_BINDING = "input_names bound in forward() parameter order"
#: the torch.export route's ledger note on ``dynamic_axes`` keys that name graph inputs which are
#: not forward() parameters holding one tensor (``past_key_values.0.key``): a ``dynamic_shapes``
#: keyed by those names is not keyed by parameters
NOT_PARAMETERS = "input-name keys mapped to forward() parameters for dynamic_shapes"
#: the same note as ledgers before 0.1 worded it (it alarmed users of a normal HF call)
NOT_PARAMETERS_OLD = "keys that are not forward() parameters"
#: the torch.export route's ledger note where it tiled a size-1 example on a dynamic axis before
#: capture (followed by the size, then ``for capture on [<input>[<axis>] (<name>), ...]``): plain
#: torch before 2.10 exports such an axis static (``torch_apis.SIZE_ONE_AXIS_DYNAMIC``)
SIZE_ONE_TILED = "size-1 examples tiled to"
#: the torch.export route's failure reason where auto tried the TorchScript route before its draft
#: capture (compat/routing/dispatch.py): a TorchScript export then says nothing of whether plain
#: torch's torch.export exporter serves the call (migrate asks for a ``--route dynamo`` record)
DRAFT_DEFERRED = "draft capture deferred"

#: what the torch.export route records (a translation's option and the start of its action) where
#: it exports a model plain ``torch.onnx.export(dynamo=True)`` would export differently, with the
#: reason migrate gives for keeping such a call site on the shim
SHIM_ONLY_TRANSLATIONS: tuple[tuple[str, str, str], ...] = (
    ("args", "graph inputs the graph does not use dropped",
     "the shim dropped graph inputs the graph does not use, as the TorchScript exporter did"),
    ("args", "Python int inputs",
     "the shim made Python int arguments dynamic int64 inputs, as the TorchScript exporter did"),
    ("torch.cross", "torch.cross without dim",
     "the shim computes torch.cross without dim as torch does (torch's ONNX translation differs)"),
    ("model", "eager-quantized modules",
     "the shim exported eager-quantized modules in QDQ form (plain torch cannot capture them)"),
    ("model", "quantized inputs",
     "the shim fed quantized inputs as value, scale and zero point"),
    ("dynamic_axes", "RNN layers loop over the sequence",
     "the shim kept the RNN's sequence axis dynamic (plain torch may bake the example length)"),
    ("model", "packed sequences exported as the TorchScript exporter wrote them",
     "the shim exported packed sequences as ONNX RNN nodes with sequence_lens (plain torch cannot capture them)"),
    ("model", "captured under torch.no_grad()",
     "the shim captured the model without autograd (plain torch's ONNX conversion fails with it on)"),
    ("model", "operator overloads re-matched by schema",
     ("the shim re-matched operator overloads after type promotion (torch 2.9 to 2.12's ONNX conversion "
      "fails on a parameter times a Python scalar)")),
    ("model", "RNN weights read from the module while exporting",
     "the shim let RNNs read their weights live (torch 2.9's export fails on their re-flattening)"),
    ("model", "LSTM layers decomposed into their cell operations",
     "the shim decomposed LSTMs into their cells (torch 2.9 to 2.12's ONNX LSTM node fails shape inference)"),
    ("model", "operators this torch cannot convert decomposed as later torches do",
     ("the shim decomposed operators this torch has no decomposition for (aten.hann_window.periodic "
      "before torch 2.12)")),
)



@dataclass(frozen=True)
class Entry:
    """One legacy usage: what changed, what the shim does, what the rewriter does."""

    code: str
    name: str  # the option / API as written in user code
    summary: str  # one line: what the legacy usage is
    changed: str  # what changed, in which torch version
    runtime: str  # what `compat.export` does with it at run time
    replacement: str  # the modern spelling (a noun phrase: "Replace with: ...")
    rewrite: str  # what `python -m compat.migrate` does
    fix: Applicability = "none"
    deprecated_in: str | None = None  # torch version
    removed_in: str | None = None  # torch version
    # Identifiers the rewriter's byte prefilter looks for (keywords, attribute names).
    tokens: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        """The rule family, e.g. ``ONX1`` for ``ONX104``."""
        return self.code[:4]

    def message(self, path: str = "PATH", select: str | None = None,
                applicability: Applicability | None = None) -> str:
        """The warning / finding text: what changed, the replacement and ``hint``."""
        return (f"{self.code} {self.summary}: {self.changed}. Replace with: {self.replacement}. "
                f"{self.hint(path, select, applicability)}")

    def hint(self, path: str = "PATH", select: str | None = None,
             applicability: Applicability | None = None) -> str:
        """What to run on ``path``: a ``--fix`` command that selects ``select`` (the rewriter
        knows a site's exact needs; default ``fix_select()``), with ``--unsafe-fixes`` when the
        fix (``applicability``, default the entry's) is unsafe; or, with no fix, what to do."""
        fix = applicability or self.fix
        if fix == "none":
            return f"{NO_FIX}change the code by hand (`{RULE} {self.code}` shows how)."
        where = shlex.quote(path) if path != "PATH" else path
        unsafe = " --unsafe-fixes" if fix == "unsafe" else ""
        codes = select or self.fix_select()
        return f"{MIGRATE_WITH}{MIGRATE} --fix{unsafe} --select {codes} {where}"

    def short_message(self, subject: str = "", detail: str = "") -> str:
        """The one-line warning: code, what was used (``subject``; default the entry's option or
        API) and the short fix, then ``detail`` in brackets; ``message`` is the long text."""
        subject = subject or (f"{self.name}=" if self.summary.startswith(f"`{self.name}=`")
                              else self.name)
        text = f"{self.code} {subject}: {SHORT_FIXES[self.code]}"
        return f"{text} [{detail}]" if detail else text

    def fix_select(self, present: Iterable[str] | None = None) -> str:
        """``--select`` codes under which this entry's fix applies: its own code, plus the codes
        whose edits the fix may include (ONX1/ONX2 fixes write ONX001's ``dynamo=`` and use
        ONX206's keywords for positional options; the rewriter never makes an unselected
        finding's edit). ``present``: the codes found at the call (a call without positional
        options needs no ONX206)."""
        needs = [c for c in _FIX_NEEDS.get(self.family, ()) if c != self.code
                 and (present is None or c in present)]
        return ",".join((*needs, self.code))


#: the codes a family's fixes include edits of (see ``Entry.fix_select``)
_FIX_NEEDS = {"ONX1": ("ONX001", "ONX206"), "ONX2": ("ONX001", "ONX206")}
#: how a message's last sentence starts: a command that fixes it, or what to do without one
MIGRATE_WITH = "Migrate with: "
NO_FIX = "No automatic fix: "

_E = Entry

ENTRIES: tuple[Entry, ...] = (
    _E(
        "ONX001", "torch.onnx.export", "export call relies on the default exporter (no `dynamo=`)",
        "the default exporter changed to the torch.export-based one in torch 2.9",
        "routes by `route=` / TORCH_ONNX_COMPAT_ROUTE / pyproject (auto: torch.export first, "
        "TorchScript on failure or for what only it honours)",
        "an explicit `dynamo=True` (or `dynamo=False` where the model needs the TorchScript exporter)",
        "adds `dynamo=True` (with `external_data=False` and `dynamic_shapes` from literal "
        "`dynamic_axes`) or `dynamo=False` per the options and ledger evidence",
        "safe", deprecated_in="2.9", tokens=("export",),
    ),
    _E(
        "ONX101", "dynamic_axes", "`dynamic_axes=`",
        "the torch.export exporter wants `dynamic_shapes` keyed by forward() parameter names; its "
        "own conversion of `dynamic_axes` loses axis names and specialises size-1 examples",
        facts.runtime_text("ONX101"),
        "`dynamic_shapes` keyed by forward() parameter names, with the axis names kept "
        "(`dynamic_shapes={\"x\": {0: \"batch\"}}`)",
        facts.rewrite_text("ONX101"), "safe", deprecated_in="2.9", tokens=("dynamic_axes",),
    ),
    _E(
        "ONX102", "training", "`training=`",
        "ignored by the torch.export exporter since torch 2.9 (eval-mode BatchNorm is exported even "
        "for TRAINING)",
        facts.runtime_text("ONX102"),
        "`model.eval()` before the export for `EVAL`; for `TRAINING`, `model.train()` alone does "
        "not keep it (BatchNorm is exported with its running statistics): export in train mode "
        "with a `custom_translation_table=` of the batch-statistics BatchNorm translations "
        "`compat.export` uses (compat.migrate generates them from a ledger), or keep "
        "`dynamo=False`",
        facts.rewrite_text("ONX102"), "unsafe", deprecated_in="2.9", tokens=("training",),
    ),
    _E(
        "ONX103", "operator_export_type", "`operator_export_type=`",
        "ignored by the torch.export exporter since torch 2.9",
        facts.runtime_text("ONX103"),
        "`custom_translation_table=` for ops without an ONNX translation (`dynamo=False` for "
        "ATen nodes)",
        facts.rewrite_text("ONX103"), "safe", deprecated_in="2.9", tokens=("operator_export_type",),
    ),
    _E(
        "ONX104", "do_constant_folding", "`do_constant_folding=`",
        "ignored by the torch.export exporter since torch 2.9 (it always folds)",
        facts.runtime_text("ONX104"),
        "`optimize=False` on `torch.onnx.export(..., dynamo=True)` for `False`; nothing for `True`",
        facts.rewrite_text("ONX104"), "safe", deprecated_in="2.9", tokens=("do_constant_folding",),
    ),
    _E(
        "ONX105", "custom_opsets", "`custom_opsets=`",
        "ignored by the torch.export exporter since torch 2.9",
        facts.runtime_text("ONX105"),
        "`custom_translation_table=` with onnxscript functions of the custom domain's opset",
        facts.rewrite_text("ONX105"), "safe", deprecated_in="2.9", tokens=("custom_opsets",),
    ),
    _E(
        "ONX106", "export_modules_as_functions", "`export_modules_as_functions=`",
        "ignored by the torch.export exporter since torch 2.9",
        facts.runtime_text("ONX106"),
        "`dynamo=False` (the torch.export exporter has no equivalent)",
        facts.rewrite_text("ONX106"), "safe", deprecated_in="2.9",
        tokens=("export_modules_as_functions",),
    ),
    _E(
        "ONX107", "autograd_inlining", "`autograd_inlining=`",
        "ignored by the torch.export exporter since torch 2.9",
        facts.runtime_text("ONX107"),
        "nothing for `True` (torch.export always traces through autograd.Functions); "
        "`dynamo=False` for `False`",
        facts.rewrite_text("ONX107"), "safe", deprecated_in="2.9", tokens=("autograd_inlining",),
    ),
    _E(
        "ONX201", "example_outputs", "`example_outputs=`",
        "removed in torch 1.10 (tracing infers outputs)", facts.runtime_text("ONX201"),
        "nothing (drop the argument)", facts.rewrite_text("ONX201"),
        "safe", deprecated_in="1.8", removed_in="1.10", tokens=("example_outputs",),
    ),
    _E(
        "ONX202", "use_external_data_format", "`use_external_data_format=`",
        "removed in torch 2.0", facts.runtime_text("ONX202"),
        "`external_data=` with the same value, on `torch.onnx.export(..., dynamo=True)`",
        facts.rewrite_text("ONX202"),
        "safe", deprecated_in="1.13", removed_in="2.0", tokens=("use_external_data_format",),
    ),
    _E(
        "ONX203", "enable_onnx_checker", "`enable_onnx_checker=`",
        "removed in torch 1.11", facts.runtime_text("ONX203"),
        "`onnx.checker.check_model(f)` after the export (for `True`)",
        facts.rewrite_text("ONX203"),
        "unsafe", deprecated_in="1.10", removed_in="1.11", tokens=("enable_onnx_checker",),
    ),
    _E(
        "ONX204", "strip_doc_string", "`strip_doc_string=`",
        "removed in torch 1.13", facts.runtime_text("ONX204"),
        "nothing (drop the argument: doc strings never change the model)",
        facts.rewrite_text("ONX204"),
        "safe", deprecated_in="1.11", removed_in="1.13", tokens=("strip_doc_string",),
    ),
    _E(
        "ONX205", "_retain_param_name", "`_retain_param_name=`",
        "removed in torch 1.13 (parameter names are always retained)",
        facts.runtime_text("ONX205"), "nothing (drop the argument)", facts.rewrite_text("ONX205"),
        "safe", deprecated_in="1.11", removed_in="1.13", tokens=("_retain_param_name",),
    ),
    _E(
        "ONX206", "positional options", "options passed positionally after `f`",
        "everything after `f` is keyword-only since torch 2.5",
        "mapped by the torch 1.3-1.9, 1.10 or 1.11-2.4 positional layout", "keyword arguments",
        "turns positional options into keywords", "safe", deprecated_in="2.5", removed_in="2.5",
    ),
    _E(
        "ONX207", "fallback", "`fallback=`", "removed in torch 2.11",
        facts.runtime_text("ONX207"),
        "`compat.export(..., route='auto')` or an explicit `dynamo=`",
        facts.rewrite_text("ONX207"), "unsafe",
        deprecated_in="2.9", removed_in="2.11", tokens=("fallback",),
    ),
    _E(
        "ONX208", "aten / export_raw_ir / export_type", "other torch 1.x-only options",
        "removed in torch 1.10-1.12", facts.runtime_text("ONX208"),
        "`operator_export_type=OperatorExportTypes.ONNX_ATEN` with `dynamo=False` for "
        "`aten=True`; nothing for the others",
        facts.rewrite_text("ONX208"),
        "safe", removed_in="1.12", tokens=("aten", "export_raw_ir", "export_type"),
    ),
    _E(
        "ONX301", "torch.onnx.register_custom_op_symbolic",
        "`torch.onnx.register_custom_op_symbolic` / `unregister_custom_op_symbolic`",
        "the torch.export exporter ignores TorchScript symbolics (torch 2.9)",
        "registrations also feed the torch.export route, run on the shim's own graph context (no TorchScript needed)",
        "`compat.register_custom_op_symbolic` or `custom_translation_table=` with onnxscript",
        "a symbolic it translates stays registered for the TorchScript exporter (the export call "
        "uses its translation, ONX001); any other switches to `compat.register_custom_op_symbolic`",
        "safe", deprecated_in="2.9",
        tokens=("register_custom_op_symbolic", "unregister_custom_op_symbolic"),
    ),
    _E(
        "ONX302", "autograd.Function.symbolic", "`torch.autograd.Function` with a `symbolic` staticmethod",
        "the torch.export exporter traces through autograd.Functions (torch 2.9)",
        "the Function becomes an opaque op translated by its own symbolic",
        "`torch.onnx.ops.symbolic(...)` inside forward, or `compat.export`",
        "a Function with a self-contained forward becomes a `torch.library` op with its "
        "symbolic's translation in `<module>_onnx.py` (ONX001 uses it); otherwise the export call "
        "goes through `compat.export`", "none", deprecated_in="2.9",
        tokens=("symbolic",),
    ),
    _E(
        "ONX303", "torch.onnx.symbolic_helper", "imports of TorchScript-exporter internals",
        "private and deprecated with the TorchScript exporter (torch 2.9)",
        "work while the TorchScript exporter exists", "public `torch.onnx` APIs",
        "reports it", "none", deprecated_in="2.9",
        tokens=("symbolic_helper", "symbolic_opset", "_model_to_graph", "_internal.jit_utils"),
    ),
    _E(
        "ONX304", "symbolic without a translation",
        "a custom symbolic whose source has no onnxscript translation",
        "torch's new exporter takes onnxscript functions in `custom_translation_table`, and "
        "a symbolic that branches in Python on a graph value's data, reads the TorchScript "
        "graph (`.node()`, `g.at`), returns `None` for an output or calls a TorchScript "
        "exporter helper without an equivalent has no traced one (a value's shape and dtype, "
        "`_is_value`, `setType` do: they are read from the traced value)",
        "applies the symbolic on its own graph context, or exports through the TorchScript "
        "exporter",
        "an onnxscript function in `custom_translation_table=` written by hand",
        "translates every other symbolic into `<module>_onnx.py`; this call keeps "
        "`compat.export` with a comment naming the blocking line",
        "none", deprecated_in="2.9", tokens=("symbolic",),
    ),
    _E(
        "ONX401", "torch.onnx.dynamo_export", "`torch.onnx.dynamo_export`",
        "removed in torch 2.9", "re-provided by `compat.patch()` on the torch.export route",
        "`torch.onnx.export(model, args, kwargs=kwargs, dynamo=True)`",
        "rewritten to `torch.onnx.export(..., dynamo=True)`", "safe",
        deprecated_in="2.6", removed_in="2.9", tokens=("dynamo_export",),
    ),
    _E(
        "ONX402", "torch.onnx.ExportOptions", "`torch.onnx.ExportOptions`",
        "removed in torch 2.9", "re-provided by `compat.patch()` (dynamic_shapes only)",
        "`torch.onnx.export(..., dynamo=True, dynamic_shapes=...)`",
        "reports it", "none", deprecated_in="2.6", removed_in="2.9", tokens=("ExportOptions",),
    ),
    _E(
        "ONX403", "torch.onnx.utils.export", "`torch.onnx.utils.export` / `torch.onnx._export`",
        "private aliases, removed with the TorchScript exporter", "same as `torch.onnx.export`",
        "`torch.onnx.export`", "rewritten to `torch.onnx.export`", "safe",
        deprecated_in="2.9", tokens=("_export", "utils"),
    ),
    _E(
        "ONX404", "torch.onnx.select_model_mode_for_export",
        "`torch.onnx.select_model_mode_for_export`",
        "deprecated in torch 2.7, absent from the torch.export exporter",
        "re-provided by `compat.patch()`", "`model.eval()` / `model.train()` around the export",
        "rewritten to explicit mode handling", "unsafe",
        deprecated_in="2.7", tokens=("select_model_mode_for_export",),
    ),
    _E(
        "ONX501", "torch version branch",
        "a branch only torch older than the supported minimum reaches (`if is_torch_less_than_1_11:`, "
        "`if torch.__version__ < \"1.11\":`)",
        "it never runs on the torch the code now needs (`dynamo=` needs torch 2.5; see "
        "`--target-torch`), and its export call uses options that torch removed",
        "nothing: the branch is not taken on current torch",
        "the live branch alone (delete the old-torch branch)",
        "reports the branch as dead code to delete and leaves its export call alone; the live "
        "branch is migrated",
        "none",
    ),
    _E(
        "ONX002", "opset_version", "`opset_version=` that no export route could honour",
        "the torch.export exporter (the default since torch 2.9) builds opset 18 and converts "
        "down; an operator without a down-conversion keeps the model above the requested opset",
        "converted down where possible, else built by the TorchScript exporter; when neither "
        "can, the torch.export route's model is written at the lowest opset it reached, with "
        "this warning and the ledger's `opset_written` (strict mode: the export fails)",
        "`opset_version=18` or higher, or a runtime that reads the opset written",
        "none: the ONX001 fix pins `dynamo=False` for opsets below 18", "none",
    ),
    _E(
        "ONX003", "data-dependent branch", "a branch baked at the example's values",
        "Python control flow on tensor values (`if x.mean() > 0:`, `if boxes.numel() == 0:`, "
        "`assert (t >= 0).all()`) stops torch.export, where the TorchScript tracer exported the "
        "branch the example took, with a TracerWarning",
        "captured with torch.export.draft_export, which keeps the branch the example took: each "
        "place is named in this warning, the ledger's `baked` and `compat report`; the model "
        "computes that branch for every input",
        "`torch.cond(pred, true_fn, false_fn, operands)` for a branch both ways must keep, "
        "`torch._check(...)` for an assumption",
        "none: found at run time only; the rewriter does not report it", "none",
    ),
)

BY_CODE: dict[str, Entry] = {e.code: e for e in ENTRIES}

#: keyword -> code for every legacy keyword argument of torch.onnx.export (the facts' table)
OPTION_CODES: dict[str, str] = facts.OPTION_CODES

_CODE_RE = re.compile(r"^ONX\d{0,3}$")


def get(code: str) -> Entry:
    """The entry of ``code`` (``KeyError`` if unknown)."""
    return BY_CODE[code]


def is_code_prefix(text: str) -> bool:
    """True for ``ONX``, ``ONX1``, ``ONX10``, ``ONX104`` (ruff-style prefix selection)."""
    return bool(_CODE_RE.match(text))


def select(select: Iterable[str] | None = None, ignore: Iterable[str] = ()) -> list[Entry]:
    """Entries matching any ``select`` prefix (all when None) and no ``ignore`` prefix."""
    sel = tuple(select) if select is not None else ("ONX",)
    ign = tuple(ignore)
    for prefix in (*sel, *ign):
        if not is_code_prefix(prefix):
            raise ValueError(f"not a rule code or prefix: {prefix!r}")
    return [
        e for e in ENTRIES
        if any(e.code.startswith(p) for p in sel) and not any(e.code.startswith(p) for p in ign)
    ]


def prefilter_tokens() -> tuple[bytes, ...]:
    """Byte strings whose absence proves a file holds no legacy usage (the rewriter's prefilter)."""
    # every rule on an option of an export call also needs the call, which names "onnx" (the
    # module or an import from it); "symbolic" stays: an autograd.Function's symbolic
    # staticmethod (ONX302) often sits in a file that never names onnx (mmcv's ops)
    toks = {"onnx"}
    for e in ENTRIES:
        toks.update(t for t in e.tokens
                    if len(t) > 6 and t not in facts.GENERIC_OPTIONS and t != "_export")
    toks.add("dynamic_axes")
    return tuple(sorted(t.encode() for t in toks))


def iter_rows() -> Iterator[tuple[str, ...]]:
    """Rows of the public rule table: code, usage, changed, runtime, rewrite, fix."""
    for e in ENTRIES:
        yield (e.code, e.summary, e.changed, e.runtime, e.rewrite, e.fix)


def to_markdown() -> str:
    """The rule table as markdown (README / docs)."""
    head = ("code", "legacy usage", "what changed", "compat.export at run time", "compat.migrate", "fix")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in iter_rows():
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines) + "\n"


def to_text() -> str:
    """The catalog as plain text for ``python -m compat catalog``."""
    out = []
    for e in ENTRIES:
        ver = ", ".join(
            p for p in (
                f"deprecated in torch {e.deprecated_in}" if e.deprecated_in else "",
                f"removed in torch {e.removed_in}" if e.removed_in else "",
            ) if p
        )
        out.append(f"{e.code}  {e.summary}" + (f"  [{ver}]" if ver else ""))
        out.append(f"    changed:      {e.changed}")
        out.append(f"    at run time:  {e.runtime}")
        out.append(f"    replace with: {e.replacement}")
        out.append(f"    rewrite:      {e.rewrite} (fix: {e.fix})")
    return "\n".join(out) + "\n"


#: code -> (legacy code, what ``EXAMPLE_FIX`` makes of it; None where the rule only reports); ``compat rule CODE`` shows them, a test runs the rewriter
#: on each to keep them true
EXAMPLES: dict[str, tuple[str, str | None]] = {
    "ONX001": ('torch.onnx.export(model, (x,), "model.onnx")',
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)'),
    "ONX101": (('torch.onnx.export(model, (x,), "model.onnx", input_names=["x"],\n'
               '                  dynamic_axes={"x": {0: "batch"}})'),
               ('torch.onnx.export(model, (x,), "model.onnx", input_names=["x"],\n'
               '                  dynamic_shapes=({0: "batch"},), dynamo=True, '
               'external_data=False)')),
    "ONX102": (('model.eval()\n'
               'torch.onnx.export(model, (x,), "model.onnx", training=torch.onnx.TrainingMode.EVAL)'),
               ('model.eval()\n'
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)')),
    "ONX103": (('torch.onnx.export(model, (x,), "model.onnx",\n'
               '                  operator_export_type=torch.onnx.OperatorExportTypes.ONNX)'),
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)'),
    "ONX104": ('torch.onnx.export(model, (x,), "model.onnx", do_constant_folding=False)',
               ('torch.onnx.export(model, (x,), "model.onnx", optimize=False, dynamo=True, '
                'external_data=False)')),
    "ONX105": ('torch.onnx.export(model, (x,), "model.onnx", custom_opsets={"mydomain": 1})',
               ('# compat.migrate: dynamo=False because custom_opsets={"mydomain": 1} is ignored '
               "by torch's\n#   torch.export exporter (only compat.export translates it there)\n"
               'torch.onnx.export(model, (x,), "model.onnx", custom_opsets={"mydomain": 1}, '
               'dynamo=False)')),
    "ONX106": ('torch.onnx.export(model, (x,), "model.onnx", export_modules_as_functions=True)',
               ('# compat.migrate: dynamo=False because export_modules_as_functions=True is '
               'honoured only by the\n#   TorchScript exporter\n'
               'torch.onnx.export(model, (x,), "model.onnx", export_modules_as_functions=True, '
               'dynamo=False)')),
    "ONX107": ('torch.onnx.export(model, (x,), "model.onnx", autograd_inlining=True)',
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)'),
    "ONX201": ('torch.onnx.export(model, (x,), "model.onnx", example_outputs=y)',
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)'),
    "ONX202": ('torch.onnx.export(model, (x,), "model.onnx", use_external_data_format=True)',
               'torch.onnx.export(model, (x,), "model.onnx", external_data=True, dynamo=True)'),
    "ONX203": (('import torch\n\n'
                'torch.onnx.export(model, (x,), "model.onnx", enable_onnx_checker=True)'),
               ('import onnx\nimport torch\n\n'
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)\n'
               'onnx.checker.check_model("model.onnx")')),
    "ONX204": ('torch.onnx.export(model, (x,), "model.onnx", strip_doc_string=True)',
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)'),
    "ONX205": ('torch.onnx.export(model, (x,), "model.onnx", _retain_param_name=True)',
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)'),
    "ONX206": ('torch.onnx.export(model, (x,), "model.onnx", True, False)',
               ('torch.onnx.export(model, (x,), "model.onnx", export_params=True, verbose=False, '
               'dynamo=True, external_data=False)')),
    "ONX207": ('torch.onnx.export(model, (x,), "model.onnx", fallback=True)',
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)'),
    "ONX208": ('torch.onnx.export(model, (x,), "model.onnx", aten=True)',
               ("# compat.migrate: dynamo=False because aten=True is ignored by torch's "
               'torch.export exporter (only\n#   compat.export translates it there)\n'
               'torch.onnx.export(model, (x,), "model.onnx", '
               'operator_export_type=torch.onnx.OperatorExportTypes.ONNX_ATEN, dynamo=False)')),
    "ONX301": ('torch.onnx.register_custom_op_symbolic("mylib::op", op_symbolic, 17)',
               ('import torch_onnx_compat as compat\n\n'
               'compat.register_custom_op_symbolic("mylib::op", op_symbolic, 17)')),
    "ONX302": (('class MyOp(torch.autograd.Function):\n'
               '    @staticmethod\n'
               '    def forward(ctx, x):\n'
               '        return x.clamp(min=0)\n\n'
               '    @staticmethod\n'
               '    def symbolic(g, x):\n'
               '        return g.op("Relu", x)'), None),
    "ONX303": ("from torch.onnx import symbolic_helper", None),
    "ONX304": (('def relu_unless_constant(g, x):\n'
                '    if x.node().kind() == "onnx::Constant":  # a TorchScript node\n'
                '        return x\n'
                '    return g.op("Relu", x)\n\n'
                'torch.onnx.register_custom_op_symbolic("::relu", relu_unless_constant, 17)'),
               None),
    "ONX401": ("program = torch.onnx.dynamo_export(model, x)",
               "program = torch.onnx.export(model, (x,), dynamo=True)"),
    "ONX402": ("options = torch.onnx.ExportOptions(dynamic_shapes=True)", None),
    "ONX403": ('torch.onnx.utils.export(model, (x,), "model.onnx")',
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)'),
    "ONX404": (('with torch.onnx.select_model_mode_for_export(model, torch.onnx.TrainingMode.EVAL):\n'
               '    torch.onnx.export(model, (x,), "model.onnx")'),
               ('model.eval()\n'
               'torch.onnx.export(model, (x,), "model.onnx", dynamo=True, external_data=False)')),
    "ONX501": (('if torch.__version__ < "1.11":\n'
               '    torch.onnx.export(model, (x,), "model.onnx", example_outputs=y)\n'
               'else:\n'
               '    torch.onnx.export(model, (x,), "model.onnx")'), None),
    "ONX002": ('torch.onnx.export(model, (x,), "model.onnx", opset_version=9)',
               ('# compat.migrate: dynamo=False because opset_version=9 is below 18, the lowest '
               'opset the\n#   torch.export exporter builds\n'
               'torch.onnx.export(model, (x,), "model.onnx", opset_version=9, dynamo=False)')),
    "ONX003": (('class Gate(torch.nn.Module):\n'
               '    def forward(self, x):\n'
               '        if x.mean() > 0:  # a branch on a tensor value\n'
               '            return x * 2\n'
               '        return x - 1\n\n'
               'torch.onnx.export(Gate(), (x,), "model.onnx")'), None),
}

#: the short fix of each entry: what to do, in a few words (the one-line warning; ``message``
#: and ``rule_page`` say why and how to migrate)
SHORT_FIXES: dict[str, str] = {
    "ONX001": "pass dynamo=True (or dynamo=False where the model needs the TorchScript exporter)",
    "ONX101": "use dynamic_shapes= keyed by forward() parameter names, axis names kept",
    "ONX102": ("EVAL: call model.eval() first; TRAINING: model.train() won't do; "
               "batch-statistics translations, or dynamo=False"),
    "ONX103": "drop it; custom_translation_table= for ops without an ONNX translation",
    "ONX104": "drop True; pass optimize=False for False (with dynamo=True)",
    "ONX105": "use custom_translation_table= with onnxscript functions, or keep dynamo=False",
    "ONX106": "no torch.export equivalent; keep it with dynamo=False",
    "ONX107": "drop it; torch.export always traces through autograd.Functions",
    "ONX201": "drop it (removed in torch 1.10)",
    "ONX202": "use external_data= with the same value, with dynamo=True (removed in torch 2.0)",
    "ONX203": "drop it; call onnx.checker.check_model(path) after the export (removed in torch 1.11)",
    "ONX204": "drop it (removed in torch 1.13)",
    "ONX205": "drop it; parameter names are always kept (removed in torch 1.13)",
    "ONX206": "pass the options after f as keywords",
    "ONX207": "drop it; pass dynamo= explicitly (removed in torch 2.11)",
    "ONX208": "drop it, or use operator_export_type= with dynamo=False (removed in torch 1.x)",
    "ONX301": "use compat.register_custom_op_symbolic or custom_translation_table=",
    "ONX302": "use torch.onnx.ops.symbolic(...) inside forward, or export with compat.export",
    "ONX303": "use public torch.onnx APIs",
    "ONX304": "write its onnxscript translation by hand, or keep compat.export for this call",
    "ONX401": "use torch.onnx.export(..., dynamo=True) (removed in torch 2.9)",
    "ONX402": "use torch.onnx.export(..., dynamo=True, dynamic_shapes=...) (removed in torch 2.9)",
    "ONX403": "use torch.onnx.export",
    "ONX404": "call model.eval() or model.train() around the export",
    "ONX501": "delete the branch for old torch; keep the live one",
    "ONX002": "use opset_version=18 or higher, or a runtime that reads the opset written",
    "ONX003": "the export follows the example's branch there; use torch.cond to keep both",
}

#: the command the examples' fixed forms come from
EXAMPLE_FIX = "{migrate} --fix --unsafe-fixes --select ALL"

_FIX_SAFETY = {
    "safe": "safe: `--fix` applies it; the rewritten call exports the same model.",
    "unsafe": "unsafe: applied only with `--unsafe-fixes`, since the rewrite may change what the "
              "call does (review it).",
    "none": "no automatic fix: the rewriter reports it; change the code by hand.",
}
_KIND_TITLES = {"dropped": "dropped", "plain": "plain torch", "shim": "compat.export only",
                "torchscript": "TorchScript only", "lost": "nothing"}


def to_dict(entry: Entry) -> dict[str, object]:
    """One entry as plain data (``catalog --format json``, ``rule CODE --format json``)."""
    before, after = EXAMPLES.get(entry.code, ("", None))
    return {
        "code": entry.code, "name": entry.name, "summary": entry.summary, "changed": entry.changed,
        "runtime": entry.runtime, "replacement": entry.replacement, "rewrite": entry.rewrite,
        "fix": entry.fix, "deprecated_in": entry.deprecated_in, "removed_in": entry.removed_in,
        "example": before, "example_fixed": after,
    }


def to_json() -> list[dict[str, object]]:
    """Every entry as plain data, in catalog order."""
    return [to_dict(e) for e in ENTRIES]


#: where the rule pages live, generated from this catalog (``write_rule_pages``; a test keeps them
#: in sync): the ``url`` of a JSON finding and a SARIF rule's ``helpUri`` (relative to the project)
RULE_PAGES = "docs/rules"


def rule_url(code: str) -> str:
    """The page of ``code`` (``docs/rules/ONX101.md``)."""
    return f"{RULE_PAGES}/{code}.md"


def write_rule_pages(root: str) -> list[str]:
    """Write ``RULE_PAGES/<CODE>.md`` for every entry under ``root``; the paths written."""
    import os

    folder = os.path.join(root, RULE_PAGES)
    os.makedirs(folder, exist_ok=True)
    written = []
    for e in ENTRIES:
        path = os.path.join(folder, f"{e.code}.md")
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(f"<!-- generated by `python -m compat.catalog` from compat/catalog.py; do not edit -->\n"
                     f"{rule_page(e.code)}")
        written.append(path)
    return written


def rule_page(code: str) -> str:
    """A ruff-style rule page for ``code`` (``KeyError`` if unknown): what it finds, why, what
    the shim does at run time, fix safety, an example and what the rewriter makes of it."""
    e = get(code)
    ver = "; ".join(p for p in (f"deprecated in torch {e.deprecated_in}" if e.deprecated_in else "",
                                f"removed in torch {e.removed_in}" if e.removed_in else "") if p)
    before, after = EXAMPLES.get(code, ("", None))
    lines = [f"# {e.code}: {e.summary}", ""]
    if ver:
        lines += [f"Torch: {ver}.", ""]
    finds = e.summary if e.name.split(".")[-1] in e.summary else f"{e.summary} (`{e.name}`)"
    lines += ["## What it finds", "", f"{finds}.", "",
              "## Why", "", f"{e.changed[0].upper()}{e.changed[1:]}.", "",
              "## At run time", "", f"`compat.export` (and `compat run`): {e.runtime}.", "",
              "## Fix", "", f"{e.rewrite[0].upper()}{e.rewrite[1:]}. Replace with: {e.replacement}.", "",
              f"Fix safety: {_FIX_SAFETY[e.fix]}", ""]
    if before:
        lines += ["## Example", "", "```python", before, "```", ""]
        if after is not None:
            lines += [f"After `{EXAMPLE_FIX.format(migrate=MIGRATE)}`:", "", "```python", after,
                      "```", ""]
    lines += [e.hint(), ""]
    return "\n".join(lines)


def values_markdown() -> str:
    """What each legacy option value means today, what ``compat.export`` and ``compat.migrate``
    do with it (docs/migrate.md; a test keeps it in sync)."""
    head = ("code", "option", "value", "today", "compat.export at run time", "compat.migrate")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for code, option, shown, kind, runtime, rewrite in facts.rows():
        row = (code, f"`{option}=`", shown, _KIND_TITLES[kind], runtime, rewrite)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m compat.catalog",
        description="(Re)generate the rule pages, docs/rules/, from the catalog.")
    parser.add_argument("root", nargs="?", default=".",
                        help="the checkout to write docs/rules/ in (default: .)")
    for written in write_rule_pages(parser.parse_args().root):
        print(written)
