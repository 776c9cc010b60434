"""The command line as ruff/pytest users expect it: --version everywhere, ``rule CODE``,
``catalog --format json``, and help that names the command the user typed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compat import __version__, catalog, torch_apis
from compat.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _cli(*args: str, argv0: str | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python -m compat ARGS``; with ``argv0``, as a console script of that name starts it."""
    if argv0 is None:
        cmd = [sys.executable, "-m", "compat", *args]
    else:
        code = (f"import sys; sys.argv[0] = {argv0!r}; from compat.__main__ import main; "
                "raise SystemExit(main())")
        cmd = [sys.executable, "-c", code, *args]
    return subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("args", [
    ["--version"], ["run", "--version"], ["run", "--route", "legacy", "--version"],
    ["report", "--version"], ["catalog", "--version"], ["rule", "--version"], ["check", "--version"],
    ["convert-opset", "--version"],
])
def test_version_on_every_command(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 0
    assert capsys.readouterr().out == f"torch-onnx-compat {__version__}\n"


@pytest.mark.slow
def test_version_after_the_script_belongs_to_the_script(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("import sys; print('script got', sys.argv[1:])\n")
    run = _cli("run", "s.py", "--version", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "script got ['--version']" in run.stdout and "torch-onnx-compat 0.1" not in run.stdout


def test_rule_page_has_what_why_fix_safety_and_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rule", "onx101"]) == 0
    page = capsys.readouterr().out
    e = catalog.get("ONX101")
    assert page.startswith("# ONX101: `dynamic_axes=`\n")
    for heading in ("## What it finds", "## Why", "## At run time", "## Fix", "## Example"):
        assert f"\n{heading}\n" in page
    assert e.changed[1:] in page and e.runtime in page and e.replacement in page
    assert "Fix safety: safe" in page
    before, after = catalog.EXAMPLES["ONX101"]
    assert before in page and after in page
    assert main(["rule", "ONX207"]) == 0
    page = capsys.readouterr().out
    assert "Fix safety: unsafe" in page and "--fix --unsafe-fixes --select ONX001,ONX206,ONX207" in page
    assert main(["rule", "ONX303"]) == 0
    page = capsys.readouterr().out
    assert "Fix safety: no automatic fix" in page and "After `" not in page


def test_rule_json_and_unknown_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rule", "ONX202", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["code"] == "ONX202" and data["fix"] == "safe" and data["removed_in"] == "2.0"
    assert data["example_fixed"] == catalog.EXAMPLES["ONX202"][1]
    assert main(["rule", "ONX1"]) == 2
    err = capsys.readouterr().err
    assert "unknown rule 'ONX1'" in err and "ONX101, ONX102" in err
    assert main(["rule", "E501"]) == 2
    assert main(["rule"]) == 2


def test_catalog_json_lists_every_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["code"] for d in data] == [e.code for e in catalog.ENTRIES]
    assert all(d["summary"] and d["fix"] in ("safe", "unsafe", "none") and d["example"] for d in data)
    assert main(["catalog", "--format", "yaml"]) == 2


def test_every_rule_has_an_example() -> None:
    assert set(catalog.EXAMPLES) == set(catalog.BY_CODE)
    for code in catalog.BY_CODE:
        assert catalog.rule_page(code).startswith(f"# {code}: ")


@pytest.mark.parametrize("code", sorted(c for c, (_, after) in catalog.EXAMPLES.items() if after))
def test_rule_examples_are_what_the_rewriter_writes(code: str, tmp_path: Path) -> None:
    """Each rule page's "after" is the rewriter's own output for its "before"."""
    before, after = catalog.EXAMPLES[code]
    path = tmp_path / "example.py"
    # an example whose fix adds an import shows the whole file (the import lands in isort order)
    whole_file = before.startswith("import ")
    path.write_text(f"{before}\n" if whole_file else f"import torch\n\n{before}\n")
    cmd = catalog.EXAMPLE_FIX.format(migrate="compat.migrate").split()
    # the pages show the advice for the newest supported torch, whatever torch runs the test
    cmd += ["--target-torch", torch_apis.shown(torch_apis.newest_supported())]
    run = subprocess.run([sys.executable, "-m", *cmd, "--no-progress", "-q", str(path)], cwd=ROOT, env=ENV,
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode in (0, 1), run.stderr
    sep = "" if after.startswith("import ") else "\n"
    assert path.read_text() == (f"{after}\n" if whole_file else f"import torch\n{sep}{after}\n")


def test_help_names_the_command_the_user_typed() -> None:
    script = _cli("--help", argv0="/usr/local/bin/torch-onnx-compat")
    assert script.returncode == 0
    assert script.stdout.startswith("usage: torch-onnx-compat [--version]")
    assert "python -m" not in script.stdout and "torch-onnx-migrate --help" in script.stdout
    report = _cli("report", "--help", argv0="torch-onnx-compat")
    assert "usage: torch-onnx-compat report" in report.stdout
    module = _cli("--help")
    assert module.stdout.startswith("usage: python -m compat [--version]")
    assert "python -m compat.migrate --help" in module.stdout
    installed = _cli("rule", "--help", argv0="/venv/lib/torch_onnx_compat/__main__.py")
    assert installed.stdout.startswith("usage: python -m torch_onnx_compat rule")
    unknown = _cli("frobnicate", argv0="torch-onnx-compat")
    assert unknown.returncode == 2 and unknown.stderr.startswith("torch-onnx-compat: unknown command")


def _use_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text[text.index("\n## Use\n"): text.index("\n## Known limits\n")]


def test_readme_use_section_works_for_the_documented_install(capsys: pytest.CaptureFixture[str]) -> None:
    """The Use section's commands are the installed ones, and each option it shows exists."""
    import re

    use = _use_section()
    assert "import torch_onnx_compat as compat" in use
    block = use[use.index("```sh\n") + 6:]
    lines = block[: block.index("```")].splitlines()
    assert lines and all(line.startswith(("torch-onnx-compat ", "torch-onnx-migrate ")) for line in lines)
    for line in lines:
        words = line.split("#")[0].split()
        if words[0] != "torch-onnx-compat" or words[1].startswith("-"):
            continue
        assert words[1] in ("run", "report", "check", "convert-opset", "rule", "catalog",
                            "verify-migration"), line
        try:
            main([words[1], "--help"])
        except SystemExit:
            pass  # run's own parser exits after --help
        helptext = capsys.readouterr().out
        for flag in set(re.findall(r"--[a-z][a-z-]*", line)) - {"--help", "--version"}:
            assert flag in helptext, (line, flag)
    image = re.search(r"!\[[^\]]*\]\(([^)]+)\)", use)
    assert image and (ROOT / image.group(1)).is_file()
