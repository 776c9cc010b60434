"""Per-rule rewrite and noop tests (pyupgrade style): exact output, and idempotency."""

import textwrap

import pytest

from migration.core import Options, check_text, fix_text

H = "import torch\nfrom torch.onnx import TrainingMode, OperatorExportTypes\n"


def rw(src: str, unsafe: bool = False, **kw) -> str:
    """The rewrite of ``H + src`` without the header; a name of H the fix stopped reading must
    have lost its import (issue 18.7)."""
    src = H + textwrap.dedent(src)
    opts = Options(fix=True, unsafe_fixes=unsafe, **kw)
    out, _, _, _ = fix_text(src, "t.py", opts)
    again, fixed, _, _ = fix_text(out, "t.py", opts)
    assert again == out and not fixed, "second run changed something"
    body = "".join(line for line in out.splitlines(keepends=True)
                   if not line.startswith(("import torch\n", "from torch.onnx import ")))
    kept = [n for n in ("TrainingMode", "OperatorExportTypes") if n not in src[len(H):] or n in body]
    header = "import torch\n" + (f"from torch.onnx import {', '.join(kept)}\n" if kept else "")
    lines = out.splitlines(keepends=True)
    for line in header.splitlines(keepends=True):  # imports a fix inserts may sit among H's
        assert line in lines and lines.index(line) < len(header.splitlines()) + 2, out
        lines.remove(line)
    return "".join(lines)


CASES = [
    # ONX001 / ONX101
    ("torch.onnx.export(m, x, 'm.onnx')\n",
     "torch.onnx.export(m, x, 'm.onnx', dynamo=True, external_data=False)\n"),
    ("torch.onnx.export(m, (x, y), 'm.onnx', input_names=['x', 'y'], "
     "dynamic_axes={'x': {0: 'batch'}, 'y': [0, 1], 'out': {0: 'batch'}})\n",
     "torch.onnx.export(m, (x, y), 'm.onnx', input_names=['x', 'y'], "
     "dynamic_shapes=({0: 'batch'}, {0: 'y_dynamic_axes_1', 1: 'y_dynamic_axes_2'}), "
     "dynamo=True, external_data=False)\n"),
    ("torch.onnx.export(m, x, f, dynamic_axes=axes)\n",
     "# TODO(compat.migrate): dynamo=False because dynamic_axes is not a literal this tool can convert;\n"
     "#   write dynamic_shapes\n"
     "torch.onnx.export(m, x, f, dynamic_axes=axes, dynamo=False)\n"),
    # ONX102-107
    ("m.eval()\ntorch.onnx.export(m, x, f, training=TrainingMode.EVAL)\n",
     "m.eval()\ntorch.onnx.export(m, x, f, dynamo=True, external_data=False)\n"),
    ("torch.onnx.export(m, x, f, training=TrainingMode.TRAINING, do_constant_folding=False)\n",
     "# compat.migrate: dynamo=False because training=TrainingMode.TRAINING is ignored by torch's\n"
     "#   torch.export exporter (only compat.export translates it there)\n"
     "torch.onnx.export(m, x, f, training=TrainingMode.TRAINING, do_constant_folding=False, "
     "dynamo=False)\n"),
    ("torch.onnx.export(m, x, f, do_constant_folding=False)\n",
     "torch.onnx.export(m, x, f, optimize=False, dynamo=True, external_data=False)\n"),
    ("torch.onnx.export(m, x, f, operator_export_type=OperatorExportTypes.ONNX_ATEN_FALLBACK)\n",
     "# compat.migrate: dynamo=False because operator_export_type=OperatorExportTypes.ONNX_ATEN_FALLBACK\n"
     "#   is ignored by torch's torch.export exporter (only compat.export translates it there)\n"
     "torch.onnx.export(m, x, f, operator_export_type=OperatorExportTypes.ONNX_ATEN_FALLBACK, "
     "dynamo=False)\n"),
    ("torch.onnx.export(m, x, f, operator_export_type=OperatorExportTypes.ONNX, "
     "do_constant_folding=True, autograd_inlining=True, export_modules_as_functions=False)\n",
     "torch.onnx.export(m, x, f, dynamo=True, external_data=False)\n"),
    ("torch.onnx.export(m, x, f, custom_opsets={'d': 2})\n",
     "# compat.migrate: dynamo=False because custom_opsets={'d': 2} is ignored by torch's torch.export\n"
     "#   exporter (only compat.export translates it there)\n"
     "torch.onnx.export(m, x, f, custom_opsets={'d': 2}, dynamo=False)\n"),
    # ONX2xx
    ("torch.onnx.export(m, x, f, True, False, TrainingMode.EVAL, ['x'], ['y'], "
     "OperatorExportTypes.ONNX, 11, dynamo=False)\n",
     "torch.onnx.export(m, x, f, export_params=True, verbose=False, training=TrainingMode.EVAL, "
     "input_names=['x'], output_names=['y'], operator_export_type=OperatorExportTypes.ONNX, "
     "opset_version=11, dynamo=False)\n"),
    ("torch.onnx.export(m, x, f, True, False, TrainingMode.EVAL, ['x'], ['y'], False, dynamo=False)\n",
     "torch.onnx.export(m, x, f, export_params=True, verbose=False, training=TrainingMode.EVAL, "
     "input_names=['x'], output_names=['y'], dynamo=False)\n"),
    ("torch.onnx.export(m, x, f, strip_doc_string=False, _retain_param_name=True, "
     "use_external_data_format=True, enable_onnx_checker=False, dynamo=False)\n",
     # external_data= is ignored on the TorchScript route: the weights move after the export
     # (an unsafe fix when f may be a file object): see test_semantics.py
     "torch.onnx.export(m, x, f, use_external_data_format=True, dynamo=False)\n"),
    # ONX4xx
    ("torch.onnx.dynamo_export(m, x)\n", "torch.onnx.export(m, (x,), dynamo=True)\n"),
    ("torch.onnx.dynamo_export(m, *xs, **kw)\n",
     "torch.onnx.export(m, (*xs,), kwargs=kw, dynamo=True)\n"),
    ("torch.onnx.utils.export(m, x, f, dynamo=False)\n", "torch.onnx.export(m, x, f, dynamo=False)\n"),
    ("torch.onnx._export(m, x, f, dynamo=False)\n", "torch.onnx.export(m, x, f, dynamo=False)\n"),
    # ONX301
    ("torch.onnx.register_custom_op_symbolic('::gelu', g, 1)\n"
     "torch.onnx.export(m, x, f)\n",
     "import torch_onnx_compat as compat\ncompat.register_custom_op_symbolic('::gelu', g, 1)\n"
     "# compat.migrate: compat.export because custom symbolics without a translation (ONX304: "
     "g at line\n"
     "#   3: no def of this module)\n"
     "compat.export(m, x, f)\n"),
]


