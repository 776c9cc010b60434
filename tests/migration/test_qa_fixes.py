"""QA regressions (pyupgrade style): exact rewritten text, noop and idempotency."""

import json
import os
import textwrap

import pytest

from migration.core import Options, check_text, fix_text

H = "import torch\nfrom torch.onnx import TrainingMode\n"


def rw(src: str, unsafe: bool = False, header: str = H, unused: str = "", **kw) -> str:
    """The rewrite of ``header + src`` without its header; ``unused``: the header's
    ``torch.onnx`` name the fix leaves unused, whose import must be gone."""
    src = header + textwrap.dedent(src)
    opts = Options(fix=True, unsafe_fixes=unsafe, **kw)
    out, _, _, _ = fix_text(src, "t.py", opts)
    again, fixed, _, _ = fix_text(out, "t.py", opts)
    assert again == out and not fixed, "second run changed something"
    if unused:
        header = without_import(header, unused)
        assert out.startswith(header), out
    return out[len(header):] if out.startswith(header) else out


def without_import(header: str, name: str) -> str:
    """``header`` without ``name`` in its ``from torch.onnx import`` line: the import a fix that
    stops reading ``name`` removes (issue 18.7)."""
    out = []
    for line in header.splitlines(keepends=True):
        prefix = "from torch.onnx import "
        if line.startswith(prefix):
            names = [n for n in line[len(prefix):].strip().split(", ") if n != name]
            if not names:
                continue
            line = prefix + ", ".join(names) + "\n"
        out.append(line)
    return "".join(out)


EXPORT_EVAL = "torch.onnx.export(model, (x,), 'm.onnx', training=TrainingMode.EVAL)\n"
DYNAMO = "torch.onnx.export(model, (x,), 'm.onnx', dynamo=True, external_data=False)\n"


# 1. the model's mode comes from the last mode-setting statement, read from the AST
@pytest.mark.parametrize("before", [
    "model.eval(); validate(model); model.train()\n",
    "model.eval()\nvalidate(model)\nmodel.train(True)\n",
    "# model.eval()\n",
    "s = 'model.eval()'\n",
    "model.eval()\nif retrain:\n    model.train()\n",
    "model.eval()\nmodel = build()\n",
])
def test_eval_not_evident(before: str) -> None:
    assert rw(before + EXPORT_EVAL) == before + DYNAMO.replace("dynamo=True", "training=TrainingMode.EVAL, dynamo=True")
    assert rw(before + EXPORT_EVAL, unsafe=True, unused="TrainingMode") == \
        before + "model.eval()\n" + DYNAMO


@pytest.mark.parametrize("before", [
    "model.train()\nmodel.eval()\n",
    "model.train(False)\n",
    "model = Net().eval().to(dev)\n",
    "model.eval()\nmodel = model.to(dev)\nwith torch.no_grad():\n    pass\n",
])
def test_eval_evident(before: str) -> None:
    assert rw(before + EXPORT_EVAL, unused="TrainingMode") == before + DYNAMO


def test_eval_evident_through_with_block() -> None:
    src = "model.eval()\nwith torch.no_grad():\n    " + EXPORT_EVAL
    assert rw(src, unused="TrainingMode") == "model.eval()\nwith torch.no_grad():\n    " + DYNAMO


# 2. old opsets: exported at 18, then a visible compat.convert_opset step (issue 30.1); pinned
# to the TorchScript exporter only where the step cannot follow
def test_old_opset_exports_at_18_then_converts() -> None:
    src = "torch.onnx.export(model, (x,), 'd.onnx', opset_version=11)\n"
    assert rw(src) == (  # the inserted import sits among H's, where ruff's isort puts it
        "import torch\nimport torch_onnx_compat as compat\nfrom torch.onnx import TrainingMode\n"
        "# compat.migrate: torch exports opset 18 here; compat.convert_opset brings the file down to\n"
        "#   opset_version=11\n"
        "torch.onnx.export(model, (x,), 'd.onnx', opset_version=18, dynamo=True, external_data=False)\n"
        "compat.convert_opset('d.onnx', 11, out='d.onnx')\n")
    src = "torch.onnx.export(model, (x,), path, opset_version=11)\n"  # path may be a file object
    assert rw(src) == (
        "# compat.migrate: dynamo=False because opset_version=11 is below 18, the lowest opset the\n"
        "#   torch.export exporter builds\n"
        "torch.onnx.export(model, (x,), path, opset_version=11, dynamo=False)\n")
    src = "torch.onnx.export(model, (x,), 'd.onnx', opset_version=18)\n"
    assert rw(src) == "torch.onnx.export(model, (x,), 'd.onnx', opset_version=18, dynamo=True, external_data=False)\n"


