"""Reading and writing source files without changing what the rewriter does not touch.

Encoding (PEP 263 cookie, BOM) and line endings are kept: the text is decoded once, the rewriter
works on ``str``, and :func:`encode` turns the result back into the original byte form.
:func:`write_problem` says when a rewrite must not be written; the write itself is
``compat.files.atomic_write`` (the project's one atomic write).
"""

from __future__ import annotations

import io
import os
import stat
import tokenize
from dataclasses import dataclass

from .discovery import link_problem

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Decoded:
    """A decoded source file and what is needed to encode it back."""

    text: str
    encoding: str
    bom: bool


def decode(data: bytes) -> Decoded:
    """Decode source bytes as Python does (BOM, coding cookie, else UTF-8)."""
    bom = data.startswith(_BOM)
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    body = data[len(_BOM):] if bom else data
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    # newline="" semantics: decode bytes directly so CRLF / CR stay as written.
    return Decoded(body.decode(encoding), encoding, bom)


def encode(text: str, like: Decoded) -> bytes:
    """Encode ``text`` the way ``like`` was stored."""
    return (_BOM if like.bom else b"") + text.encode(like.encoding)


def write_problem(path: str) -> str | None:
    """Why ``path`` must not be rewritten (None: it may be): a read-only file, or a path that
    goes through a symlink to a file outside the working tree or inside a skipped folder."""
    problem = link_problem(path)
    if problem is not None:
        return problem
    real = os.path.realpath(path)
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not st.st_mode & 0o222 or not os.access(real, os.W_OK):  # root may write anything
        return "read-only file"
    return None