@pytest.mark.parametrize("before,after", CASES)
def test_rewrite(before: str, after: str) -> None:
    assert rw(before) == after


NOOPS = [
    "torch.onnx.export(m, x, f, dynamo=True)\n",
    "torch.onnx.export(m, x, f, dynamo=False, dynamic_axes={'x': {0: 'b'}}, training=TrainingMode.TRAINING)\n",
    "torch.onnx.export(m, x, f, dynamo=True, dynamic_shapes=({0: 'b'},))\n",
    "torch.onnx.export(m, x, f, **({'dynamo': False} if TORCH_2_4 else {}))\n",
    "kw = {}\nif 'dynamo' in params:\n    kw['dynamo'] = False\ntorch.onnx.export(m, x, f, **kw)\n",
    "torch.onnx.export(m, x, f, dynamo=False)  # noqa: ONX001\n",
    "torch.onnx.export(m, x, f)  # noqa\n",
    "torch.onnx.export(m, x, f)  # noqa: ONX001\n",
    "import onnx\nonnx.export(m)\nexport(m, x, f)\n",
    "F.dropout(x, training=self.training)\n",
]


@pytest.mark.parametrize("src", NOOPS)
def test_noop(src: str) -> None:
    full = H + src
    out, fixed, remaining, _ = fix_text(full, "t.py", Options(fix=True, unsafe_fixes=True))
    assert out == full
    assert not fixed and not remaining


def test_training_eval_unsafe_adds_model_eval() -> None:
    src = "torch.onnx.export(m, x, f, training=TrainingMode.EVAL)\n"
    assert rw(src) == src.replace(")", ", dynamo=True, external_data=False)")
    assert rw(src, unsafe=True) == (
        "m.eval()\ntorch.onnx.export(m, x, f, dynamo=True, external_data=False)\n")