def test_old_opset_follows_ledger_evidence() -> None:
    src = H + "torch.onnx.export(model, (x,), path, opset_version=11)\n"
    out, _, _, _ = fix_text(src, "t.py", Options(fix=True), evidence={
        3: {"route_taken": "dynamo", "output": "/o/d.onnx"}})
    assert out == (
        "import torch\nimport torch_onnx_compat as compat\nfrom torch.onnx import TrainingMode\n"
        "# compat.migrate: torch exports opset 18 here; compat.convert_opset brings the file down to\n"
        "#   opset_version=11\n"
        "torch.onnx.export(model, (x,), path, opset_version=18, dynamo=True, external_data=False)\n"
        "compat.convert_opset(path, 11, out=path)\n")


def test_old_opset_converted_with_rewritten_nodes_converts_after_the_call() -> None:
    """The step runs the shim's own down-conversion, and ``run --observe`` records the file as
    the step leaves it (part of the call site): rewritten nodes no longer keep compat.export."""
    src = H + "torch.onnx.export(model, (x,), 'd.onnx', opset_version=11)\n"
    action = ("11: built at 18, converted to 11 by compat's down-conversion ({} nodes rewritten, "
              "{} relabelled); IR version 6")
    record = {"route_taken": "dynamo", "model": "Net", "output": "/o/d.onnx",
              "translations": [{"code": "ONX001", "option": "opset_version"}]}
    for counts in ((2, 2), (0, 1), (0, 0)):
        record["translations"][0]["action"] = action.format(*counts)
        out, _, _, _ = fix_text(src, "t.py", Options(fix=True), evidence={3: record})
        assert "opset_version=18, dynamo=True" in out and "compat.export(" not in out
        assert "compat.convert_opset('d.onnx', 11, out='d.onnx')" in out


# 3. training=None (torch 1.11 layout default) is EVAL
def test_positional_training_none_dropped() -> None:
    src = "torch.onnx.export(m, x, f, True, False, None, dynamo=False)\n"
    assert rw(src) == "torch.onnx.export(m, x, f, export_params=True, verbose=False, dynamo=False)\n"
    src = "m.eval()\ntorch.onnx.export(m, x, f, True, False, None)\n"
    assert rw(src) == ("m.eval()\ntorch.onnx.export(m, x, f, export_params=True, verbose=False, "
                       "dynamo=True, external_data=False)\n")


# 4. inserted imports never rebind a name of the file
def test_inserted_onnx_import_does_not_shadow() -> None:
    header = "import torch\nfrom torch import onnx\n"
    src = "torch.onnx.export(m, x, 'm.onnx', enable_onnx_checker=True, dynamo=False)\n"
    assert rw(src, unsafe=True, header=header) == (
        "import onnx as _onnx\nimport torch\nfrom torch import onnx\n"
        "torch.onnx.export(m, x, 'm.onnx', dynamo=False)\n_onnx.checker.check_model('m.onnx')\n")


def test_inserted_compat_import_does_not_shadow() -> None:
    header = "import torch\nfrom mylib import compat\n"
    src = "torch.onnx.register_custom_op_symbolic('::gelu', g, 1)\n"
    assert rw(src, header=header) == (
        "import torch\nimport torch_onnx_compat as _compat\nfrom mylib import compat\n"
        "_compat.register_custom_op_symbolic('::gelu', g, 1)\n")


# the inserted import is the installed name (the wheel has no top-level `compat`); an import of
# the shim the file already has, under either name, is reused
SYMBOLIC_EXPORT = "torch.onnx.register_custom_op_symbolic('::gelu', g, 1)\ntorch.onnx.export(m, x, f)\n"


@pytest.mark.parametrize("imported,ref", [
    ("", "compat"),
    ("import torch_onnx_compat as tc\n", "tc"),
    ("import torch_onnx_compat\n", "torch_onnx_compat"),
    ("import compat\n", "compat"),  # a checkout's spelling
])
def test_shim_import_is_the_installed_name_or_reused(imported, ref) -> None:
    header = "import torch\n" + imported
    added = "" if imported else "import torch_onnx_compat as compat\n"
    assert rw(SYMBOLIC_EXPORT, header=header) == (
        f"{added}{ref}.register_custom_op_symbolic('::gelu', g, 1)\n"
        "# compat.migrate: compat.export because custom symbolics without a translation (ONX304: "
        "g at line\n"
        f"#   {3 if imported else 2}: no def of this module)\n{ref}.export(m, x, f)\n")


