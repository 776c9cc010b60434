"""``--add-noqa``: a ``# noqa`` where the noqa check looks for it, nothing else changed."""

import json

from migration.cli import main
from migration.core import Options, check_text
from migration.noqa import add_noqa


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


def test_text_level_add_noqa_never_writes_into_a_string():
    # ONX001's only line ends inside a multi-line string: it is left (reported), not written
    src = 'import torch\ntorch.onnx.export(m, x, """a\nb""", example_outputs=y)\n'
    new, n, left = add_noqa(src, check_text(src, "a.py", Options()))
    assert n == 1 and [f.code for f in left] == ["ONX001"]
    assert new == src.replace("y)\n", "y)  # noqa: ONX201\n")
    assert [f.code for f in check_text(new, "a.py", Options())] == ["ONX001"]
