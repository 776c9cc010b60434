"""The command line: modes, exit codes, formats, config, safety of writes."""

import json
import os
import shutil
import stat
import sys
from pathlib import Path

from migration.cli import main

FIX = Path(__file__).parent / "fixtures"
LEGACY = 'import torch\ntorch.onnx.export(m, x, "m.onnx", example_outputs=y, dynamo=False)\n'
MIGRATED = 'import torch\ntorch.onnx.export(m, x, "m.onnx", dynamo=False)\n'


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_check_write_exit_codes_and_idempotency(tmp_path, capsys):
    p = tmp_path / "a.py"
    p.write_text(LEGACY)
    assert run(capsys, "--check", str(p))[0] == 1
    rc, out, _ = run(capsys, "--diff", str(p))
    assert rc == 1 and "-torch.onnx.export" in out and p.read_text() == LEGACY
    assert run(capsys, "--write", str(p))[0] == 0
    assert p.read_text() == MIGRATED
    assert run(capsys, "--check", str(p))[0] == 0
    assert run(capsys, "--write", str(p))[0] == 0 and p.read_text() == MIGRATED


def test_usage_errors_exit_2(tmp_path, capsys):
    assert run(capsys, "--select", "XYZ1", str(tmp_path))[0] == 2
    assert run(capsys, str(tmp_path / "missing"))[0] == 2
    assert run(capsys, "--check", "--write", str(tmp_path))[0] == 2
    assert run(capsys, "-j", "0", str(tmp_path))[0] == 2


def test_json_schema(tmp_path, capsys):
    (tmp_path / "a.py").write_text(LEGACY + "torch.onnx.export(m, x, f, custom_opsets=c, dynamo=True)\n")
    rc, out, _ = run(capsys, "--output-format", "json", str(tmp_path))
    data = json.loads(out)
    assert rc == 1 and isinstance(data, list) and data
    for item in data:
        assert set(item) == {"code", "path", "line", "column", "message", "fix_applicability",
                             # ruff's fields (tests/migration/test_ruff_formats.py)
                             "filename", "location", "end_location", "fix", "url", "noqa_row"}
        assert item["fix_applicability"] in ("safe", "unsafe", "none")
        assert not item["message"].startswith(item["code"])  # the code is its own field
    assert {(d["code"], d["fix_applicability"]) for d in data} == {
        ("ONX201", "safe"), ("ONX105", "none")}


def test_sarif_github_statistics(tmp_path, capsys):
    (tmp_path / "a.py").write_text(LEGACY)
    rc, out, _ = run(capsys, "--output-format", "sarif", str(tmp_path))
    doc = json.loads(out)
    assert doc["version"] == "2.1.0" and doc["runs"][0]["results"][0]["ruleId"] == "ONX201"
    rc, out, _ = run(capsys, "--output-format", "github", str(tmp_path))
    assert out.startswith("::warning title=compat.migrate (ONX201),file=")
    rc, out, _ = run(capsys, "--statistics", str(tmp_path))
    assert rc == 1 and "ONX201" in out and out.split()[0] == "1"


def test_crlf_latin1_bom_kept_and_noop_byte_identical(tmp_path, capsys):
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes(LEGACY.replace("\n", "\r\n").encode())
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# -*- coding: latin-1 -*-\n# caf\xe9\n" + LEGACY).encode("latin-1"))
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + LEGACY.encode())
    untouched = tmp_path / "clean.py"
    untouched.write_bytes(b"import torch  \r\nx = torch.onnx  # onnx mention, nothing to do\n")
    before = untouched.read_bytes()
    os.chmod(crlf, 0o751)
    assert run(capsys, "--write", str(tmp_path))[0] == 0
    assert crlf.read_bytes() == MIGRATED.replace("\n", "\r\n").encode()
    assert stat.S_IMODE(os.stat(crlf).st_mode) == 0o751
    assert latin.read_bytes() == ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + MIGRATED).encode("latin-1")
    assert bom.read_bytes() == b"\xef\xbb\xbf" + MIGRATED.encode()
    assert untouched.read_bytes() == before


def test_syntax_error_reported_and_run_goes_on(tmp_path, capsys):
    shutil.copy(FIX / "syntax_error.py", tmp_path / "bad.py")
    (tmp_path / "good.py").write_text(LEGACY)
    rc, out, _ = run(capsys, "--write", str(tmp_path))
    assert rc == 1 and "E999" in out
    assert (tmp_path / "good.py").read_text() == MIGRATED


