"""What the rewriter decides, per issue: ledger evidence (failed routes, shim translations),
module constants, hints that work as printed, the ruff-style CLI surface, external data on the
TorchScript route and torch version branches. Static only: nothing here runs user code."""

from __future__ import annotations

import json
import re
import shlex
import textwrap

import pytest

from migration.cli import main
from migration.core import Options, check_text, fix_text
from migration.ledger import LedgerIndex, read, shift_lines

H = "import torch\nfrom torch.onnx import TrainingMode\n"


def fix(src: str, evidence: dict | None = None, unsafe: bool = False, **kw) -> str:
    src = H + textwrap.dedent(src)
    opts = Options(fix=True, unsafe_fixes=unsafe, **kw)
    out, _, _, _ = fix_text(src, "t.py", opts, evidence)
    # a second run (the evidence moved with the rewrite, as a new ledger would) changes nothing
    again, fixed, _, _ = fix_text(out, "t.py", opts, shift_lines(evidence, src, out))
    assert again == out and not fixed, "second run changed something"
    compile(out, "t.py", "exec")
    return out.removeprefix(H)


def codes(src: str, **kw) -> list[tuple[str, int, str]]:
    found = check_text(H + textwrap.dedent(src), "t.py", Options(**kw))
    return [(f.code, f.line - 2, f.applicability) for f in found]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# -- issue 11.3: failed ledger records count ------------------------------------------------

def _index(*records: dict) -> LedgerIndex:
    index = LedgerIndex()
    for r in records:
        index.add({"call_site": "/ci/repo/pkg/t.py:4", "status": "ok", **r}, "/")
    return index


def test_failed_torchscript_route_is_never_pinned() -> None:
    # the shim fell back from torch.export to TorchScript, which failed too: no route exported
    index = _index({"route_taken": None, "status": "failed", "route_requested": "auto",
                    "fallback_reason": "dynamo: opset 11 not reached; legacy: TypeError"})
    ev = index.evidence("/home/u/repo/pkg/t.py")
    assert ev[4]["route_taken"] is None and ev[4]["failed_routes"] == ["dynamo", "legacy"]
    src = "\ntorch.onnx.export(m, (x,), 'm.onnx', opset_version=11)\n"
    assert fix(src, ev) == src  # opset 11 would pin dynamo=False: the TorchScript route failed
    assert codes(src)[0][2] == "safe"  # without the ledger the pin is offered


def test_success_on_one_route_after_failure_of_the_other() -> None:
    index = _index({"route_taken": "dynamo", "fallback_reason": "legacy: forward() got "
                    "multiple values for argument 'use_cache'", "route_requested": "legacy"})
    ev = index.evidence("/x/pkg/t.py")
    out = fix("\ntorch.onnx.export(m, (x,), 'm.onnx', opset_version=11)\n", ev)
    assert "dynamo=True" in out and "dynamo=False" not in out


def test_a_route_that_failed_in_any_run_is_not_pinned() -> None:
    index = _index({"route_taken": "legacy"},
                   {"route_taken": None, "status": "failed", "route_requested": "legacy",
                    "fallback_reason": "legacy: RuntimeError"})
    assert index.evidence("/x/pkg/t.py")[4]["route_taken"] is None


def test_ledger_of_only_failed_records_matches_without_warning(tmp_path, capsys,
                                                               monkeypatch) -> None:
    src = tmp_path / "pkg" / "t.py"
    src.parent.mkdir()
    src.write_text("import torch\n\ntorch.onnx.export(m, (x,), path, opset_version=11)\n")
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(json.dumps({"call_site": f"{src}:3", "status": "failed", "route_taken": None,
                                  "route_requested": "auto",
                                  "fallback_reason": "legacy: boom"}) + "\n")
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(capsys, "--fix", "--ledger", str(ledger), "pkg")
    assert "no record" not in err and "is it this project's ledger" not in err
    assert rc == 1 and "dynamo=False" not in src.read_text()
    assert "TorchScript route failing here" in out


