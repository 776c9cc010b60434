"""ruff habits of the rewriter's CLI: ``--add-noqa`` (a ``# noqa`` where the noqa check looks for it,
nothing else changed), ``--output-format full``, the command named as typed."""

import json
import subprocess
import sys
from pathlib import Path

from migration.cli import main
from migration.core import Options, check_text
from migration.noqa import add_noqa

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


MULTI = (
    'import torch\n'
    'torch.onnx.export(model, x, "m.onnx",  # keep this comment\n'
    '    dynamic_axes={"x": {0: "b"}}, opset_version=11)\n'
    'torch.onnx.export(m, x, "n.onnx", opset_version=18)  # noqa: E501\n'
    's = """\n'
    '"""; torch.onnx.export(m, x, \\\n'
    '  "k.onnx", example_outputs=y)\n'
)
NOQAED = (
    'import torch\n'
    'torch.onnx.export(model, x, "m.onnx",  # keep this comment  # noqa: ONX001\n'
    '    dynamic_axes={"x": {0: "b"}}, opset_version=11)  # noqa: ONX101\n'
    'torch.onnx.export(m, x, "n.onnx", opset_version=18)  # noqa: E501, ONX001\n'
    's = """\n'
    '"""; torch.onnx.export(m, x, \\\n'
    '  "k.onnx", example_outputs=y)  # noqa: ONX001, ONX201\n'
)


def test_add_noqa_merges_keeps_comments_and_check_is_clean_after(tmp_path, capsys):
    p = tmp_path / "a.py"
    p.write_text(MULTI)
    assert run(capsys, "--check", str(p))[0] == 1
    rc, out, err = run(capsys, "--add-noqa", str(p))
    assert (rc, out) == (0, "") and err == "Added 4 noqa directives.\n"
    assert p.read_text() == NOQAED
    # the noqa check finds every directive where --add-noqa put it
    rc, out, _ = run(capsys, "--check", "--output-format", "json", str(p))
    assert rc == 0 and json.loads(out) == []
    # idempotent: a second run adds nothing and says nothing
    assert run(capsys, "--add-noqa", str(p)) == (0, "", "")
    assert p.read_text() == NOQAED


def test_add_noqa_keeps_line_endings_and_encoding(tmp_path, capsys):
    src = ('# -*- coding: latin-1 -*-\r\nimport torch\r\n'
           'torch.onnx.export(m, x, "caf\xe9.onnx", dynamo=False, example_outputs=y)\r\n')
    p = tmp_path / "a.py"
    p.write_bytes(src.encode("latin-1"))
    rc, _, err = run(capsys, "--add-noqa", str(p))
    assert rc == 0 and err == "Added 1 noqa directive.\n"
    assert p.read_bytes() == src.replace("y)\r\n", "y)  # noqa: ONX201\r\n").encode("latin-1")
    assert run(capsys, "--check", "-q", str(p)) == (0, "", "")


def test_add_noqa_respects_select_and_ignore(tmp_path, capsys):
    p = tmp_path / "a.py"
    p.write_text('import torch\ntorch.onnx.export(m, x, "m.onnx", example_outputs=y)\n')
    assert run(capsys, "--add-noqa", "--select", "ONX2", str(p))[0] == 0
    assert p.read_text().endswith("example_outputs=y)  # noqa: ONX201\n")
    # ONX001 was not selected, so it is still reported
    rc, out, _ = run(capsys, "--check", "--output-format", "json", str(p))
    assert rc == 1 and [f["code"] for f in json.loads(out)] == ["ONX001"]
    assert run(capsys, "--add-noqa", "--ignore", "ONX001", str(p)) == (0, "", "")
    assert run(capsys, "--add-noqa", str(p))[0] == 0
    assert p.read_text().endswith("example_outputs=y)  # noqa: ONX201, ONX001\n")