SYMBOLIC_CLASS = ("class F(torch.autograd.Function):\n"
                  "    @staticmethod\n    def symbolic(g, x):\n        return g.op('Foo', x)\n")


@pytest.mark.parametrize("imported,reported", [
    ("import torch_onnx_compat as compat\n", False),
    ("import compat\n", False),
    ("from torch_onnx_compat import export\n", False),
    ("import compat_utils\n", True),  # not the shim
    ("", True),
])
def test_symbolic_class_reported_unless_the_shim_is_imported(imported, reported) -> None:
    found = check_text("import torch\n" + imported + SYMBOLIC_CLASS, "t.py", Options())
    assert ("ONX302" in [f.code for f in found]) is reported


# 5. statement-inserting fixes only for export calls that are statements of a block
@pytest.mark.parametrize("src", [
    "def f():\n    return torch.onnx.export(m, x, 'm.onnx', enable_onnx_checker=True, dynamo=False)\n",
    "if c: torch.onnx.export(m, x, 'm.onnx', enable_onnx_checker=True, dynamo=False)\n",
    "g = lambda: torch.onnx.export(m, x, 'm.onnx', enable_onnx_checker=True, dynamo=False)\n",
    "if c: torch.onnx.export(m, x, f, training=TrainingMode.EVAL, dynamo=True)\n",
    "g = lambda m: torch.onnx.export(m, x, f, training=TrainingMode.EVAL, dynamo=True)\n",
    "[torch.onnx.export(m, x, f, training=TrainingMode.EVAL, dynamo=True) for m in ms]\n",
])
def test_no_statement_insertion_outside_blocks(src: str) -> None:
    assert rw(src, unsafe=True) == src
    found = check_text(H + src, "t.py", Options())
    assert [f.applicability for f in found if f.code in ("ONX102", "ONX203")] == ["none"]


def test_statement_insertion_for_assignment() -> None:
    src = "def f():\n    p = torch.onnx.export(m, x, f, training=TrainingMode.EVAL, dynamo=True)\n"
    assert rw(src, unsafe=True, unused="TrainingMode") == (
        "def f():\n    m.eval()\n    p = torch.onnx.export(m, x, f, dynamo=True)\n")


# 7. suppressed or unselected findings contribute no edits
def test_noqa_onx101_makes_no_pin() -> None:
    src = "torch.onnx.export(m, x, 'm.onnx', dynamic_axes=axes)  # noqa: ONX101\n"
    assert rw(src) == ("torch.onnx.export(m, x, 'm.onnx', dynamic_axes=axes, dynamo=True, "
                       "external_data=False)  # noqa: ONX101\n")


@pytest.mark.parametrize("kw", [{"select": ("ONX101",)}, {"ignore": ("ONX0",)}])
def test_unselected_onx001_adds_nothing(kw) -> None:
    src = ("torch.onnx.export(m, (x,), 'm.onnx', input_names=['x'], "
           "dynamic_axes={'x': {0: 'b'}})\n")
    assert rw(src, **kw) == src
    found = check_text(H + src, "t.py", Options(**kw))
    assert [(f.code, f.applicability) for f in found] == [("ONX101", "none")]


def test_unselected_onx0_keeps_onx2_fixes() -> None:
    src = "torch.onnx.export(m, x, 'm.onnx', strip_doc_string=False)\n"
    assert rw(src, ignore=("ONX0",)) == "torch.onnx.export(m, x, 'm.onnx')\n"


# 15. f passed through *args: external_data=False like any other call with a file
def test_star_args_gets_external_data() -> None:
    assert rw("torch.onnx.export(m, *args)\n") == (
        "torch.onnx.export(m, *args, dynamo=True, external_data=False)\n")


