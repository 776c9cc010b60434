"""Finding the files to migrate: walks folders like ruff does (``.gitignore``, venvs, builds)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator

try:
    import pathspec
except ImportError:  # pragma: no cover - pathspec is a dependency, the fallback is for safety
    pathspec = None

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
        if pathspec is not None:
            self.spec = pathspec.GitIgnoreSpec.from_lines(lines)
            self.globs: list[str] = []
        else:
            self.spec = None
            self.globs = [ln.strip().strip("/") for ln in lines]

    def match(self, path: str, is_dir: bool) -> bool:
        rel = os.path.relpath(path, self.base).replace(os.sep, "/")
        if rel.startswith(".."):
            return False
        if self.spec is not None:
            return self.spec.match_file(rel + "/" if is_dir else rel)
        name = os.path.basename(rel)
        return any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(name, g) for g in self.globs)


def _gitignore(folder: str) -> _Ignore | None:
    path = os.path.join(folder, ".gitignore")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as fh:
        return _Ignore(folder, fh.read().splitlines())


def _is_venv(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, "pyvenv.cfg"))


def iter_files(paths: list[str], exclude: list[str] = ()) -> Iterator[str]:
    """Python files and notebooks under ``paths``; explicit files are always included.

    Symlinked folders are not entered and symlinked files pointing out of their tree skipped.
    """
    excl = _Ignore(os.getcwd(), list(exclude)) if exclude else None
    seen: set[str] = set()
    for top in paths:
        if os.path.isfile(top):
            if top not in seen:
                seen.add(top)
                yield top
            continue
        root_real = os.path.realpath(top)
        stack: list[tuple[str, list[_Ignore]]] = [(top, [])]
        while stack:
            folder, ignores = stack.pop()
            gi = _gitignore(folder)
            ignores = ignores + [gi] if gi else ignores
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
                    if p not in seen:
                        seen.add(p)
                        yield p
