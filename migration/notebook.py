"""Jupyter notebooks: every code cell is migrated on its own, the JSON layout is kept."""

from __future__ import annotations

import ast
import json

from .core import Options, check_text, fix_text, might_need_migration
from .model import SAFETY_CHECK, SYNTAX_ERROR, FileResult, Finding
from .splice import UnsafeRewrite

_SEPARATORS = ((",", ": "), (", ", ": "), (",", ":"))


def process_notebook(data: bytes, path: str, opts: Options) -> FileResult:
    """Check or rewrite the code cells of a notebook; cells that are not Python are skipped."""
    result = FileResult(path, old_bytes=data)
    if not might_need_migration(data):
        return result
    try:
        raw = data.decode("utf-8-sig")
        nb = json.loads(raw)
    except UnicodeDecodeError as exc:
        result.findings = [Finding(SYNTAX_ERROR, 1, 1, "none", path=path,
                                   note=f"invalid notebook: cannot decode: {exc}")]
        return result
    except json.JSONDecodeError as exc:
        result.findings = [Finding(SYNTAX_ERROR, exc.lineno, exc.colno, "none", path=path,
                                   note=f"invalid notebook JSON: {exc.msg}")]
        return result
    if not isinstance(nb, dict) or not isinstance(nb.get("cells", []), list) \
            or not all(isinstance(c, dict) for c in nb.get("cells", [])):
        result.findings = [Finding(SYNTAX_ERROR, 1, 1, "none", path=path,
                                   note="invalid notebook: no list of cells")]
        return result
    style = _style(raw) if opts.fix else None
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
            try:  # cells compile as IPython runs them: top-level ``await`` is allowed
                new, fixed, findings, dropped = fix_text(
                    text, path, opts, preamble=preamble, flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            except UnsafeRewrite as exc:  # nothing of the notebook is written
                result.error = f"rewrite not written, it failed the safety check: cell {n}: {exc}"
                result.findings += [_in_cell(f, n) for f in check_text(text, path, opts,
                                                                      preamble=preamble)]
                return result.not_written(f"cell {n}: the rewrite failed its safety check "
                                          f"({exc})", SAFETY_CHECK)
            for f in fixed:
                f.cell = n
            result.fixed += fixed
            result.dropped += dropped
            if new != text:
                changed = True
                cell["source"] = new.splitlines(keepends=True) if isinstance(source, list) else new
        else:
            findings = check_text(text, path, opts, preamble=preamble)
        for f in findings:
            f.cell = n  # ``line`` counts from the start of the cell
        result.findings += findings
    if changed and style is not None:
        out = json.dumps(nb, **style["kw"]) + style["end"]
        result.new_bytes = (b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b"") \
            + out.encode("utf-8")
    return result


def _in_cell(f: Finding, n: int) -> Finding:
    f.cell = n
    return f


def _style(text: str) -> dict:
    """How the notebook's JSON is written (indent, separators, ASCII escapes, final newline),
    so a rewritten notebook differs only in the cells that changed."""
    body = text.rstrip("\r\n")
    end = text[len(body):]
    original = json.loads(text)
    lines = body.split("\n", 2)
    guess = None
    if len(lines) > 1:
        guess = len(lines[1]) - len(lines[1].lstrip(" ")) or 1
    indents = [guess] if guess else [None]
    indents += [i for i in (1, 2, 4, None) if i not in indents]
    for indent in indents:
        for seps in _SEPARATORS:
            for ascii_ in (False, True):
                kw = {"indent": indent, "separators": seps, "ensure_ascii": ascii_}
                if json.dumps(original, **kw) == body:
                    return {"kw": kw, "end": end}
    seps = (",", ": ") if guess else ((", ", ": ") if '": ' in body else (",", ":"))
    return {"kw": {"indent": guess, "separators": seps, "ensure_ascii": False}, "end": end}


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