# 8. ledger call sites recorded under another checkout's absolute path
def test_ledger_matches_by_path_suffix(tmp_path, capsys, monkeypatch):
    from migration.cli import main
    from migration.ledger import LedgerIndex

    src = tmp_path / "repo" / "src" / "a.py"
    src.parent.mkdir(parents=True)
    src.write_text("import torch\ntorch.onnx.export(m, x, 'a.onnx')\n")
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(json.dumps({"call_site": "/builds/x/repo/src/a.py:2", "route_taken": "legacy",
                                  "status": "ok", "fallback_reason": "boom"}) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["--write", "--ledger", str(ledger), "repo"]) == 0
    assert src.read_text() == ("import torch\n# compat.migrate: dynamo=False (ledger: boom)\n"
                               "torch.onnx.export(m, x, 'a.onnx', dynamo=False)\n")
    assert "warning" not in capsys.readouterr().err
    # only the file name agrees (another folder): no match, a usage error naming both roots
    other = LedgerIndex()
    other.add({"call_site": "/builds/x/other/a.py:2", "route_taken": "legacy"}, str(tmp_path))
    assert other.evidence(str(src)) == {}
    ledger.write_text(json.dumps({"call_site": "/builds/x/other/a.py:2", "route_taken": "legacy",
                                  "status": "ok"}) + "\n")
    assert main(["--check", "--ledger", str(ledger), "repo"]) == 2
    err = capsys.readouterr().err
    assert "no call site of the ledger" in err and "/builds/x/other" in err
    assert f"rooted at {tmp_path / 'repo'}" in err


# 10. --check work is linear in the calls of a file: counted in interpreter operations
# (Python and C function calls, a deterministic measure), never in wall time
def _check_operations(n_calls: int) -> tuple[int, int]:
    import sys

    calls = "".join(f"m{i}.eval()\ntorch.onnx.export(m{i}, (x,), 'a{i}.onnx', training=TrainingMode.EVAL,"
                    " example_outputs=y, dynamic_axes=ax, **kw)\n" for i in range(n_calls))
    operations = 0

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal operations
        operations += 1

    check_text(H + "m.eval()\ntorch.onnx.export(m, (x,), 'a.onnx')\n", "t.py", Options())  # warm caches
    sys.setprofile(count)
    try:
        found = check_text(H + calls, "t.py", Options())
    finally:
        sys.setprofile(None)
    return operations, len(found)


def test_check_is_linear_in_calls_per_file() -> None:
    small, found_small = _check_operations(200)
    large, found_large = _check_operations(800)
    assert found_small >= 400 and found_large == 4 * found_small
    # 4x the calls: 4x the operations when linear, 16x when quadratic (it was, ~80 s at 3000)
    assert large / small < 6, (small, large)


# 9. dynamic_axes=None is the default; unmappable literal axes say why
def test_dynamic_axes_none_dropped_and_reasons() -> None:
    assert rw("torch.onnx.export(m, x, f, dynamic_axes=None)\n") == (
        "torch.onnx.export(m, x, f, dynamo=True, external_data=False)\n")
    assert rw("torch.onnx.export(m, x, f, dynamic_axes={'x': {0: 'b'}})\n") == (
        "# TODO(compat.migrate): dynamo=False because dynamic_axes needs literal input_names to be mapped to\n"
        "#   the inputs; write dynamic_shapes\n"
        "torch.onnx.export(m, x, f, dynamic_axes={'x': {0: 'b'}}, dynamo=False)\n")
    out = rw("torch.onnx.export(m, (x, {'y': y}), f, input_names=['x'], dynamic_axes={'x': [0]})\n")
    assert "dynamic_axes cannot be mapped to the inputs" in out and "not a literal" not in out


# 14. the code is not repeated in messages
def test_message_does_not_repeat_code() -> None:
    from migration import output

    (f,) = check_text(H + "torch.onnx.export(m, x, f)\n", "t.py", Options())
    assert not f.message.startswith("ONX001")
    assert output.github([f]).count("ONX001 ONX001") == 0
    assert "ONX001 ONX001" not in output.text([f])


# A. comments in multi-line calls stay once, with their own argument (a dropped argument's go
# with it, issue 18.7); new keywords get none
def test_multiline_comments_drop_and_add() -> None:
    src = ("torch.onnx.export(\n"
           "    m, (x,), 'n.onnx',\n"
           "    # keep the old doc strings\n"
           "    strip_doc_string=False,\n"
           "    opset_version=18,  # pinned for TensorRT\n"
           ")\n")
    assert rw(src) == ("torch.onnx.export(\n"
                       "    m, (x,), 'n.onnx',\n"
                       "    opset_version=18,  # pinned for TensorRT\n"
                       "    dynamo=True,\n"
                       "    external_data=False,\n"
                       ")\n")


