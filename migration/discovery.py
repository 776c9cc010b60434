"""Finding the files to migrate: walks folders like ruff does (``.gitignore``, venvs, builds)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import pathspec

SKIP_DIRS = {
    ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", "node_modules", "build", "dist",
    "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs",
    "site-packages", "_build", ".ipynb_checkpoints",
}
SUFFIXES = (".py", ".pyi", ".ipynb")


class _Ignore:
    """Patterns of one ``.gitignore`` (or ``--exclude``), matched relative to ``base``."""

    def __init__(self, base: str, lines: list[str]) -> None:
        self.base = base
        lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        self.spec = pathspec.GitIgnoreSpec.from_lines(lines)

    def match(self, path: str, is_dir: bool) -> bool:
        rel = os.path.relpath(path, self.base).replace(os.sep, "/")
        if rel.startswith(".."):
            return False
        return self.spec.match_file(rel + "/" if is_dir else rel)


class _Any:
    """Several pattern sets, each relative to its own folder."""

    def __init__(self, parts: list[_Ignore]) -> None:
        self.parts = parts

    def match(self, path: str, is_dir: bool) -> bool:
        return any(i.match(path, is_dir) for i in self.parts)


def _gitignore(folder: str) -> _Ignore | None:
    path = os.path.join(folder, ".gitignore")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as fh:
        return _Ignore(folder, fh.read().splitlines())


def _is_venv(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "pyvenv.cfg"))


def iter_files(paths: list[str], exclude: Sequence[str] = (),
               based: Sequence[tuple[str, Sequence[str]]] = ()) -> Iterator[str]:
    """Python files and notebooks under ``paths``; explicit files are always included.

    ``exclude`` patterns are relative to the working directory, each ``(folder, patterns)`` of
    ``based`` to its folder (the config's, relative to its pyproject.toml). Symlinked folders
    are not entered; a symlinked file is followed only to a file of a folder the walk
    entered that no pattern excludes (never out of the tree, into ``.venv``, ``.git`` or an
    excluded folder); a file reached twice (a symlink to a file of the tree, a folder given
    twice) is processed once.
    """
    patterns = [_Ignore(os.getcwd(), list(exclude))] if exclude else []
    patterns += [_Ignore(os.path.abspath(b), list(pats)) for b, pats in based if pats]
    excl = _Any(patterns) if patterns else None
    seen: set[str] = set()
    links: list[str] = []
    walked: dict[str, list[_Ignore]] = {}  # real folders entered, with their ignore patterns
    for top in paths:
        if os.path.isfile(top):
            real = os.path.realpath(top)
            if os.path.islink(top) and excl and excl.match(real, False):
                continue  # a link named explicitly still never leads into excluded code
            if real not in seen:
                seen.add(real)
                yield top
            continue
        root_real = os.path.realpath(top)
        stack: list[tuple[str, list[_Ignore]]] = [(top, [])]
        while stack:
            folder, ignores = stack.pop()
            gi = _gitignore(folder)
            ignores = ignores + [gi] if gi else ignores
            folder_real = os.path.realpath(folder)
            walked[folder_real] = ignores
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name, reverse=True)
            except OSError:
                continue
            for entry in entries:
                p = entry.path
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in SKIP_DIRS or entry.name.endswith(".egg-info") \
                            or _is_venv(p):
                        continue
                    if any(i.match(p, True) for i in ignores) or (excl and excl.match(p, True)):
                        continue
                    stack.append((p, ignores))
                elif entry.name.endswith(SUFFIXES):
                    if entry.is_symlink():
                        target = os.path.realpath(p)
                        if not target.startswith(root_real + os.sep) or not os.path.isfile(target):
                            continue
                    elif not entry.is_file():
                        continue
                    if any(i.match(p, False) for i in ignores) or (excl and excl.match(p, False)):
                        continue
                    if entry.is_symlink():  # after the real files: the file itself wins
                        links.append(p)
                        continue
                    real = os.path.join(folder_real, entry.name)
                    if real not in seen:
                        seen.add(real)
                        yield p
    for p in links:
        real = os.path.realpath(p)
        ignores = walked.get(os.path.dirname(real))
        if real in seen or ignores is None or any(i.match(real, False) for i in ignores) \
                or (excl and excl.match(real, False)):
            continue
        seen.add(real)
        yield p


def link_problem(path: str) -> str | None:
    """Why a rewrite must not be written through ``path`` when it is a symlink (None: fine).

    The target must be a file of the working tree, outside skipped folders (``.git``,
    virtualenvs, ``node_modules``, ...).
    """
    if not os.path.islink(path):
        return None
    real = os.path.realpath(path)
    tree = os.path.realpath(os.getcwd())
    rel = os.path.relpath(real, tree)
    if rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(rel):
        return f"symlink to {real}, outside the working tree"
    folder = tree
    for part in rel.split(os.sep)[:-1]:
        folder = os.path.join(folder, part)
        if part in SKIP_DIRS or part.endswith(".egg-info") or _is_venv(folder):
            return f"symlink to {real}, inside a skipped folder ({part})"
    return None
