"""Jupyter notebooks: every code cell is migrated on its own, the JSON layout is kept."""

from __future__ import annotations

import ast
import json

from .engine import Options, check_text, fix_text, might_need_migration
from .model import FileResult


def process_notebook(data: bytes, path: str, opts: Options) -> FileResult:
    """Check or rewrite the code cells of a notebook; cells that are not Python are skipped."""
    result = FileResult(path, old_bytes=data)
    if not might_need_migration(data):
        return result
    nb = json.loads(data.decode("utf-8"))
    changed = False
    preamble = _imports(nb)
    for n, cell in enumerate(nb.get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else source
        if not might_need_migration(text.encode("utf-8")):
            continue
        if any(ln.lstrip().startswith(("%", "!")) for ln in text.splitlines()):
            continue  # IPython magics are not Python
        if opts.fix:
            new, fixed, findings, dropped = fix_text(text, path, opts, preamble=preamble)
            result.fixed += fixed
            result.dropped += dropped
            if new != text:
                changed = True
                cell["source"] = new.splitlines(keepends=True) if isinstance(source, list) else new
        else:
            findings = check_text(text, path, opts, preamble=preamble)
        for f in findings:
            f.note = f"cell {n}" + (f"; {f.note}" if f.note else "")
        result.findings += findings
    if changed:
        indent = 1
        first = data.decode("utf-8").split("\n", 2)
        if len(first) > 1:
            indent = len(first[1]) - len(first[1].lstrip(" ")) or 1
        text = json.dumps(nb, indent=indent, ensure_ascii=False) + "\n"
        result.new_bytes = text.encode("utf-8")
    return result


def _imports(nb: dict) -> ast.Module:
    """The import statements of all code cells: names a cell uses come from earlier cells."""
    stmts: list[ast.stmt] = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else source
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        stmts += [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    return ast.Module(body=stmts, type_ignores=[])
