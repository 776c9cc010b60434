"""The per-suffix file layer: each suffix reaches its reader, a rewrite replaces the file in one
atomic write (mode kept, no temp file left), and what does not parse is reported, never written."""

from __future__ import annotations

import json
import os
import stat

from migration.core import Options
from migration.files import BY_SUFFIX, process_path
from migration.notebook import process_notebook

LEGACY = "import torch\r\ntorch.onnx.export(model, (x,), 'm.onnx')\r\n"  # CRLF kept
WRITE = Options(fix=True, write=True)


def test_a_python_rewrite_is_one_atomic_replace_keeping_mode_and_line_ends(tmp_path) -> None:
    path = tmp_path / "export.py"
    path.write_bytes(LEGACY.encode())
    os.chmod(path, 0o640)
    result = process_path(str(path), WRITE)
    written = path.read_bytes()
    assert result.error is None and result.new_bytes == written
    assert b"dynamo=True" in written and written.count(b"\r\n") == 2
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["export.py"]  # no temp file left behind


def test_a_rewrite_through_a_symlink_keeps_the_link(tmp_path) -> None:
    target = tmp_path / "real.py"
    target.write_text(LEGACY)
    link = tmp_path / "link.py"
    link.symlink_to(target.name)
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the link's target must be inside the working tree
    try:
        result = process_path("link.py", WRITE)
    finally:
        os.chdir(cwd)
    assert result.error is None and link.is_symlink()
    assert "dynamo=True" in target.read_text()


def test_notebooks_go_to_the_notebook_reader(tmp_path) -> None:
    assert BY_SUFFIX[".ipynb"] is process_notebook
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                     "execution_count": None, "source": LEGACY.replace("\r\n", "\n")}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb, indent=1) + "\n")
    result = process_path(str(path), Options())
    assert [(f.code, f.cell) for f in result.findings] == [("ONX001", 1)]


def test_a_file_that_does_not_parse_is_reported_and_left_alone(tmp_path) -> None:
    path = tmp_path / "broken.py"
    src = "import torch\ntorch.onnx.export(model, (x,), 'm.onnx'\n"
    path.write_text(src)
    result = process_path(str(path), WRITE)
    assert [f.code for f in result.findings] == ["E999"] and result.new_bytes is None
    assert path.read_text() == src