# -- issue 12.1: options the shim translated on the torch.export route -----------------------

TRAINING_RECORD = {"route_taken": "dynamo", "translations": [
    {"code": "ONX102", "option": "training", "action": "training=TRAINING: batch statistics"},
    {"code": "ONX104", "option": "do_constant_folding", "action": "False: optimize=False"},
]}


def test_translated_training_exports_in_train_mode_with_the_generated_translations() -> None:
    """issue 30.4: the shim's batch-statistics translations from the generated module, the call
    inside ``train_mode(model)``, dynamo=True; no pin."""
    src = ("\ntorch.onnx.export(m, (x,), 'm.onnx', training=TrainingMode.TRAINING, "
           "do_constant_folding=False)\n")
    out = fix(src, {4: TRAINING_RECORD})
    assert "training=TrainingMode" not in out and "dynamo=False" not in out, out
    assert "with t_onnx.train_mode(m):\n    torch.onnx.export(m, (x,), 'm.onnx', optimize=False, " \
        "dynamo=True, custom_translation_table=t_onnx.translation_table()" in out, out
    assert "import t_onnx\n" in out and "from torch.onnx import TrainingMode" not in out


def test_translated_preserve_keeps_the_models_mode_with_the_translations() -> None:
    out = fix("\ntorch.onnx.export(m, (x,), 'm.onnx', training=TrainingMode.PRESERVE)\n",
              {4: {**TRAINING_RECORD, "translations": TRAINING_RECORD["translations"][:1]}})
    assert "custom_translation_table=t_onnx.translation_table()" in out and "with t_onnx" not in out
    assert "training=TrainingMode" not in out and "dynamo=True" in out, out


def test_training_that_cannot_be_wrapped_stays_pinned_and_says_why() -> None:
    # the call's result is used: no `with` around it can be written here
    out = fix("\nok = torch.onnx.export(m, (x,), 'm.onnx', training=TrainingMode.TRAINING)\n",
              {4: {**TRAINING_RECORD, "translations": TRAINING_RECORD["translations"][:1]}})
    assert "training=TrainingMode.TRAINING, dynamo=False" in out, out
    assert "not a statement of its own" in out and "custom_translation_table" not in out


def test_translated_constant_folding_becomes_optimize_false() -> None:
    record = {"route_taken": "dynamo", "translations": TRAINING_RECORD["translations"][1:]}
    out = fix("\ntorch.onnx.export(m, (x,), 'm.onnx', do_constant_folding=False)\n", {4: record})
    assert out == ("\ntorch.onnx.export(m, (x,), 'm.onnx', optimize=False, dynamo=True, "
                   "external_data=False)\n")


@pytest.mark.parametrize("option, code", [
    ("custom_opsets={'my': 2}", "ONX105"),
    ("operator_export_type=torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK", "ONX103"),
])
def test_every_translated_onx1_option_keeps_its_behaviour(option: str, code: str) -> None:
    name = option.split("=")[0]
    record = {"route_taken": "dynamo", "translations": [{"code": code, "option": name,
                                                         "action": "translated"}]}
    out = fix(f"\ntorch.onnx.export(m, (x,), 'm.onnx', {option})\n", {4: record})
    assert option in out and "dynamo=False" in out


def test_a_value_only_the_shim_translates_is_never_dropped() -> None:
    # a record without the translation (another shim version): the catalog says the shim
    # translates custom_opsets on the torch.export route, so the call keeps it (dynamo=False)
    out = fix("\ntorch.onnx.export(m, (x,), 'm.onnx', custom_opsets={'my': 2})\n",
              {4: {"route_taken": "dynamo"}})
    assert "custom_opsets={'my': 2}" in out and "dynamo=False" in out


