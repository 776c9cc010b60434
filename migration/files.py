"""The file layer: one path on disk in, its :class:`FileResult` out, the rewrite written back.

Each suffix has its reader (:data:`BY_SUFFIX`: notebooks; everything else is Python source);
a rewrite is written atomically, and not at all through a read-only file or a symlink leading
out of the working tree (``textio.write_problem``).
"""

from __future__ import annotations

from collections.abc import Callable

from compat.files import atomic_write

from . import generated
from .core import Options
from .model import FileResult
from .notebook import process_notebook
from .sources import process_bytes
from .textio import write_problem

BY_SUFFIX: dict[str, Callable[[bytes, str, Options], FileResult]] = {
    ".ipynb": process_notebook,
}


def process_path(path: str, opts: Options) -> FileResult:
    """Process one file on disk; writes it back atomically with ``opts.write``."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        reader = next((r for suffix, r in BY_SUFFIX.items() if path.endswith(suffix)),
                      process_bytes)
        result = reader(data, path, opts)
        if opts.write and result.new_bytes is not None and result.new_bytes != data:
            problem = write_problem(path)
            if problem is None:
                problem = _write_generated(result)
            if problem is None:
                try:
                    # the owner and group stay, or the file is not replaced
                    atomic_write(path, result.new_bytes, require_owner=True)
                except OSError as exc:
                    problem = f"cannot write: {exc.strerror or exc}"
            if problem is not None:
                result.not_written(problem)
        return result
    except Exception as exc:  # noqa: BLE001 - reported as an internal error, the run goes on
        return FileResult(path, error=f"{type(exc).__name__}: {exc}")


def _write_generated(result: FileResult) -> str | None:
    """Write the generated modules the rewrite imports (first: the import must resolve); why
    not, when one may not be written (the user's file is then not written either)."""
    for module, text in sorted(result.generated.items()):
        try:
            generated.write(module, text)
        except OSError as exc:
            return f"cannot write {module}: {exc.strerror or exc}"
    return None


def process_many(paths: list[str], opts: Options) -> list[FileResult]:
    """Worker entry for a chunk of files (one process handles many, to amortise startup)."""
    return [process_path(p, opts) for p in paths]
