"""Build hook: the wheel installs ONE top-level package, ``torch_onnx_compat``.

The checkout keeps four top-level packages (``compat``, ``legacy``, ``dynamo``, ``migration``);
installed under those names they would merge with other distributions (``dynamo`` is also
NVIDIA's ai-dynamo, ``compat`` is django-compat) and a user's own ``legacy/`` package would
shadow the TorchScript route. So the wheel holds::

    torch_onnx_compat/            <- compat/ (the public API: ``import torch_onnx_compat as compat``)
    torch_onnx_compat/legacy/     <- legacy/
    torch_onnx_compat/dynamo/     <- dynamo/
    torch_onnx_compat/migration/  <- migration/

with every absolute import of the four packages rewritten to the new names (found with ``ast``,
so strings and comments are left alone). Editable installs put the checkout on ``sys.path`` and
add a small ``torch_onnx_compat`` facade over it, so the installed names work there too.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DIST_PACKAGE = "torch_onnx_compat"
API_PACKAGE = "compat"
SUBPACKAGES = ("legacy", "dynamo", "migration")
OWN = (API_PACKAGE, *SUBPACKAGES)

_FACADE = {
    "__init__.py": (
        '"""Editable install: the checkout\'s ``compat`` under the installed name."""\n\n'
        "import compat as _compat\n"
        "from compat import __all__, __version__  # noqa: F401\n\n\n"
        "def __getattr__(name):  # lazily, as compat itself (importing it never loads torch)\n"
        "    return getattr(_compat, name)\n\n\n"
        "def __dir__():\n"
        "    return dir(_compat)\n"
    ),
    "__main__.py": (
        "from compat.__main__ import main\n\n"
        'if __name__ == "__main__":\n'
        "    raise SystemExit(main())\n"
    ),
    "migrate.py": (
        "from migration.cli import main\n\n"
        'if __name__ == "__main__":\n'
        "    raise SystemExit(main())\n"
    ),
    "py.typed": "",
}


def installed_name(module: str) -> str:
    """``compat.api`` -> ``torch_onnx_compat.api``, ``dynamo.route`` -> ``torch_onnx_compat.dynamo.route``."""
    root, _, rest = module.partition(".")
    if root == API_PACKAGE:
        return DIST_PACKAGE + (f".{rest}" if rest else "")
    if root in SUBPACKAGES:
        return f"{DIST_PACKAGE}.{module}"
    return module


def _is_own(module: str | None) -> bool:
    return module is not None and module.split(".", 1)[0] in OWN


def rewrite_imports(source: str, filename: str = "<source>") -> str:
    """``source`` with every absolute import of the four packages pointing at the installed
    names; each rewritten statement keeps its line, so tracebacks keep their line numbers."""
    tree = ast.parse(source, filename)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # (line index, start col, end col, text)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_own(node.module):
            line = lines[node.lineno - 1]
            start = _byte_col(line, node.col_offset)
            m = re.compile(r"from\s+([\w.]+)").match(line, start)
            if m is None or m.group(1) != node.module:
                raise ValueError(f"{filename}:{node.lineno}: cannot rewrite this import")
            edits.append((node.lineno - 1, m.start(1), m.end(1), installed_name(node.module)))
        elif isinstance(node, ast.Import) and any(_is_own(a.name) for a in node.names):
            if len(node.names) != 1 or node.end_lineno != node.lineno:
                raise ValueError(f"{filename}:{node.lineno}: import one own package per line")
            alias = node.names[0]
            if "." in alias.name and alias.asname is None:
                raise ValueError(f"{filename}:{node.lineno}: write `from {alias.name.rsplit('.', 1)[0]} import ...`")
            bound = alias.asname or alias.name
            target = installed_name(alias.name)
            parent, _, leaf = target.rpartition(".")
            text = f"from {parent} import {leaf}" + (f" as {bound}" if bound != leaf else "")
            if alias.name == API_PACKAGE:
                text = f"import {DIST_PACKAGE} as {bound}"
            line = lines[node.lineno - 1]
            edits.append((node.lineno - 1, _byte_col(line, node.col_offset),
                          _byte_col(line, node.end_col_offset), text))
    for index, start, end, text in sorted(edits, reverse=True):
        lines[index] = lines[index][:start] + text + lines[index][end:]
    return "".join(lines)


def _byte_col(line: str, byte_offset: int) -> int:
    """ast column offsets count UTF-8 bytes."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8"))


def stage_installed_tree(root: str, out: str) -> str:
    """Write the ``torch_onnx_compat`` tree of the checkout at ``root`` into ``out``."""
    target = os.path.join(out, DIST_PACKAGE)
    for package in OWN:
        src = os.path.join(root, package)
        dest = target if package == API_PACKAGE else os.path.join(target, package)
        for folder, dirs, files in os.walk(src):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            rel = os.path.relpath(folder, src)
            os.makedirs(os.path.join(dest, rel), exist_ok=True)
            for name in sorted(files):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(folder, name)
                out_path = os.path.normpath(os.path.join(dest, rel, name))
                if name.endswith(".py"):
                    with open(path, encoding="utf-8") as fh:
                        text = rewrite_imports(fh.read(), path)
                    with open(out_path, "w", encoding="utf-8", newline="") as fh:
                        fh.write(text)
                else:
                    shutil.copyfile(path, out_path)
    return target


class CustomBuildHook(BuildHookInterface):
    """Stages the rewritten (wheel) or facade (editable) ``torch_onnx_compat`` package."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        self._staging = tempfile.mkdtemp(prefix="torch-onnx-compat-build-")
        if version == "editable":
            facade = os.path.join(self._staging, DIST_PACKAGE)
            os.makedirs(facade)
            for name, text in _FACADE.items():
                with open(os.path.join(facade, name), "w", encoding="utf-8") as fh:
                    fh.write(text)
            build_data["force_include_editable"][facade] = DIST_PACKAGE
            return
        tree = stage_installed_tree(self.root, self._staging)
        build_data["force_include"][tree] = DIST_PACKAGE

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        staging = getattr(self, "_staging", None)
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