def test_constant_folding_false_is_optimize_false_without_a_ledger_too() -> None:
    """The shim exports do_constant_folding=False on the torch.export route with optimize=False
    (the catalog's plain-torch spelling): the rewriter writes that, not a dynamo=False pin."""
    out = fix("\ntorch.onnx.export(m, (x,), 'm.onnx', do_constant_folding=False)\n")
    assert out == ("\ntorch.onnx.export(m, (x,), 'm.onnx', optimize=False, dynamo=True, "
                   "external_data=False)\n")
    out = fix("\ntorch.onnx.export(m, (x,), 'm.onnx', do_constant_folding=False, optimize=True)\n")
    assert "do_constant_folding" not in out and "optimize=True" in out


def test_translated_option_whose_torchscript_route_failed_goes_through_compat() -> None:
    record = {"route_taken": "dynamo", "failed_routes": ["legacy"], "translations": [
        {"code": "ONX105", "option": "custom_opsets", "action": "translated"}]}
    out = fix("\ntorch.onnx.export(m, (x,), 'm.onnx', custom_opsets={'my': 2})\n", {4: record})
    assert "compat.export(m, (x,), 'm.onnx', custom_opsets={'my': 2})" in out
    assert "import torch_onnx_compat as compat\n" in out


# -- issue 12.3: module-level constants ------------------------------------------------------

def test_module_constants_are_resolved_like_literals() -> None:
    out = fix("""
        OPSET_VERSION = 15
        BATCH = "batch"
        AXES = {"x": {0: BATCH}, "y": {0: BATCH}}
        NAMES = ("x",)

        def main(m, x):
            torch.onnx.export(m, (x,), "a.onnx", opset_version=OPSET_VERSION)
            torch.onnx.export(m, (x,), "b.onnx", input_names=NAMES, output_names=["y"],
                              dynamic_axes=AXES)
        """)
    # a known opset below 18: exported at 18, then converted down by a visible step (issue 30.1)
    assert 'opset_version=18, dynamo=True, external_data=False)' in out
    assert 'compat.convert_opset("a.onnx", OPSET_VERSION, out="a.onnx")' in out
    assert 'dynamic_shapes=({0: "batch"},), dynamo=True' in out  # the axis name kept


@pytest.mark.parametrize("rebind", [
    "OPSET_VERSION = 18",
    "OPSET_VERSION += 3",
    "for OPSET_VERSION in (18,):\n    pass",
    "def f():\n    global OPSET_VERSION\n    OPSET_VERSION = 18",
    "from config import *",
])
def test_reassigned_constants_are_not_resolved(rebind: str) -> None:
    out = fix("OPSET_VERSION = 15\n" + rebind + "\n"
              "torch.onnx.export(m, (x,), 'a.onnx', opset_version=OPSET_VERSION)\n")
    assert "below 18" not in out


def test_mutated_dict_constant_is_not_resolved() -> None:
    src = """
        AXES = {"x": {0: "batch"}}
        AXES.update(y={0: "n"})
        torch.onnx.export(m, (x,), "a.onnx", input_names=["x"], dynamic_axes=AXES)
        """
    out = fix(src)  # AXES is read at run time (as mutated), never as its first literal
    assert 'dynamic_shapes=({0: "batch"},)' not in out
    assert "dynamic_shapes=tuple((AXES or {}).get(name)" in out, out


# -- issue 12.4: hints work as printed -------------------------------------------------------

@pytest.mark.parametrize("call, code", [
    ("torch.onnx.export(m, (x,), 'm.onnx', input_names=['x'], dynamic_axes={'x': {0: 'b'}})",
     "ONX101"),
    ("torch.onnx.export(m, (x,), 'm.onnx', do_constant_folding=True)", "ONX104"),
    ("torch.onnx.export(m, (x,), 'm.onnx', True, False, None, ['x'])", "ONX102"),
    ("torch.onnx.export(m, (x,), 'm.onnx', example_outputs=y)", "ONX201"),
])
def test_printed_hint_fixes_its_finding(tmp_path, capsys, monkeypatch, call, code) -> None:
    path = tmp_path / "my scripts" / "exp.py"
    path.parent.mkdir()
    path.write_text("import torch\nm = M().eval()\n" + call + "\n")
    monkeypatch.chdir(tmp_path)
    _, out, _ = cli(capsys, "--output-format", "json", str(path))
    finding = next(f for f in json.loads(out) if f["code"] == code)
    hint = re.search(r"Migrate with: python -m compat\.migrate (.*?)(?: \[|$)",
                     finding["message"]).group(1)
    argv = shlex.split(hint)
    assert argv[-1] == str(path)  # the real path, quoted for the shell
    cli(capsys, *argv)
    _, out, _ = cli(capsys, "--output-format", "json", "--select", code, str(path))
    assert all(f["code"] != code or f["fix_applicability"] == "none" for f in json.loads(out))
    assert code not in [f["code"] for f in json.loads(out)]