def test_walk_skips_venv_gitignore_symlink_out(tmp_path, capsys):
    for d in (".git", "node_modules", "build", "ignored", "venv2"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.py").write_text(LEGACY)
    (tmp_path / "venv2" / "pyvenv.cfg").write_text("")
    (tmp_path / ".gitignore").write_text("ignored/\n*.gen.py\n")
    (tmp_path / "a.gen.py").write_text(LEGACY)
    outside = tmp_path.parent / (tmp_path.name + "_outside.py")
    outside.write_text(LEGACY)
    (tmp_path / "link.py").symlink_to(outside)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(LEGACY)
    rc, out, _ = run(capsys, "--output-format", "json", "--exclude", "nothing", str(tmp_path))
    paths = {Path(d["path"]).name for d in json.loads(out)}
    assert paths == {"m.py"}
    run(capsys, "--write", str(tmp_path))
    assert outside.read_text() == LEGACY


def test_config_and_noqa(tmp_path, capsys, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torch-onnx-compat.migrate]\nignore = ["ONX2"]\n')
    (tmp_path / "a.py").write_text(LEGACY)
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "--check", "a.py")[0] == 0
    (tmp_path / "pyproject.toml").write_text('[tool.torch-onnx-compat.migrate]\nbogus = 1\n')
    assert run(capsys, "--check", "a.py")[0] == 2


def test_stdin(tmp_path, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(LEGACY.encode())))
    rc, out, _ = run(capsys, "--write", "-")
    assert out == MIGRATED and rc == 0


def test_parallel_matches_serial(tmp_path, capsys):
    for i in range(40):
        (tmp_path / f"f{i}.py").write_text(LEGACY if i % 2 else "x = 1\n")
    rc1, out1, _ = run(capsys, "-j", "1", "--output-format", "json", str(tmp_path))
    rc2, out2, _ = run(capsys, "-j", "2", "--output-format", "json", str(tmp_path))
    assert rc1 == rc2 == 1 and json.loads(out1) == json.loads(out2) and len(json.loads(out1)) == 20


def test_notebook_rewritten_cell_by_cell(tmp_path, capsys):
    nb = tmp_path / "n.ipynb"
    shutil.copy(FIX / "legacy.ipynb", nb)
    assert run(capsys, "--check", str(nb))[0] == 1
    assert run(capsys, "--write", str(nb))[0] == 0
    data = json.loads(nb.read_text())
    cells = ["".join(c["source"]) for c in data["cells"]]
    assert cells[2] == 'torch.onnx.export(m, x, "m.onnx", dynamo=True, external_data=False)'
    assert cells[3].startswith("%timeit")  # magics untouched
    assert data["cells"][0]["cell_type"] == "markdown"
    before = nb.read_bytes()
    assert run(capsys, "--write", str(nb))[0] == 0 and nb.read_bytes() == before


def test_ledger_evidence(tmp_path, capsys, monkeypatch):
    src = tmp_path / "pkg" / "exp.py"
    src.parent.mkdir()
    src.write_text("import torch\ntorch.onnx.export(m, x, 'a.onnx')\n"
                   "torch.onnx.export(\n    m, x, 'b.onnx', do_constant_folding=False)\n")
    ledger = tmp_path / "ledger.jsonl"
    recs = [
        {"call_site": "pkg/exp.py:2", "route_taken": "legacy", "status": "ok",
         "fallback_reason": "GuardOnDataDependentSymNode"},
        {"call_site": f"{src}:3", "route_taken": "dynamo", "status": "ok"},
    ]
    ledger.write_text("\n".join(json.dumps(r) for r in recs) + "\nnot json\n")
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "--write", "--ledger", str(ledger), "pkg")[0] == 0
    assert src.read_text() == (
        "import torch\n# compat.migrate: dynamo=False (ledger: GuardOnDataDependentSymNode)\n"
        "torch.onnx.export(m, x, 'a.onnx', dynamo=False)\n"
        # the shim turned do_constant_folding=False into optimize=False on that route
        "torch.onnx.export(\n    m, x, 'b.onnx', optimize=False, dynamo=True, external_data=False)\n")
