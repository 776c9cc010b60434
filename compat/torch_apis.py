"""Which torch release has each API the rewriter's fixes write: one table, torch-free.

``compat.migrate --target-torch X.Y`` (default: the installed torch, read from its metadata, not
imported) holds back a fix that would write an API torch X.Y lacks: the finding stays, without
the fix, and says which API and which torch. The rewriter imports this where torch is not
installed.

Where each fact was checked (torch's own source in the wheels of torch 2.9.1, 2.10.0, 2.11.0,
2.12.1, 2.13.0 and 2.14.1, and torch's pull requests) is given beside it. ``since`` is the first release the fact
was checked on; ``(2, 9)`` means "present in torch 2.9.1", the oldest torch a migration can
target (:data:`MIN_TARGET`): an earlier introduction changes no advice and was not looked up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, int]

#: the oldest torch ``--target-torch`` takes: the first whose ``torch.onnx.export`` defaults to
#: the torch.export-based exporter (torch 2.13.0 source, torch/onnx/__init__.py docstring:
#: ``.. versionchanged:: 2.9 dynamo is now True by default``), where the scripts this tool
#: migrates broke
MIN_TARGET: Version = (2, 9)


@dataclass(frozen=True)
class TorchApi:
    """One API a fix may write: a ``torch.onnx.export`` keyword or a dotted name."""

    name: str  # as findings show it: ``torch.onnx.export(dynamo=)``, ``torch.export.draft_export``
    since: Version
    removed: Version | None = None  # the first release without it
    keyword: str | None = None  # a keyword of torch.onnx.export
    pattern: str | None = None  # a regular expression finding it in written code
    exact: bool = True  # False: ``since`` is the first release checked, not the first with it

    def available(self, target: Version) -> bool:
        return self.since <= target and (self.removed is None or target < self.removed)

    def why_not(self, target: Version) -> str:
        """Why torch ``target`` lacks it (call only when it does)."""
        shown = ".".join(map(str, target))
        if self.removed is not None and target >= self.removed:
            return f"{self.name} was removed in torch {'.'.join(map(str, self.removed))}"
        since = ".".join(map(str, self.since))
        if not self.exact:
            return f"{self.name} is not known in torch {shown} (checked from torch {since})"
        return f"{self.name} needs torch >= {since}, not {shown}"


def _kw(name: str, since: Version, removed: Version | None = None) -> TorchApi:
    return TorchApi(f"torch.onnx.export({name}=)", since, removed, keyword=name,
                    exact=since != MIN_TARGET)


def _code(name: str, since: Version, pattern: str) -> TorchApi:
    return TorchApi(name, since, pattern=pattern, exact=since != MIN_TARGET)


API_TABLE: tuple[TorchApi, ...] = (
    # torch.onnx.export keywords. dynamo=: torch 2.5 (the catalog's fact since issue 11; torch 2.4
    # rejects it). The others: in the signature of torch 2.9.1, 2.10.0, 2.11.0, 2.12.1, 2.13.0
    # and 2.14.1 (torch/onnx/__init__.py, def export). dynamic_shapes may name axes with strings
    # there (torch/onnx/_internal/exporter/_dynamic_shapes.py, convert_str_to_export_dim).
    _kw("dynamo", (2, 5)),
    _kw("dynamic_shapes", (2, 9)),
    _kw("external_data", (2, 9)),
    _kw("custom_translation_table", (2, 9)),
    _kw("optimize", (2, 9)),
    _kw("report", (2, 9)),
    _kw("verify", (2, 9)),
    # fallback=: in the signature of 2.9.1 and 2.10.0, gone from 2.11.0's, whose docstring says
    # ".. versionchanged:: 2.11 ``fallback`` option has been removed." Measured: a model with a
    # data-dependent branch exports with fallback=True, dynamo=True on 2.9.1 and 2.10.0 (the
    # TorchScript retry), and the call is a TypeError on 2.11.0 and 2.13.0.
    _kw("fallback", (2, 9), removed=(2, 11)),
    # torch.export.Dim: torch 2.2 (pytorch/tutorials#2592: "torch.export.Dim is not in 2.1").
    # Dim.AUTO / Dim.STATIC: pytorch/pytorch#133620 (DIM enum, Aug 2024) hung on Dim by #134484;
    # Dim.AUTO / Dim.DYNAMIC: torch/export/dynamic_shapes.py of 2.9.1 to 2.13.0 (class Dim).
    _code("torch.export.Dim.AUTO", (2, 9), r"\bexport\.Dim\.AUTO\b"),
    _code("torch.export.Dim.DYNAMIC", (2, 9), r"\bexport\.Dim\.DYNAMIC\b"),
    _code("torch.export.Dim", (2, 2), r"\bexport\.Dim\("),
    # draft_export: torch/export/__init__.py __all__ of 2.9.1 to 2.13.0 (docs: "Draft Export",
    # created May 2025)
    _code("torch.export.draft_export", (2, 9), r"\bexport\.draft_export\b"),
    # torch/_library/custom_ops.py (custom_op, CustomOpDef.register_fake) and torch/library.py
    # (register_fake) of 2.9.1 to 2.13.0
    _code("torch.library.custom_op", (2, 9), r"\blibrary\.custom_op\b"),
    _code("torch.library.register_fake", (2, 9), r"\bregister_fake\b"),
    # torch/compiler/__init__.py of 2.9.1 to 2.13.0: def is_exporting
    _code("torch.compiler.is_exporting", (2, 9), r"\bcompiler\.is_exporting\b"),
    # ... and False under torch.compile: pytorch/pytorch#176347 (True during torch.compile),
    # fixed by #176499 (merged 2026-03-10). torch/_dynamo/variables/torch.py of 2.12.1 and 2.13.0
    # reads torch.compiler._is_exporting_flag ("is_exporting() should only be True during
    # torch.export"); 2.9.1 to 2.11.0 fold it to True. Measured: backward through a
    # torch.compile'd ``(op if torch.compiler.is_exporting() else Fn.apply)(x)`` fails on 2.9.1
    # and 2.11.0 (the op has no autograd formula) and passes on 2.13.0.
    TorchApi("torch.compiler.is_exporting() False under torch.compile", (2, 12),
             pattern=r"\bcompiler\.is_exporting\b"),
    # A custom_translation_table entry for an aten op torch translates itself is used whatever
    # its parameter names: pytorch/pytorch#165083 ("Remove overload matching logic from
    # dispatcher") made torch 2.11's dispatcher take the first (custom) translation. torch
    # 2.9.1 and 2.10.0 (torch/onnx/_internal/exporter/_dispatching.py, get_matching_overload)
    # match each candidate's parameter names against the op's schema and silently take
    # torchlib's when a required one is not an argument name: measured, ``def relu_as_max(x)``
    # for aten.relu.default (schema argument ``self``) gives Relu on 2.9.1 and 2.10.0, Max on
    # 2.11.0. Keyed by the packet it is a TypeError, by "aten::relu" the op is decomposed away
    # (LessOrEqual, Where), on all three. A translation declaring no parameters matches every
    # node (migration/symbolic_translate.py's matches_every_node, written for targets before 2.11).
    TorchApi("custom_translation_table entries for aten ops matched whatever their parameter "
             "names", (2, 11)),
    # A dynamic axis whose example has size 1 stays dynamic: torch 2.9.1 captures under
    # torch.fx.experimental._config.patch(backed_size_oblivious=True)
    # (torch/onnx/_internal/exporter/_capture_strategies.py) but runs its decompositions outside
    # it, which fix the axis to 1 whatever its spelling (a name, Dim("batch"), Dim.DYNAMIC);
    # pytorch/pytorch#166151 ("Cover all FX passes into backed size oblivious", Oct 2025) moved
    # them inside (torch 2.13.0's _core.py, _prepare_exported_program_for_export). Measured:
    # examples/legacy_1x_export.py migrated with dynamic_shapes=({0: "batch"},) and a batch-1
    # example writes logits [1, 4] on 2.9.1 and [batch, 4] on 2.10.0, 2.11.0 and 2.13.0. The shim
    # tiles such an example before capture (dynamo/dynamic_shapes.py; the ledger's note is
    # catalog.SIZE_ONE_TILED).
    TorchApi("torch.onnx.export(dynamo=True) keeping a dynamic axis whose example has size 1",
             (2, 10)),
)
BY_KEYWORD: dict[str, TorchApi] = {a.keyword: a for a in API_TABLE if a.keyword}
_PATTERNS = tuple((a, re.compile(a.pattern)) for a in API_TABLE if a.pattern)
#: torch.onnx.export(dynamo=): code for torch older than this never gets it from the rewriter
DYNAMO_KEYWORD_SINCE: Version = BY_KEYWORD["dynamo"].since


def api(name: str) -> TorchApi:
    """The table's entry named ``name`` (``torch.onnx.export(fallback=)``)."""
    return next(a for a in API_TABLE if a.name == name)