# -- issue 12.5: the CLI surface -------------------------------------------------------------

@pytest.fixture
def legacy_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "a.py"
    path.write_text("import torch\ntorch.onnx.export(m, (x,), 'm.onnx', example_outputs=y)\n")
    return path


@pytest.mark.parametrize("flag", ["--select", "--ignore", "--extend-select"])
def test_unknown_code_is_a_usage_error(capsys, legacy_file, flag) -> None:
    rc, _, err = cli(capsys, flag, "ONX999", "a.py")
    assert rc == 2 and "ONX999" in err


def test_all_extend_select_exit_zero_quiet(capsys, legacy_file) -> None:
    rc, out, _ = cli(capsys, "--select", "ALL", "a.py")
    assert rc == 1 and "ONX201" in out and "ONX001" in out and "Found" in out
    rc, out, _ = cli(capsys, "--select", "ONX2", "--extend-select", "ONX001", "a.py")
    assert "ONX001" in out and "ONX201" in out
    rc, out, _ = cli(capsys, "--select", "ONX201", "-q", "--exit-zero", "a.py")
    assert rc == 0 and out.count("\n") == 1 and "ONX201" in out


def test_fix_alias_show_fixes_and_all_checks_passed(capsys, legacy_file) -> None:
    rc, out, _ = cli(capsys, "--fix", "--show-fixes", "a.py")
    assert rc == 0 and "1 x ONX201" in out and "1 x ONX001" in out
    assert "example_outputs" not in legacy_file.read_text()
    rc, out, _ = cli(capsys, "a.py")
    assert rc == 0 and out.strip() == "All checks passed!"
    rc, out, _ = cli(capsys, "-q", "a.py")
    assert rc == 0 and out == ""


def test_version_and_exit_codes_in_help(capsys) -> None:
    from compat import __version__, commands

    rc, out, _ = cli(capsys, "--version")
    assert rc == 0 and out == f"{commands.MIGRATE} {__version__}\n"
    rc, out, _ = cli(capsys, "--help")
    assert rc == 0 and "exit codes:" in out and "  2  usage error" in out


TARGET_SRC = """
torch.onnx.export(m, (x,), 'm.onnx', example_outputs=y, do_constant_folding=False,
                  use_external_data_format=True)
torch.onnx.dynamo_export(m, x)
"""


def test_target_torch_below_2_5_never_writes_dynamo() -> None:
    """The library's Options still take an old target (the CLI refuses below 2.9: see
    test_target_torch.py)."""
    out = fix(TARGET_SRC, target_torch=(2, 4))
    assert "dynamo=" not in out and ", external_data=" not in out and "example_outputs" not in out
    assert "dynamo_export" in out and "save_as_external_data=True" in out
    assert "dynamo=True" in fix(TARGET_SRC, target_torch=(2, 5))


# -- issue 11.4: use_external_data_format on the TorchScript route ----------------------------

