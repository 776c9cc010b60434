"""Where the imports a fix needs go: where ruff's isort (``I001``, default settings) puts them.

Sections ``__future__`` / standard library / third party / first party / relative, one blank line
between them; within a section ``import x`` lines before ``from x import y`` lines, each sorted by
module (natural, case-insensitive). Only the inserted lines choose a place: the user's lines never
move, so in a block ruff already accepts the result is accepted too, and in one it does not accept
each import goes next to its own section. First party as ruff decides it with default ``src``: a
module or folder of that name in the project root (the folder of the nearest ``ruff.toml`` or
``pyproject.toml`` with ``[tool.ruff]``, else the working directory) or its ``src``, or the file's
own package. Torch-free and libcst-free.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .splice import Layout

FUTURE, STDLIB, THIRD_PARTY, FIRST_PARTY, LOCAL = range(5)
_DIGITS = re.compile(r"(\d+)")
_TWO_LINES_AFTER = re.compile(r"(async\s+def|def|class)\b|@")


def _natural(name: str) -> tuple[tuple[int, int], ...]:
    """ruff's natural order of a lower-cased name: digit runs compare as numbers."""
    out: list[tuple[int, int]] = []
    for i, part in enumerate(_DIGITS.split(name.lower())):
        out += [(48, int(part))] if i % 2 else [(ord(c), 0) for c in part]
    return tuple(out)


def sort_key(stmt: ast.stmt) -> tuple:
    """Order within a section: ``import`` lines first, then ``from`` lines (furthest relative
    first), by module, then by first name and alias."""
    if isinstance(stmt, ast.Import):
        alias = stmt.names[0]
        return (0, 0, _natural(alias.name), alias.name, alias.asname or "")
    if isinstance(stmt, ast.ImportFrom):
        module = stmt.module or ""
        first = stmt.names[0]
        return (1, -stmt.level, _natural(module), module, _natural(first.name),
                first.asname or "")
    return (2,)


def classifier(path: str, unconfigured: str | None = None, beside: Iterable[str] = ()
               ) -> Callable[[ast.stmt], int]:
    """The section of an import statement in the module at ``path``; ``unconfigured``: the
    project root when no ruff configuration is found (by default the working directory);
    ``beside``: modules to be written beside the file (first party where it is)."""
    folder = os.path.dirname(os.path.abspath(path))
    root = _project_root(folder, unconfigured)
    sources = [root, os.path.join(root, "src")]
    package = _package(folder)
    real = os.path.normcase(os.path.realpath(folder))
    known = {package, *(beside if any(real == os.path.normcase(os.path.realpath(s))
                                      for s in sources) else ())}

    def first_party(top: str) -> bool:
        return top in known or any(
            os.path.isdir(os.path.join(s, top)) or os.path.isfile(os.path.join(s, top + ".py"))
            for s in sources)

    def section(stmt: ast.stmt) -> int:
        if isinstance(stmt, ast.ImportFrom):
            if stmt.level:
                return LOCAL
            module = stmt.module or ""
        elif isinstance(stmt, ast.Import):
            module = stmt.names[0].name
        else:
            return LOCAL + 1
        top = module.split(".", 1)[0]
        if top == "__future__":
            return FUTURE
        if top in sys.stdlib_module_names:
            return STDLIB
        return FIRST_PARTY if first_party(top) else THIRD_PARTY

    return section


def sorted_block(path: str, statements: Iterable[str]) -> list[str]:
    """``statements`` (one import each) as ruff's isort writes them in the module at ``path``:
    sorted, ``""`` between sections (without a ruff configuration, rooted at its folder)."""
    section = classifier(path, os.path.dirname(os.path.abspath(path)))
    parsed = sorted(((ast.parse(s).body[0], s.strip()) for s in set(statements)),
                    key=lambda p: (section(p[0]), sort_key(p[0]), p[1]))
    out: list[str] = []
    for i, (stmt, text) in enumerate(parsed):
        if i and section(stmt) != section(parsed[i - 1][0]):
            out.append("")
        out.append(text)
    return out


def _project_root(folder: str, unconfigured: str | None) -> str:
    """The folder ruff resolves ``src`` against: the nearest configuration's, else the cwd."""
    here = folder
    while True:
        if any(os.path.isfile(os.path.join(here, n)) for n in ("ruff.toml", ".ruff.toml")):
            return here
        try:
            with open(os.path.join(here, "pyproject.toml"), encoding="utf-8") as fh:
                if "[tool.ruff" in fh.read():
                    return here
        except (OSError, UnicodeDecodeError):
            pass
        parent = os.path.dirname(here)
        if parent == here:
            return unconfigured or os.getcwd()
        here = parent


