"""Reading and writing source files without changing what the rewriter does not touch.

Encoding (PEP 263 cookie, BOM) and line endings are kept: the text is decoded once, the rewriter
works on ``str``, and :func:`encode` turns the result back into the original byte form.
"""

from __future__ import annotations

import io
import os
import stat
import tempfile
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


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` via a temp file in the same folder, keeping the mode, the
    owner and the group (``chown`` needs root unless they are already the writer's).

    A symlink is resolved first so the link stays a link and its target gets the new content.
    """
    real = os.path.realpath(path)
    folder = os.path.dirname(real) or "."
    st = os.stat(real)
    fd, tmp = tempfile.mkstemp(prefix=".migrate-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        new = os.stat(tmp)
        if (new.st_uid, new.st_gid) != (st.st_uid, st.st_gid):
            try:
                os.chown(tmp, st.st_uid, st.st_gid)
            except PermissionError as exc:  # the file is not replaced
                raise PermissionError(exc.errno, f"cannot keep the file's owner and group "
                                                 f"({st.st_uid}:{st.st_gid})") from exc
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, real)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