def test_external_data_on_torchscript_route_moves_weights_after_export() -> None:
    out = fix("\ntorch.onnx.export(m, (x,), 'out/m.onnx', use_external_data_format=True, "
              "custom_opsets={'d': 2})\n")
    assert out == (
        "import onnx\nimport torch\nfrom torch.onnx import TrainingMode\n\n"
        "# compat.migrate: dynamo=False because custom_opsets={'d': 2} is ignored by torch's torch.export\n"
        "#   exporter (only compat.export translates it there)\n"
        "torch.onnx.export(m, (x,), 'out/m.onnx', custom_opsets={'d': 2}, dynamo=False)\n"
        "onnx.save_model(onnx.load('out/m.onnx'), 'out/m.onnx', save_as_external_data=True, "
        "all_tensors_to_one_file=True, location=\"m.onnx.data\", size_threshold=0)\n")


def test_external_data_to_a_name_is_an_unsafe_fix() -> None:
    src = "\ntorch.onnx.export(m, (x,), path, use_external_data_format=True, dynamo=False)\n"
    assert fix(src) == src
    out = fix(src, unsafe=True)
    assert "location=os.path.basename(path) + \".data\"" in out and "import os" in out


def test_external_data_on_dynamo_route_is_renamed() -> None:
    out = fix("\ntorch.onnx.export(m, (x,), 'm.onnx', use_external_data_format=True)\n")
    assert out == "\ntorch.onnx.export(m, (x,), 'm.onnx', external_data=True, dynamo=True)\n"


# -- issue 11.5: torch version branches ------------------------------------------------------

HF_BRANCH = """
from itertools import chain
{flag_import}

def export_pytorch(model, config, opset, output):
    from torch.onnx import export as onnx_export

    model_inputs = config.generate_dummy_inputs()
    onnx_outputs = list(config.outputs.keys())
    if {test}:
        onnx_export(
            model,
            (model_inputs,),
            f=output.as_posix(),
            input_names=list(config.inputs.keys()),
            output_names=onnx_outputs,
            dynamic_axes=dict(chain(config.inputs.items(), config.outputs.items())),
            do_constant_folding=True,
            use_external_data_format=config.use_external_data_format(model.num_parameters()),
            enable_onnx_checker=True,
            opset_version=opset,
        )
    else:
        onnx_export(
            model,
            (model_inputs,),
            f=output.as_posix(),
            input_names=list(config.inputs.keys()),
            output_names=onnx_outputs,
            dynamic_axes={{name: axes for name, axes in chain(config.inputs.items(),
                                                             config.outputs.items())}},
            do_constant_folding=True,
            opset_version=opset,
        )
"""


@pytest.mark.parametrize("flag_import, test", [
    ("from transformers.pytorch_utils import is_torch_less_than_1_11", "is_torch_less_than_1_11"),
    (("from packaging import version\n"
      "is_torch_less_than_1_11 = version.parse(torch.__version__) < version.parse('1.11')"),
     "is_torch_less_than_1_11"),
    ("", 'torch.__version__ < "1.11"'),
    ("from packaging import version", 'version.parse(torch.__version__) < version.parse("1.11")'),
    ("from packaging.version import Version", 'not Version(torch.__version__) >= Version("1.11.0")'),
])
def test_old_torch_branch_is_dead_code_and_live_branch_migrates(flag_import, test) -> None:
    src = HF_BRANCH.format(flag_import=flag_import, test=test)
    found = codes(src)
    if_line = next(i for i, line in enumerate(src.splitlines(), 1) if line.strip().startswith("if "))
    assert ("ONX501", if_line, "none") in found
    # nothing inside the dead branch is reported or rewritten
    dead_end = if_line + 12
    assert not [f for f in found if f[0] != "ONX501" and if_line < f[1] <= dead_end]
    out = fix(src)
    assert "use_external_data_format=config.use_external_data_format" in out  # dead: untouched
    # the live call: keyword inputs of a dict attached to input_names, a computed dynamic_axes and
    # opset: without a ledger plain torch's binding and dims cannot be shown to be the shim's
    assert out.count("compat.export(") == 1 and "onnx_export(\n" in out
    assert "# compat.migrate: compat.export because input_names with keyword inputs in a" in out
    assert "dynamo=" not in out and "opset_version=opset," in out


