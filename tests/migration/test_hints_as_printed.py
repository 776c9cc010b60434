"""Every finding's hint works as printed: its ``Migrate with:`` command, run as printed in the
checkout on a file holding the usage, fixes that finding and leaves a file that compiles; a
finding without a fix prints no ``--fix`` command but what to do instead."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from compat import catalog
from compat.torch_apis import default_target
from migration.core import Options, check_text

# slow (runs each printed hint as a fresh process): CI runs it in its own step, `make test-slow`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HEAD = "import torch\nimport torch.onnx\n\n"
#: usages beyond the catalog's examples: other values, forms and the no-fix cases
EXTRA = {
    "ONX101-other": 'torch.onnx.export(model, (x,), "model.onnx", dynamic_axes=AXES)',
    "ONX102-unsafe": ('torch.onnx.export(model, (x,), "model.onnx", '
                      'training=torch.onnx.TrainingMode.EVAL)'),
    "ONX102-training": ('torch.onnx.export(model, (x,), "model.onnx", '
                        'training=torch.onnx.TrainingMode.TRAINING)'),
    "ONX103-aten": ('torch.onnx.export(model, (x,), "model.onnx", '
                    'operator_export_type=torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK)'),
    "ONX104-false": 'torch.onnx.export(model, (x,), "model.onnx", do_constant_folding=False)',
    "ONX104-positional": ('torch.onnx.export(model, (x,), "model.onnx", True, False, None, ["x"], '
                          '["y"], None, 18, False)'),
    "ONX105-wrapper": 'export_model(model, x, custom_opsets={"mydomain": 1})',
    "ONX202-false": 'torch.onnx.export(model, (x,), "model.onnx", use_external_data_format=False)',
    "ONX202-legacy": ('torch.onnx.export(model, (x,), "model.onnx", use_external_data_format=True, '
                      "opset_version=11)"),
    "ONX206-1x": ('torch.onnx.export(model, (x,), "model.onnx", True, False, False, ["x"], ["y"], '
                  "False, False)"),
    "ONX207-ledgerless": 'torch.onnx.export(model, (x,), "model.onnx", fallback=True)',
    "ONX208-raw": 'torch.onnx.export(model, (x,), "model.onnx", export_raw_ir=True)',
    "ONX404-nonliteral": ("with torch.onnx.select_model_mode_for_export(model, mode):\n"
                          '    torch.onnx.export(model, (x,), "model.onnx")'),
}
FIXTURES = {**{code: before for code, (before, _) in catalog.EXAMPLES.items()}, **EXTRA}


def _findings(path: Path) -> list:
    """As the CLI finds them: for its default --target-torch (the installed torch)."""
    return check_text(path.read_text(), str(path), Options(target_torch=default_target()))


def _hint(message: str) -> str | None:
    at = message.find(catalog.MIGRATE_WITH)
    return message[at + len(catalog.MIGRATE_WITH):].split(" [", 1)[0] if at >= 0 else None


def _cases() -> list[tuple[str, str]]:
    """(fixture, code) for every finding the fixtures have."""
    out = []
    for name, usage in FIXTURES.items():
        codes = {f.code for f in check_text(HEAD + usage + "\n", "f.py", Options())}
        out.extend((name, code) for code in sorted(codes))
    return out


def test_every_code_has_a_fixture_finding():
    # known only at run time: an opset no route reached, a branch baked at the example's values
    runtime_only = {"ONX002", "ONX003"}
    assert {code for _, code in _cases()} == set(catalog.BY_CODE) - runtime_only


@pytest.mark.parametrize("fixture, code", _cases())
def test_hint_works_as_printed(fixture: str, code: str, tmp_path: Path) -> None:
    path = tmp_path / "my scripts" / "export.py"
    path.parent.mkdir()
    path.write_text(HEAD + FIXTURES[fixture] + "\n")
    finding = next(f for f in _findings(path) if f.code == code)
    message, hint = finding.message, _hint(finding.message)
    if finding.applicability == "none":
        assert hint is None and "--fix" not in message and catalog.NO_FIX in message, message
        return
    assert hint is not None and hint.startswith("python -m compat.migrate --fix "), message
    assert ("--unsafe-fixes" in hint) == (finding.applicability == "unsafe"), message
    if "ONX206" in hint:  # selected only where options are passed positionally
        assert any(f.code == "ONX206" for f in _findings(path)), message
    argv = shlex.split(hint)
    assert argv[0] == "python" and argv[-1] == str(path)  # the real path, quoted for the shell
    argv[0] = sys.executable  # the user's python: the one with this checkout's dependencies
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                         check=False)
    assert run.returncode in (0, 1), run.stderr
    text = path.read_text()
    compile(text, str(path), "exec")
    assert code not in {f.code for f in _findings(path)}, (hint, text)


def test_an_unsafe_fix_hint_without_unsafe_fixes_would_fix_nothing(tmp_path: Path) -> None:
    """Why the flag is printed: ONX203's fix is unsafe, and --fix alone leaves it."""
    path = tmp_path / "export.py"
    path.write_text(HEAD + FIXTURES["ONX203"] + "\n")
    from migration.core import fix_text

    out, fixed, _, _ = fix_text(path.read_text(), str(path), Options(fix=True, select=("ONX203",)))
    assert not fixed and out == path.read_text()


def test_onx206_is_selected_only_for_positional_options(tmp_path: Path) -> None:
    path = tmp_path / "export.py"
    path.write_text(HEAD + FIXTURES["ONX104-false"] + "\n" + FIXTURES["ONX104-positional"] + "\n")
    by_line = {(f.line, f.code): f.message for f in _findings(path)}
    assert "ONX206" not in _hint(by_line[(4, "ONX104")])
    assert "ONX206" in _hint(by_line[(5, "ONX104")])
