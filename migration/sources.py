"""Python source files (``.py``, ``.pyi``, stdin): bytes in, a :class:`FileResult` out.

The bytes are decoded as Python decodes them (BOM, coding cookie) and the rewrite is encoded the
same way, line endings untouched (``textio.py``); a file that does not decode or parse gets one
``E999`` finding and is never rewritten.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from . import generated
from .core import Options, check_text, fix_text, might_need_migration
from .model import SAFETY_CHECK, SYNTAX_ERROR, FileResult, Finding
from .noqa import add_noqa
from .splice import UnsafeRewrite
from .textio import decode, encode


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The collector off while one file is processed: an ast holds millions of objects and no
    cycles, and collections over it took half the time of a large file."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def process_bytes(data: bytes, path: str, opts: Options) -> FileResult:
    """Check (and with ``opts.fix`` rewrite) one Python source given as bytes."""
    with _no_cyclic_gc():
        return _process_bytes(data, path, opts)


def _process_bytes(data: bytes, path: str, opts: Options) -> FileResult:
    result = FileResult(path, old_bytes=data)
    if not might_need_migration(data):
        return result
    try:
        src = decode(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        result.findings = [Finding(SYNTAX_ERROR, 1, 1, "none", note=f"cannot decode: {exc}",
                                   path=path)]
        return result
    evidence = opts.ledger.evidence(path) if opts.ledger and path != "-" else None
    if not opts.fix:
        result.findings = check_text(src.text, path, opts, evidence)
        if opts.add_noqa and result.findings:
            new, result.noqa_added, left = add_noqa(src.text, result.findings)
            # the suppressed findings count as handled (they come back if the write fails)
            result.fixed = [f for f in result.findings if not any(f is g for g in left)]
            result.findings = left
            if new != src.text:
                result.new_bytes = encode(new, src)
        return result
    try:
        new, result.fixed, result.findings, result.dropped = fix_text(src.text, path, opts,
                                                                      evidence)
    except UnsafeRewrite as exc:
        result.findings = check_text(src.text, path, opts, evidence)
        result.error = f"rewrite not written, it failed the safety check: {exc}"
        return result.not_written(f"the rewrite failed its safety check ({exc})", SAFETY_CHECK)
    if new != src.text:
        result.new_bytes = encode(new, src)
    entries = [e for f in result.fixed for e in f.generated]
    if entries and path != "-":
        module = generated.module_path(path)
        text, problem = generated.plan(module, entries)
        if problem is not None:
            return result.not_written(problem)
        result.generated[module] = text
    return result