def test_branch_live_on_the_target_torch_is_migrated_normally() -> None:
    src = "\nif torch.__version__ < '2.6':\n    torch.onnx.export(m, (x,), 'm.onnx')\n"
    assert "ONX501" not in [c for c, _, _ in codes(src, target_torch=(2, 5))]
    assert "ONX501" in [c for c, _, _ in codes(src, target_torch=(2, 6))]
    assert "ONX501" in [c for c, _, _ in codes("\nif torch.__version__ >= '2.0':\n    pass\n"
                                               "else:\n    torch.onnx.export(m, x, 'm.onnx')\n")]


def test_a_helpers_single_record_is_too_few_to_leave_the_shim() -> None:
    """export_pytorch exports what its callers pass: one record shows one of their models."""
    record = {"route_taken": "dynamo", "model": "BertModel", "output": "/o/bert.onnx",
              "translations": [{"code": "ONX001", "option": "opset_version",
                                "action": "11: built at 18, converted to 11 by compat's "
                                          "down-conversion (0 nodes rewritten, 0 relabelled)"}]}
    src = HF_BRANCH.format(flag_import="", test='torch.__version__ < "1.11"')
    line = src.splitlines().index("    else:") + 4  # the live call's first line, after H
    found = check_text(H + textwrap.dedent(src), "t.py", Options(), {line: record})
    (onx001,) = [f for f in found if f.code == "ONX001"]
    assert onx001.applicability == "none" and "1 record(s) (BertModel)" in onx001.message
    assert "callers of export_pytorch() pass ('model')" in onx001.message
    assert fix(src, {line: record}) == fix(src, {line: record}, select=("ONX001",))
    two = {"records": [record, {**record, "model": "GPT2Model"}], **record}
    out = fix(src, {line: two})
    assert "opset_version=18" not in out and "opset_version=opset," in out  # may be >= 18
    assert "compat.convert_opset(output.as_posix(), opset, out=output.as_posix())" in out
    assert "dynamic_shapes=dict(config.inputs)" in out and "dynamo=True" in out


def test_onnx_config_comprehension_without_matching_input_names_is_not_converted() -> None:
    out = fix("""
        from itertools import chain
        torch.onnx.export(m, (x,), 'm.onnx', input_names=list(other.keys()),
                          dynamic_axes=dict(chain(cfg.inputs.items(), cfg.outputs.items())))
        """)
    assert "dynamic_shapes=" not in out and "dynamo=False" in out


def test_ledger_evidence_follows_its_call_across_fix_rounds() -> None:
    # round 1 rewrites the first call (a comment line is inserted above it); the second call's
    # evidence (its TorchScript route failed) must still hold in the next rounds
    src = ("\ntorch.onnx.export(m, (x,), a, opset_version=11, example_outputs=y)\n"
           "torch.onnx.export(m, (x,), b, opset_version=11)\n")
    out = fix(src, {5: {"route_taken": None, "failed_routes": ["legacy"]}})
    assert out.count(", dynamo=False)") == 1 and "b, opset_version=11)\n" in out


def test_unselected_option_still_decides_the_route_and_the_hint_names_it() -> None:
    src = "\ntorch.onnx.export(m, (x,), 'm.onnx', training=TrainingMode.TRAINING)\n"
    assert "dynamo=True" not in fix(src, select=("ONX001",))  # never a silent behaviour change
    found = check_text(H + src, "t.py", Options())
    onx001 = next(f for f in found if f.code == "ONX001")
    assert "--select ONX102,ONX001 t.py" in onx001.message
    assert "dynamo=False" in fix(src, select=("ONX102", "ONX001"))


# -- dynamic_axes -> string dims (names kept); Dim.AUTO where the ledger shows the model fixing the
# axis (the shim's translation), spelled with the file's own imports ------------------------------

FIXED_RECORD = {"route_taken": "dynamo", "translations": [
    {"code": "ONX101", "option": "dynamic_axes",
     "action": "axis x[0] ('batch') is fixed by the model at 4; exported static"}]}


