"""The catalog's value table holds on real exports: for one call per row (per value where a row
groups values), what the shim's ledger records (route taken, translations) and what the rewriter
decides for the same call text are what the row says (``compat/catalog_facts.py``)."""

from __future__ import annotations

import enum
import json
import re
import warnings
from typing import Any

import pytest
import torch
from torch import nn

import compat
from compat import catalog_facts as facts
from migration.core import Options, fix_text

# slow (one shim export and one migration per catalog case): CI runs it in its own step, `make test-slow`
pytestmark = pytest.mark.slow

#: (option, the row's values as the table shows them) -> value sources of calls for that row;
#: a row the catalog adds without a call here fails test_every_row_has_a_call
CALLS: dict[tuple[str, str], tuple[str, ...]] = {
    ("dynamic_axes", "`None`, `{}`"): ("{}",),
    ("dynamic_axes", "a dict"): ('{"x": {0: "batch"}}',),
    ("training", "`EVAL` (`False`, `None`)"): ("torch.onnx.TrainingMode.EVAL", "False"),
    ("training", "`PRESERVE`"): ("torch.onnx.TrainingMode.PRESERVE",),
    ("training", "`TRAINING` (`True`)"): ("torch.onnx.TrainingMode.TRAINING",),
    ("operator_export_type", "`ONNX`"): ("torch.onnx.OperatorExportTypes.ONNX",),
    ("operator_export_type", "`ONNX_ATEN_FALLBACK`, `ONNX_FALLTHROUGH`"): (
        "torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK",
        "torch.onnx.OperatorExportTypes.ONNX_FALLTHROUGH"),
    ("operator_export_type", "`ONNX_ATEN`"): ("torch.onnx.OperatorExportTypes.ONNX_ATEN",),
    ("do_constant_folding", "`True`"): ("True",),
    ("do_constant_folding", "`False`"): ("False",),
    ("custom_opsets", "`None`, `{}`"): ("{}",),
    ("custom_opsets", "a non-empty dict"): ('{"custom_domain": 2}',),
    ("export_modules_as_functions", "`False`"): ("False",),
    ("export_modules_as_functions", "`True`, a set of module classes"): ("True", "{nn.Linear}"),
    ("autograd_inlining", "`True`"): ("True",),
    ("autograd_inlining", "`False`"): ("False",),
    ("example_outputs", "any value"): ("torch.zeros(2, 2)",),
    ("use_external_data_format", "`True`"): ("True",),
    ("use_external_data_format", "`False`, `None`"): ("False",),
    ("enable_onnx_checker", "`True`"): ("True",),
    ("enable_onnx_checker", "`False`, `None`"): ("False",),
    ("strip_doc_string", "any value"): ("True",),
    ("_retain_param_name", "any value"): ("True",),
    ("fallback", "any value"): ("True",),
    ("aten", "`True`"): ("True",),
    ("aten", "`False`"): ("False",),
    ("export_raw_ir", "`False`"): ("False",),
    ("export_raw_ir", "`True`"): ("True",),
    ("export_type", "`ExportTypes.PROTOBUF_FILE`"): ("ExportTypes.PROTOBUF_FILE",),
    ("export_type", "other `ExportTypes`"): ("ExportTypes.ZIP_ARCHIVE",),
}


class ExportTypes(enum.Enum):
    """torch 1.x's ``torch.onnx.ExportTypes`` (gone from current torch), as old code passed it."""

    PROTOBUF_FILE = 0
    ZIP_ARCHIVE = 1


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return torch.relu(self.fc(x))


CALL_LINE = 3
ROWS = [(o, c) for o in facts.OPTIONS for c in o.cases]


def test_every_row_has_a_call():
    assert set(CALLS) == {(o.name, c.shown) for o, c in ROWS}


def _source(option: str, src: str) -> str:
    return ("import torch\nmodel = Net().eval()\n"
            f'torch.onnx.export(model, (x,), "m.onnx", input_names=["x"], {option}={src})\n')


def _export(option: str, value: Any, tmp_path, monkeypatch) -> dict:
    """The ledger record of one shim export of ``option=value`` (auto route, no route memory)."""
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(ledger))
    monkeypatch.setenv("TORCH_ONNX_COMPAT_CACHE_DIR", "off")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(Net().eval(), (torch.randn(2, 3),), str(tmp_path / "m.onnx"),
                      input_names=["x"], **{option: value})
    (record,) = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert record["status"] == "ok", record
    return record


def _rewrite(text: str, record: dict | None) -> tuple[str, list]:
    opts = Options(fix=True, unsafe_fixes=True)
    out, _, remaining, _ = fix_text(text, "call.py", opts, {CALL_LINE: record} if record else None)
    return out.replace("\n#   ", " "), remaining  # the rewriter's comments, unwrapped


def _marker(plain: str) -> str:
    """What the rewritten code contains for a plain-torch spelling (``optimize=False``,
    ``onnx.checker.check_model`` of ``onnx.checker.check_model(f) after the export``, ``.eval``
    of ``model.eval() before the export``)."""
    return re.split(r"[ (]", plain, maxsplit=1)[0].removeprefix("model")