#: what the call sites of a migrated ``autograd.Function`` rely on (``migration/function_ops.py``)
EXPORTING_ONLY_UNDER_EXPORT = api("torch.compiler.is_exporting() False under torch.compile")
#: what a generated translation of an aten op relies on (``migration/symbolic_translate.py``)
ATEN_OVERRIDE_ANY_SIGNATURE = api("custom_translation_table entries for aten ops matched "
                                  "whatever their parameter names")
#: what a migrated call relies on where the shim tiled a size-1 example (``rules/onx0.py``)
SIZE_ONE_AXIS_DYNAMIC = api("torch.onnx.export(dynamo=True) keeping a dynamic axis whose example "
                            "has size 1")


def lacking(keywords: set[str], code: str, target: Version) -> list[TorchApi]:
    """The APIs that the ``keywords`` a fix writes on an export call, and the ``code`` it
    writes, use and torch ``target`` lacks (table order)."""
    out = [BY_KEYWORD[k] for k in keywords if k in BY_KEYWORD]
    out += [a for a, rx in _PATTERNS if rx.search(code)]
    return sorted({a for a in out if not a.available(target)}, key=API_TABLE.index)


def newest_supported() -> Version:
    """The newest torch the shim is tested on (``torch_caps.TESTED_TORCH``, the runtime extra's
    upper bound): APIs of later releases are not in the table."""
    from compat.installed.torch_caps import TESTED_TORCH  # torch-free: packaging only

    return parse(TESTED_TORCH[1])


def parse(value: str) -> Version:
    """``"2.9"``, ``"2.9.1"``, ``"2.13.0+cpu"`` as ``(2, 9)``; ValueError when not a version."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?(?:[-+.]?\w+)*\s*", str(value))
    if not m:
        raise ValueError(value)
    return int(m.group(1)), int(m.group(2))


def shown(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def installed_torch() -> Version | None:
    """The installed torch's release from its metadata (torch is not imported); None when
    torch is not installed or its version is unreadable."""
    from importlib import metadata

    try:
        return parse(metadata.version("torch"))
    except (metadata.PackageNotFoundError, ValueError):
        return None


def default_target() -> Version:
    """The installed torch, within ``MIN_TARGET .. newest_supported()``; the newest supported
    when torch is not installed."""
    newest = newest_supported()
    found = installed_torch()
    if found is None:
        return newest
    return max(MIN_TARGET, min(found, newest))