@pytest.mark.parametrize("imports, call, want, adds_import", [
    ("import torch as T\n", "T.onnx.export", "{0: T.export.Dim.AUTO}", False),
    ("import torch\nfrom torch.export import Dim\n", "torch.onnx.export", "{0: Dim.AUTO}", False),
    ("from torch import onnx\n", "onnx.export", "{0: torch.export.Dim.AUTO}", True),
])
def test_dynamic_axes_become_dim_auto_with_the_files_torch_binding(imports, call, want,
                                                                   adds_import) -> None:
    src = (imports + f"{call}(m, (x,), 'm.onnx', input_names=['x'], "
           "dynamic_axes={'x': {0: 'batch'}, 'y': [0]})\n")
    opts = Options(fix=True)
    out, _, _, _ = fix_text(src, "t.py", opts)
    assert "dynamic_shapes=({0: 'batch'},)" in out and "dynamic_axes" not in out
    out, _, _, _ = fix_text(src, "t.py", opts, {1 + imports.count("\n"): FIXED_RECORD})
    assert f"dynamic_shapes=({want},)" in out and "dynamic_axes" not in out
    assert out.count("import torch\n") == imports.count("import torch\n") + adds_import
    assert fix_text(out, "t.py", opts)[0] == out
    compile(out, "t.py", "exec")


# -- ledger: what only the shim did keeps the call on the shim -----------------------------------

OPSET_RECORD = {"route_taken": "dynamo", "translations": [
    {"code": "ONX002", "option": "opset_version",
     "action": "11: no route could export at opset 11; written at opset 18 by the torch.export route"}]}


BAKED_RECORD = {"route_taken": "dynamo", "translations": [], "baked": [
    {"file": "/src/model.py", "line": 7, "source": "if x.mean() > 0:", "guard": "Eq(u0, 1) -> True"}]}


# (a cache-registration record: the call registers the caches itself, test_real_helpers_finish.py)
@pytest.mark.parametrize("record", [OPSET_RECORD, BAKED_RECORD])
def test_shim_only_translation_routes_the_call_through_compat(record) -> None:
    out = fix("\ntorch.onnx.export(m, (x,), 'm.onnx', opset_version=11, input_names=['x'], "
              "dynamic_axes={'x': {0: 'b'}})\n", {4: record})
    assert "compat.export(m, (x,), 'm.onnx', opset_version=11" in out
    assert "dynamic_axes={'x': {0: 'b'}}" in out and "dynamo=" not in out
    assert "import torch_onnx_compat as compat\n" in out
    # compat.export honours the legacy options: not reported as a wrapper that may forward them
    assert check_text(H + out, "t.py", Options()) == []


def test_one_shim_only_model_of_many_at_a_call_site_routes_it_through_compat(tmp_path) -> None:
    """One script exporting many models: the ledger's records of one call site are merged."""
    site = str(tmp_path / "pkg" / "convert.py") + ":4"
    plain_ok = {"route_taken": "dynamo", "status": "ok", "translations": [], "call_site": site}
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text("\n".join(json.dumps(r) for r in (
        plain_ok, {**OPSET_RECORD, "status": "ok", "call_site": site}, plain_ok)) + "\n")
    verdict = read([str(ledger)]).evidence(str(tmp_path / "pkg" / "convert.py"))[4]
    assert verdict["route_taken"] == "dynamo" and verdict["shim_only"]
    assert "compat.export(" in fix("\ntorch.onnx.export(m, (x,), 'm.onnx')\n", {4: verdict})
    only_plain = tmp_path / "plain.jsonl"
    only_plain.write_text(json.dumps(plain_ok) + "\n")
    verdict = read([str(only_plain)]).evidence(str(tmp_path / "pkg" / "convert.py"))[4]
    assert "shim_only" not in verdict
    assert "dynamo=True" in fix("\ntorch.onnx.export(m, (x,), 'm.onnx')\n", {4: verdict})