def _kept_as(case: facts.Case, kept: str) -> tuple[str, ...]:
    """What the rewritten call holds for a kept value: the value itself, or the spelling the
    row's rewrite text says it becomes (``aten=True``: ``operator_export_type=...ONNX_ATEN``),
    as its keyword and its last name."""
    spelled = re.search(r"becomes `(\w+=)[\w.]*?(\w+)`", facts.rewrite_of(case))
    return spelled.groups() if spelled else (kept,)


@pytest.mark.parametrize("option, case, src", [
    (o.name, c, src) for o, c in ROWS for src in CALLS.get((o.name, c.shown), ())
], ids=lambda v: v if isinstance(v, str) else "")
def test_ledger_and_rewriter_agree_with_the_catalog(option, case, src, tmp_path, monkeypatch):
    value = eval(src, {"torch": torch, "nn": nn, "ExportTypes": ExportTypes})
    found = facts.disposition(option, value)
    assert found is not None and found.case == case, (option, src, found)
    record = _export(option, value, tmp_path, monkeypatch)
    ours = [t for t in record["translations"] if t["option"] in (option, "operator_export_type")]
    routed = [t for t in ours if t["action"].startswith("routed to the TorchScript exporter")]
    text = _source(option, src)
    plain_out, plain_left = _rewrite(text, None)
    ledger_out, ledger_left = _rewrite(text, record)
    kept = f"{option}={src}"

    if case.kind == "torchscript":
        # the shim's route choice is needs_torchscript; the rewriter pins the same reason
        assert record["route_taken"] == "legacy" and routed, record
        reason = facts.needs_torchscript(option, value)
        if option != "aten":  # aten=True is routed as the operator_export_type it means
            assert routed[0]["action"] == f"routed to the TorchScript exporter: {reason}"
        for out in (plain_out, ledger_out):
            assert "dynamo=False" in out and "is honoured only by the TorchScript exporter" in out
        return
    assert record["route_taken"] == "dynamo" and not routed, record
    assert facts.needs_torchscript(option, value) is None
    if case.kind == "dropped":
        assert all("dropped" in t["action"] for t in ours), ours
        for out in (plain_out, ledger_out):
            assert f"{option}=" not in out and "dynamo=True" in out, out
    elif case.kind == "plain":
        marker = _marker(case.plain)
        for t in ours:  # the translation, where the shim records one, is that spelling
            if "=" in marker:
                assert marker.rstrip("=") in t["action"], (marker, t)
        for out in (plain_out, ledger_out):
            assert marker in out and f"{option}=" not in out and "dynamo=True" in out, out
    elif case.kind == "shim":
        # translated on the torch.export route; plain torch cannot: kept, never dropped
        assert ours and not any("dropped" in t["action"] for t in ours), ours
        assert found.reason(src).split(" is ", 1)[0] == kept
        assert f"dynamo=False because {found.reason(src)}" in plain_out
        if any("no ATen node" in t["action"] for t in ours):
            # ATen fallback that wrote no ATen node: plain torch writes the same model (30.5)
            assert "dynamo=True" in ledger_out and f"{option}=" not in ledger_out, ledger_out
            assert all(token in plain_out for token in _kept_as(case, kept)), plain_out
            return
        if option == "training":
            # training=TRAINING/PRESERVE with a ledger: the shim's batch-statistics translations
            # from the generated module, on plain torch (30.4)
            assert "dynamo=True" in ledger_out and kept not in ledger_out, ledger_out
            assert "custom_translation_table=call_onnx.translation_table()" in ledger_out
            assert ("train_mode(model)" in ledger_out) == (value == "TRAINING" or "TRAINING" in src)
            assert all(token in plain_out for token in _kept_as(case, kept)), plain_out
            return
        assert ("dynamo=False" in ledger_out or "compat.export(" in ledger_out), ledger_out
        for out in (plain_out, ledger_out):
            assert all(token in out for token in _kept_as(case, kept)), (case.rewrite, out)
    else:  # lost: dropped with a warning at run time; the rewriter reports it without a fix
        assert not ours and case.kind == "lost" and found.code in record["warnings"]
        for out, left in ((plain_out, plain_left), (ledger_out, ledger_left)):
            assert kept in out
            assert any(f.code == found.code and f.applicability == "none" for f in left), left


def test_a_scripted_model_needs_the_torchscript_exporter_on_both_sides(tmp_path, monkeypatch):
    """The catalog's model fact: the shim routes a ScriptModule to the TorchScript exporter with
    its reason, and the rewriter pins dynamo=False with it where the file scripts its model."""
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(ledger))
    monkeypatch.setenv("TORCH_ONNX_COMPAT_CACHE_DIR", "off")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(torch.jit.script(Net().eval()), (torch.randn(2, 3),), str(tmp_path / "m.onnx"),
                      example_outputs=torch.zeros(2, 2))
    (record,) = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert record["route_taken"] == "legacy" and facts.SCRIPT_MODEL_REASON in record["fallback_reason"]
    text = ("import torch\nmodel = torch.jit.script(Net().eval())\n"
            'torch.onnx.export(model, (x,), "m.onnx", example_outputs=y)\n')
    for out in (_rewrite(text, None)[0], _rewrite(text, record)[0]):
        assert "dynamo=False)" in out and "example_outputs=y" not in out
    assert facts.SCRIPT_MODEL_REASON in _rewrite(text, None)[0]