def _package(folder: str) -> str | None:
    """The top package holding ``folder`` (ruff's ``detect-same-package``), if any."""
    top = None
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        top = os.path.basename(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return top


def lines_after(code: str) -> int:
    """The blank lines ruff's isort wants between an import block and ``code`` (comments
    skipped): two before a definition, else one."""
    first = next((line for line in code.splitlines()
                  if line.strip() and not line.lstrip().startswith("#")), "")
    return 2 if _TWO_LINES_AFTER.match(first) else 1


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def insertions(layout: Layout, imports: Sequence[str], path: str, beside: Iterable[str] = ()
               ) -> list[tuple[int, str]]:
    """(offset, text) pairs that insert ``imports`` (whole statements) into ``layout``'s module
    at ``path`` (``beside``: as for :func:`classifier`).

    They go into the module's first import block (after the docstring); a statement the module
    already has at its top level is left out.
    """
    nl = layout.newline
    present = {ast.dump(s) for s in layout.tree.body if isinstance(s, (ast.Import, ast.ImportFrom))}
    new: list[ast.stmt] = []
    spelled: dict[int, str] = {}
    for text in imports:
        stmt = ast.parse(text).body[0]
        if ast.dump(stmt) not in present:
            present.add(ast.dump(stmt))
            new.append(stmt)
            spelled[id(stmt)] = text.strip()
    if not new:
        return []
    section = classifier(path, beside=beside)
    new.sort(key=lambda s: (section(s), sort_key(s)))
    groups = layout.groups
    start = 1 if groups and _is_docstring(groups[0].stmts[0]) and len(groups[0].stmts) == 1 else 0
    block = []  # (group index, section, key) of the block's statements
    for i in range(start, len(groups)):
        stmts = groups[i].stmts
        if not all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in stmts):
            break
        block.append((i, section(stmts[0]), sort_key(stmts[0])))
    if not block:
        return [_before_code(layout, start, new, section, spelled)]
    # each import: (offset, the user's section above it or None, the one below it or None)
    places: dict[int, list[tuple[ast.stmt, int | None, int | None]]] = {}
    for stmt in new:
        sec, key, commented = section(stmt), sort_key(stmt), False
        same = [b for b in block if b[1] == sec]
        earlier = [b for b in block if b[1] < sec]
        later = [b for b in block if b[1] > sec]
        if same:
            smaller = [b for b in same if b[2] < key]
            if smaller:
                at, above, below = _after(layout, smaller[-1][0]), sec, None
            else:
                (at, commented), above, below = _before(layout, same[0][0]), None, sec
        elif earlier:
            at, above, below = _after(layout, earlier[-1][0]), earlier[-1][1], None
        else:
            (at, commented), above, below = _before(layout, later[0][0]), None, later[0][1]
        if below is not None and commented:
            below = -1  # a blank line before the comments of the import below
        places.setdefault(at, []).append((stmt, above, below))
    out = []
    for at, items in places.items():
        stmts = [s for s, _, _ in items]
        above = next((a for _, a, _ in items if a is not None), None)
        below = next((b for _, _, b in items if b is not None), None)
        text = _lines(layout, stmts, section, spelled)
        if above is not None and above != section(stmts[0]):
            text = nl + text
        if below is not None and below != section(stmts[-1]):
            text += nl
        out.append((at, _at_end(layout, at, text)))
    return out


def _lines(layout: Layout, stmts: Sequence[ast.stmt], section: Callable[[ast.stmt], int],
           spelled: dict[int, str]) -> str:
    """The statements, a blank line between sections."""
    out, last = [], None
    for s in stmts:
        if last is not None and section(s) != last:
            out.append("")
        out.append(spelled[id(s)])
        last = section(s)
    return "".join(line + layout.newline for line in out)


def _after(layout: Layout, group: int) -> int:
    return layout.offsets[min(layout.groups[group].last, len(layout.lines))]


def _before(layout: Layout, group: int) -> tuple[int, bool]:
    """The start of the group's statement, above the comment lines right over it (ruff keeps
    those with it) unless they open the file (a shebang or a header); and whether it went
    above comments (ruff wants a blank line there)."""
    line = layout.groups[group].first
    top = line
    while top > 1 and layout.lines[top - 2].lstrip().startswith("#"):
        top -= 1
    if 1 < top < line:
        return layout.offsets[top - 1], True
    return layout.offsets[line - 1], False


def _before_code(layout: Layout, first: int, stmts: Sequence[ast.stmt],
                 section: Callable[[ast.stmt], int], spelled: dict[int, str]
                 ) -> tuple[int, str]:
    """A new block before the first statement after the docstring, followed by the blank lines
    ruff wants there (two before a definition, else one); at the end of a module without one."""
    text = _lines(layout, stmts, section, spelled)
    if first >= len(layout.groups):
        at = len(layout.text)
        return at, _at_end(layout, at, text)
    code = layout.lines[layout.groups[first].first - 1]
    return _before(layout, first)[0], text + layout.newline * lines_after(code)


def _at_end(layout: Layout, at: int, text: str) -> str:
    """``text`` starting on a line of its own at the end of a file without a final newline."""
    if at == len(layout.text) and layout.text and not layout.text.endswith(("\n", "\r")):
        return layout.newline + text.removesuffix(layout.newline)
    return text