def test_multiline_comments_old_opset_pin() -> None:
    src = ("def f():\n"
           "    torch.onnx.export(\n"
           "        m, (x,), path,\n"
           "        # keep the old doc strings\n"
           "        strip_doc_string=False,\n"
           "        opset_version=13,  # pinned for TensorRT 7\n"
           "    )\n")
    out = rw(src)
    assert out.endswith("        m, (x,), path,\n"
                        "        opset_version=13,  # pinned for TensorRT 7\n"
                        "        dynamo=False,\n"
                        "    )\n")
    assert "# keep the old doc strings" not in out


def test_multiline_removed_keyword_comments_go_with_it() -> None:
    src = ("torch.onnx.export(\n"
           "    m, (x,), 'n.onnx',\n"
           "    # about the folding\n"
           "\n"
           "    # strip\n"
           "    strip_doc_string=False,  # strip it\n"
           "    opset_version=18,  # pinned\n"
           "    do_constant_folding=True,  # fold\n"
           "    # end of the options\n"
           ")\n")
    assert rw(src) == ("torch.onnx.export(\n"
                       "    m, (x,), 'n.onnx',\n"
                       "    # about the folding\n"
                       "\n"
                       "    opset_version=18,  # pinned\n"
                       "    dynamo=True,\n"
                       "    external_data=False,\n"
                       "    # end of the options\n"
                       ")\n")
    src = ("torch.onnx.export(m, x, 'm.onnx', do_constant_folding=True,  # fold\n"
           "                  opset_version=18)\n")
    assert rw(src) == ("torch.onnx.export(m, x, 'm.onnx',\n"
                       "                  opset_version=18, dynamo=True, external_data=False)\n")


def test_multiline_last_argument_comment_without_trailing_comma() -> None:
    src = "torch.onnx.export(\n    m, (x,), 'n.onnx',\n    opset_version=18  # pinned\n)\n"
    assert rw(src) == ("torch.onnx.export(\n    m, (x,), 'n.onnx',\n    opset_version=18,  # pinned\n"
                       "    dynamo=True,\n    external_data=False\n)\n")


def test_multiline_noqa_stays_on_its_line() -> None:
    src = "torch.onnx.export(\n    m, x, 'm.onnx',\n    dynamic_axes=axes,  # noqa: ONX101\n)\n"
    assert rw(src) == ("torch.onnx.export(\n    m, x, 'm.onnx',\n"
                       "    dynamic_axes=axes,  # noqa: ONX101\n"
                       "    dynamo=True,\n    external_data=False,\n)\n")


# B. config values are checked; config excludes are relative to their pyproject.toml
def _cli(capsys, *argv):
    from migration.cli import main

    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("line, needle", [
    ('jobs = "many"', "jobs must be an integer"),
    ("jobs = true", "jobs must be an integer"),
    ('unsafe-fixes = "false"', "unsafe-fixes must be true or false"),
    ("select = 3", "select must be a list"),
    ('select = "XYZ"', "not a rule code"),
    ("output-format = 1", "output-format must be a string"),
])
def test_bad_config_values_exit_2(tmp_path, capsys, monkeypatch, line, needle) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.torch-onnx-compat.migrate]\n{line}\n")
    (tmp_path / "a.py").write_text("import torch\ntorch.onnx.export(m, x, 'm.onnx')\n")
    monkeypatch.chdir(tmp_path)
    rc, _, err = _cli(capsys, "--check", "a.py")
    assert rc == 2 and needle in err and "Traceback" not in err


def test_config_select_string_is_comma_list(tmp_path, capsys, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torch-onnx-compat.migrate]\nselect = "ONX2, ONX101"\nunsafe-fixes = false\n')
    (tmp_path / "a.py").write_text(
        "import torch\ntorch.onnx.export(m, x, 'm.onnx', example_outputs=y)\n")
    monkeypatch.chdir(tmp_path)
    rc, out, _ = _cli(capsys, "--check", "--output-format", "json", "a.py")
    assert rc == 1 and [d["code"] for d in json.loads(out)] == ["ONX201"]


def test_config_exclude_relative_to_pyproject(tmp_path, capsys, monkeypatch) -> None:
    legacy = "import torch\ntorch.onnx.export(m, x, 'm.onnx')\n"
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torch-onnx-compat.migrate]\nexclude = ["third_party/"]\n')
    for d in ("src/third_party", "third_party", "src/pkg"):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
        (tmp_path / d / "a.py").write_text(legacy)
    monkeypatch.chdir(tmp_path / "src")
    rc, out, _ = _cli(capsys, "--output-format", "json", ".", "..")
    paths = sorted(os.path.relpath(d["path"], tmp_path / "src") for d in json.loads(out))
    assert paths == [os.path.join("pkg", "a.py")]
    # --exclude stays relative to the working directory
    (tmp_path / "pyproject.toml").write_text("[tool.torch-onnx-compat.migrate]\n")
    rc, out, _ = _cli(capsys, "--output-format", "json", "--exclude", "/pkg/", ".")
    assert sorted(os.path.relpath(d["path"]) for d in json.loads(out)) == [
        os.path.join("third_party", "a.py")]