def test_enable_onnx_checker_unsafe() -> None:
    src = "torch.onnx.export(m, x, 'm.onnx', enable_onnx_checker=True, dynamo=False)\n"
    assert rw(src) == src
    assert rw(src, unsafe=True) == (
        "import onnx\ntorch.onnx.export(m, x, 'm.onnx', dynamo=False)\nonnx.checker.check_model('m.onnx')\n")


def test_select_model_mode_unsafe() -> None:
    src = ("with torch.onnx.select_model_mode_for_export(m, TrainingMode.EVAL):\n"
           "    torch.onnx.export(m, x, f, dynamo=False)\n")
    assert rw(src) == src
    assert rw(src, unsafe=True) == "m.eval()\ntorch.onnx.export(m, x, f, dynamo=False)\n"


def test_multiline_trailing_comma_layout_kept() -> None:
    src = ("torch.onnx.export(\n    m,\n    x,\n    'm.onnx',\n"
           "    example_outputs=y,\n    dynamo=False,\n)\n")
    assert rw(src) == "torch.onnx.export(\n    m,\n    x,\n    'm.onnx',\n    dynamo=False,\n)\n"
    src = "torch.onnx.export(\n    m,\n    x,\n    'm.onnx',\n)\n"
    assert rw(src) == ("torch.onnx.export(\n    m,\n    x,\n    'm.onnx',\n    dynamo=True,\n"
                       "    external_data=False,\n)\n")


def test_select_ignore_prefixes() -> None:
    src = H + "torch.onnx.export(m, x, f, example_outputs=y, do_constant_folding=False)\n"
    codes = {f.code for f in check_text(src, "t.py", Options(select=("ONX2",)))}
    assert codes == {"ONX201"}
    codes = {f.code for f in check_text(src, "t.py", Options(ignore=("ONX0", "ONX104")))}
    assert codes == {"ONX201"}


def test_wrapper_call_reported_without_fix() -> None:
    src = ("def export_onnx(model, x, path, **kwargs):\n"
           "    torch.onnx.export(model, x, path, **kwargs)\n"
           "export_onnx(m, x, 'm.onnx', dynamic_axes={'x': {0: 'b'}})\n")
    found = check_text(H + src, "t.py", Options())
    assert [(f.code, f.line, f.applicability) for f in found] == [
        ("ONX001", 4, "none"), ("ONX101", 5, "none")]


def test_reports_only() -> None:
    src = ("from torch.onnx import symbolic_helper\n"
           "class F(torch.autograd.Function):\n"
           "    @staticmethod\n    def symbolic(g, x):\n        return g.op('Foo', x)\n"
           "opts = torch.onnx.ExportOptions(dynamic_shapes=True)\n")
    found = check_text(H + src, "t.py", Options())
    # F has no forward to make a torch.library op of: ONX304 names it at the class
    assert [(f.code, f.applicability) for f in found] == [
        ("ONX303", "none"), ("ONX304", "none"), ("ONX302", "none"), ("ONX402", "none")]


def test_syntax_error_is_a_finding() -> None:
    found = check_text("import torch\ntorch.onnx.export(m, x\n", "t.py", Options())
    assert [f.code for f in found] == ["E999"]


@pytest.mark.parametrize("value,expected", [
    ("False", "torch.onnx.export(m, x, f, dynamo=False)\n"),
    ("True", "torch.onnx.export(m, x, f, training=torch.onnx.TrainingMode.TRAINING, dynamo=False)\n"),
])
def test_bool_training_of_torch_1x_becomes_a_training_mode(value, expected):
    """torch >= 2 rejects a bool `training` on the TorchScript exporter (TypeError)."""
    assert rw(f"torch.onnx.export(m, x, f, training={value}, dynamo=False)\n") == expected
    assert rw(expected) == expected  # noop once migrated


def test_example_outputs_pins_the_torchscript_exporter_only_for_script_modules():
    plain = rw("torch.onnx.export(m, x, f, example_outputs=y)\n")
    assert plain == "torch.onnx.export(m, x, f, dynamo=True, external_data=False)\n"
    scripted = rw("m = torch.jit.script(Net())\ntorch.onnx.export(m, x, f, example_outputs=y)\n")
    assert scripted.endswith("torch.onnx.export(m, x, f, dynamo=False)\n")
    assert "ScriptModule" in scripted