def test_add_noqa_leaves_what_it_cannot_suppress_and_exits_1(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ntorch.onnx.export(m, x, 'm.onnx'\n")
    rc, _, err = run(capsys, "--add-noqa", str(bad))
    assert rc == 1 and "E999: no noqa directive added" in err
    assert bad.read_text() == "import torch\ntorch.onnx.export(m, x, 'm.onnx'\n"


def test_add_noqa_is_a_mode_and_never_reads_stdin(tmp_path, capsys):
    assert run(capsys, "--add-noqa", "--fix", str(tmp_path))[0] == 2
    assert run(capsys, "--add-noqa", "-")[0] == 2


def test_a_line_ending_inside_a_string_takes_its_noqa_at_the_end_of_the_string():
    # ONX001's only line ends inside a multi-line string: the noqa goes where the string ends
    src = 'import torch\ntorch.onnx.export(m, x, """a\nb""", example_outputs=y)\n'
    new, n, left = add_noqa(src, check_text(src, "a.py", Options()))
    assert (n, left) == (1, [])
    assert new == src.replace("y)\n", "y)  # noqa: ONX001, ONX201\n")
    assert check_text(new, "a.py", Options()) == []
    # a noqa naming only ONX201 there still leaves ONX001 reported
    only = src.replace("y)\n", "y)  # noqa: ONX201\n")
    assert [f.code for f in check_text(only, "a.py", Options())] == ["ONX001"]


def test_full_output_shows_the_line_a_caret_and_the_fix_concise_is_the_default(tmp_path, capsys):
    p = tmp_path / "a.py"
    p.write_text('import torch\ndef f():\n\ttorch.onnx.export(m, x, "a.onnx", dynamo=False, '
                 'example_outputs=y)\n')
    rc, out, _ = run(capsys, "--output-format", "full", str(p))
    head, *snippet, help_line, blank, summary = out.split("\n")[:8]
    assert rc == 1 and head.startswith(f"{p}:3:66: ONX201 [*] `example_outputs=`")
    assert "Migrate with" not in head
    assert snippet == [
        "  |",
        '3 | \ttorch.onnx.export(m, x, "a.onnx", dynamo=False, example_outputs=y)',
        "  | \t" + " " * 64 + "^ ONX201",
        "  |",
    ]
    assert help_line.startswith("  = help: Migrate with: ") and help_line.endswith(
        f"--fix --select ONX201 {p}")
    assert blank == "" and summary.startswith("Found 1 finding(s)")
    # a caret under the whole dotted name of a call
    p.write_text('import torch\ntorch.onnx.export(m, x, "a.onnx")\n')
    out = run(capsys, "--output-format", "full", str(p))[1]
    assert "  | ^^^^^^^^^^^^^^^^^ ONX001\n" in out
    # and under the whole literal a finding points at, when it ends on the line
    p.write_text('import torch\ntorch.onnx.export(m, x, "a.onnx", dynamic_axes={"x": {0: "b"}})\n')
    out = run(capsys, "--output-format", "full", str(p))[1]
    assert "  | " + " " * 47 + "^" * 15 + " ONX101\n" in out
    # concise (and the default, text) stay one line per finding
    concise = run(capsys, "--output-format", "concise", str(p))[1]
    assert concise == run(capsys, str(p))[1]
    assert concise.splitlines()[0].startswith(f"{p}:2:1: ONX001 [*] ")
    assert "Migrate with: " in concise.splitlines()[0] and len(concise.splitlines()) == 3


def _as_started(argv0: str, *args: str) -> subprocess.CompletedProcess:
    """The rewriter's CLI in a fresh interpreter started as ``argv0`` (no torch imported)."""
    code = (f"import sys; sys.argv[0] = {argv0!r}; from migration.cli import main; "
            f"raise SystemExit(main({list(args)!r}))")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)


def test_version_and_errors_name_the_command_typed():
    from compat import __version__

    script = _as_started("/venv/bin/torch-onnx-migrate", "--version")
    assert script.stdout == f"torch-onnx-migrate {__version__}\n"
    module = _as_started(str(ROOT / "compat" / "migrate.py"), "--version")
    assert module.stdout == f"python -m compat.migrate {__version__}\n"
    bad = _as_started("/venv/bin/torch-onnx-migrate", "--select", "XYZ1", ".")
    assert bad.returncode == 2 and bad.stderr.startswith("torch-onnx-migrate: error: ")
    assert "python -m" not in bad.stderr


def test_cr_only_line_endings_and_a_form_feed_keep_their_lines(tmp_path, capsys):
    src = 'import torch\rtorch.onnx.export(m, x, "m.onnx",\r    example_outputs=y)\r\x0c\r'
    p = tmp_path / "a.py"
    p.write_bytes(src.encode())
    assert run(capsys, "--add-noqa", str(p))[0] == 0
    assert p.read_bytes() == (
        'import torch\rtorch.onnx.export(m, x, "m.onnx",  # noqa: ONX001\r'
        '    example_outputs=y)  # noqa: ONX201\r\x0c\r').encode()
    assert run(capsys, "--check", "-q", str(p)) == (0, "", "")


def test_add_noqa_reports_what_it_could_not_write(tmp_path, capsys):
    p = tmp_path / "ro.py"
    p.write_text('import torch\ntorch.onnx.export(m, x, "m.onnx", dynamo=False, example_outputs=y)\n')
    p.chmod(0o444)
    nb = tmp_path / "n.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                                         "source": "import torch\ntorch.onnx.export(m, x, 'm.onnx')"}],
                              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    before = nb.read_bytes()
    try:
        rc, _, err = run(capsys, "--add-noqa", str(tmp_path))
        assert rc == 1 and nb.read_bytes() == before
        assert f"{nb}:cell 1:2:1: ONX001: no noqa directive added (notebook cells" in err
        # a read-only file is never written (as --fix), even by root
        assert "ONX201: no noqa directive added (not written: read-only file)" in err
        assert "noqa" not in p.read_text() and "Added" not in err
        assert run(capsys, "--add-noqa", "--exit-zero", str(tmp_path))[0] == 0
    finally:
        p.chmod(0o644)


def test_help_names_the_commands_as_typed():
    script = _as_started("/venv/bin/torch-onnx-migrate", "--help")
    assert script.stdout.startswith("usage: torch-onnx-migrate ")
    assert "torch-onnx-compat catalog" in script.stdout
    assert "torch-onnx-compat rule CODE" in script.stdout and "python -m" not in script.stdout