# C. notebooks: invalid JSON is an E999 finding, the JSON style is kept, cells are reported
NB_CELL = "import torch\ntorch.onnx.export(m, x, 'm.onnx')\n"


def _nb(cells: list[str]) -> dict:
    return {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                       "outputs": [], "source": c.splitlines(keepends=True)} for c in cells],
            "metadata": {"k": "é"}, "nbformat": 4, "nbformat_minor": 5}


def test_invalid_notebook_is_e999_and_run_goes_on(tmp_path, capsys) -> None:
    (tmp_path / "bad.ipynb").write_text('{"cells": [torch.onnx.export\n')
    (tmp_path / "a.py").write_text(NB_CELL)
    rc, out, err = _cli(capsys, "--output-format", "json", str(tmp_path))
    found = {(os.path.basename(d["path"]), d["code"]) for d in json.loads(out)}
    assert rc == 1 and found == {("bad.ipynb", "E999"), ("a.py", "ONX001")}
    assert "internal error" not in err


@pytest.mark.parametrize("kw", [
    {"separators": (",", ":")},
    {},
    {"indent": 2},
    {"indent": 4, "ensure_ascii": True},
    {"indent": 1},
])
@pytest.mark.parametrize("end", ["", "\n"])
def test_notebook_json_style_kept(tmp_path, capsys, kw, end) -> None:
    p = tmp_path / "n.ipynb"
    nb = _nb(["x = 1\n", NB_CELL])
    p.write_text(json.dumps(nb, **kw) + end, encoding="utf-8")
    assert _cli(capsys, "--write", str(p))[0] == 0
    nb["cells"][1]["source"] = [
        "import torch\n", "torch.onnx.export(m, x, 'm.onnx', dynamo=True, external_data=False)\n"]
    assert p.read_text(encoding="utf-8") == json.dumps(nb, **kw) + end


def test_notebook_findings_name_the_cell(tmp_path, capsys) -> None:
    p = tmp_path / "n.ipynb"
    p.write_text(json.dumps(_nb(["x = 1\n", NB_CELL]), indent=1) + "\n")
    rc, out, _ = _cli(capsys, "--output-format", "json", str(p))
    (d,) = json.loads(out)
    assert (d["cell"], d["line"], d["column"]) == (2, 2, 1) and "cell" not in d["message"]
    assert f"{p}:cell 2:2:1: ONX001" in _cli(capsys, str(p))[1]
    assert "::cell 2:2:1: ONX001" in _cli(capsys, "--output-format", "github", str(p))[1]
    (tmp_path / "a.py").write_text(NB_CELL)
    rc, out, _ = _cli(capsys, "--output-format", "json", str(tmp_path / "a.py"))
    assert "cell" not in json.loads(out)[0]


# D. --statistics honours --output-format json; a symlink to a file of the tree counts once
def test_statistics_json(tmp_path, capsys) -> None:
    (tmp_path / "a.py").write_text(
        "import torch\ntorch.onnx.export(m, x, 'm.onnx', example_outputs=y)\n"
        "torch.onnx.export(m, x, 'n.onnx')\n")
    rc, out, _ = _cli(capsys, "--statistics", "--output-format", "json", str(tmp_path))
    stats = {d["code"]: d for d in json.loads(out)}
    assert rc == 1 and stats["ONX001"]["count"] == 2 and stats["ONX201"]["fixable"] == 1
    assert set(stats["ONX201"]) == {"code", "count", "fixable", "message"}


def test_symlink_inside_tree_processed_once(tmp_path, capsys) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "real.py").write_text(NB_CELL)
    (tmp_path / "alias.py").symlink_to(tmp_path / "pkg" / "real.py")
    rc, out, _ = _cli(capsys, "--output-format", "json", str(tmp_path), str(tmp_path / "pkg"))
    assert [os.path.basename(d["path"]) for d in json.loads(out)] == ["real.py"]
    assert _cli(capsys, "--write", str(tmp_path))[0] == 0
    assert (tmp_path / "alias.py").is_symlink()
    assert "dynamo=True" in (tmp_path / "pkg" / "real.py").read_text()
