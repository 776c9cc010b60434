"""Route memory: auto exports that fell back to the TorchScript route skip torch.export next time.

One JSON file per key in ``$TORCH_ONNX_COMPAT_CACHE_DIR/route-memory/`` (default: the user's
cache folder). The key hashes the model class, the input signature (dtypes and shapes of the
tensor inputs, dynamic axes wildcarded), the options that shape the export, and the torch and
compat versions, so an upgrade of either starts from a clean memory. Entries are written with
:func:`compat.files.atomic_write`, so concurrent processes never see half a file. A corrupt or
unwritable cache only warns: route memory never fails an export.

The opset a model's torch.export route could not go below is remembered too, under a looser key
(input sizes, and the opset asked, left out): a later auto export of that model at a lower opset,
at any input size, skips the capture (``lookup_reach``).

Set ``TORCH_ONNX_COMPAT_CACHE_DIR`` to ``""``, ``off`` or ``0`` to turn it off.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from compat import files
from compat.policy.config import ENV_CACHE_DIR
from compat.request import ExportRequest

SCHEMA = 1
SUBDIR = "route-memory"
_OFF = {"", "off", "0", "false", "no", "none"}

#: request fields that do not change what the exporters produce (or are part of the key already)
_NOT_KEYED = frozenset({
    "model", "args", "kwargs", "params", "unbound", "f", "call_site", "given", "usages", "route",
    "strict", "verbose", "report", "profile", "dump_exported_program", "artifacts_dir", "verify",
})


class RouteMemoryWarning(UserWarning):
    """The route-memory cache could not be read or written; the export went on without it."""


def cache_dir() -> Path | None:
    """The cache folder, or None when route memory is turned off (read at call time)."""
    value = os.environ.get(ENV_CACHE_DIR)
    if value is not None:
        if value.strip().lower() in _OFF:
            return None
        return Path(value).expanduser()
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        base = Path(os.environ["LOCALAPPDATA"])
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "torch-onnx-compat"


def versions() -> dict[str, str]:
    """The versions a memory entry is valid for."""
    from compat import __version__
    from compat.installed import torch_caps

    return {"torch": torch_caps.torch_version_str(), "compat": __version__}


def _classes(model: Any) -> list[type]:
    """The model's class and, for a module, the class of every submodule (in tree order)."""
    named = getattr(model, "named_modules", None)
    if named is None:
        return [type(model)]
    return [type(m) for _, m in named()]


def model_structure(model: Any) -> str:
    """The module tree: submodule paths and classes. Two models of one container class
    (``nn.Sequential``, a shared wrapper) are different models for route memory."""
    named = getattr(model, "named_modules", None)
    items = [(n, f"{type(m).__module__}.{type(m).__qualname__}", _plain_attributes(m))
             for n, m in named()] if named else []
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()[:16]


def _plain_attributes(module: Any) -> list[tuple[str, Any]]:
    """A module's own bool/int/float/str attributes (flags such as ``self.branchy`` that change
    what forward does); ``training`` and private names excluded."""
    return sorted((k, v) for k, v in vars(module).items()
                  if not k.startswith("_") and k != "training"
                  and isinstance(v, (bool, int, float, str)))


def _source_stamps(model: Any) -> list[str | None]:
    """Content hash of each file defining a class in the model: editing the model (say,
    removing the control flow torch.export could not capture) retries torch.export."""
    stamps: dict[str, str | None] = {}
    for cls in _classes(model):
        module = sys.modules.get(cls.__module__)
        path = getattr(module, "__file__", None)
        if not path or path in stamps:
            continue
        stamps[path] = _content_hash(path)
    return [stamps[p] for p in sorted(stamps)]


def _content_hash(path: str) -> str | None:
    """sha256 of the file's bytes (a fresh CI checkout changes mtimes, not content); cached by
    size and mtime so an unchanged file is read once per process."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _hash_file(path, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=1024)
def _hash_file(path: str, _size: int, _mtime: int) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()[:16]
    except OSError:
        return None


def key_fields(req: ExportRequest) -> dict[str, Any]:
    """What identifies an export for route memory (JSON-able)."""
    cls = type(req.model)
    return {
        "schema": SCHEMA,
        "model": f"{cls.__module__}.{cls.__qualname__}",
        "model_structure": model_structure(req.model),
        "model_source": _source_stamps(req.model),
        "inputs": input_signature(req),
        "options": {
            name: _stable(getattr(req, name))
            for name in sorted(req.__dataclass_fields__) if name not in _NOT_KEYED
        },
        **versions(),
    }


def key(req: ExportRequest) -> str:
    blob = json.dumps(key_fields(req), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_path(req: ExportRequest) -> Path | None:
    """Where the entry for ``req`` lives (None when route memory is off)."""
    folder = cache_dir()
    return None if folder is None else folder / SUBDIR / f"{key(req)}.json"


def reach_fields(req: ExportRequest) -> dict[str, Any]:
    """What identifies a model for the opset its torch.export route reaches: ``key_fields``
    without the opset asked and with input sizes wildcarded (dtypes and ranks kept), since
    neither changes which operators the model is made of."""
    fields = key_fields(req)
    fields["kind"] = "opset-reach"
    fields["inputs"] = [_any_sizes(leaf) for leaf in fields["inputs"]]
    fields["options"] = {k: v for k, v in fields["options"].items() if k != "opset_version"}
    return fields


def _any_sizes(leaf: str) -> str:
    """``float32[*,3,*]`` for ``float32[2,3,*]`` (a tensor's signature); other leaves unchanged."""
    dtype, bracket, dims = leaf.partition("[")
    return dtype + bracket + re.sub(r"\d+", "*", dims) if bracket and ":" not in dtype else leaf


def _reach_path(fields: Mapping[str, Any]) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    blob = json.dumps(fields, sort_keys=True, default=str)
    return folder / SUBDIR / f"{hashlib.sha256(blob.encode()).hexdigest()}.json"


def lookup(req: ExportRequest) -> str | None:
    """The remembered reason the torch.export route failed for ``req``, or None."""
    try:
        path = entry_path(req)
    except Exception as exc:  # noqa: BLE001 - an unhashable request just means no memory
        _warn(f"route memory skipped: cannot key this export ({type(exc).__name__}: {exc})")
        return None
    entry = _load(path)
    return entry["reason"] if entry is not None else None


def lookup_reach(req: ExportRequest) -> tuple[int, str] | None:
    """``(reached, reason)``: the lowest opset the torch.export route could bring this model to
    in an earlier auto export that fell back, and why it went no lower; None when nothing is
    remembered. An opset asked below ``reached`` cannot be written on that route."""
    try:
        path = _reach_path(reach_fields(req))
    except Exception:  # noqa: BLE001 - lookup() already warned about an unhashable request
        return None
    entry = _load(path)
    if entry is None or not isinstance(entry.get("reached"), int):
        return None
    return entry["reached"], entry["reason"]


def remember_reach(req: ExportRequest, reached: int, reason: str) -> None:
    """Record that the torch.export route brought ``req``'s model no lower than opset ``reached``
    (``reason`` names the operators that blocked it); warns instead of raising."""
    try:
        fields = reach_fields(req)
        path = _reach_path(fields)
    except Exception:  # noqa: BLE001 - remember() already warned
        return
    _write(path, {**fields, "reached": reached, "reason": reason})


def _load(path: Path | None) -> dict[str, Any] | None:
    """The entry at ``path`` when it is valid for these versions; None otherwise (warned when
    it is unreadable or corrupt)."""
    if path is None:
        return None
    try:
        text = _read_entry(path)
    except (FileNotFoundError, NotADirectoryError):  # nothing remembered (remember() warns)
        return None
    except (OSError, UnicodeDecodeError) as exc:
        _warn(f"route memory at {path} is unreadable and was ignored ({type(exc).__name__}: {exc})")
        return None
    try:
        entry = json.loads(text)
        reason = entry["reason"]
        valid = entry.get("schema") == SCHEMA and path.stem == entry["key"] and isinstance(reason, str)
    except (ValueError, KeyError, TypeError, AttributeError):
        valid = False
    if not valid:
        _warn(f"route memory entry {path} is corrupt and was ignored; it is rewritten on the next fallback")
        return None
    if any(entry.get(k) != v for k, v in versions().items()):
        return None
    return entry


#: an entry is a few hundred bytes; anything much larger is not one of ours
_MAX_ENTRY_BYTES = 1 << 20


def _read_entry(path: Path) -> str:
    """The text of a cache entry. Opened non-blocking and checked to be a regular file first: a
    FIFO, socket or device left in the cache folder must not hang (or feed) every export."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"not a regular file (mode {stat.filemode(st.st_mode)})")
        if st.st_size > _MAX_ENTRY_BYTES:
            raise OSError(f"{st.st_size} bytes, too large for an entry")
        chunks = []
        while chunk := os.read(fd, _MAX_ENTRY_BYTES):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")


def remember(req: ExportRequest, reason: str) -> None:
    """Record that torch.export failed for ``req`` (atomically; warns instead of raising)."""
    try:
        path = entry_path(req)
        fields = key_fields(req)
    except Exception as exc:  # noqa: BLE001
        _warn(f"route memory skipped: cannot key this export ({type(exc).__name__}: {exc})")
        return
    _write(path, {**fields, "reason": reason, "call_site": req.call_site})


def _write(path: Path | None, fields: dict[str, Any]) -> None:
    if path is None:
        return
    entry = {**fields, "key": path.stem, "created": time.time()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # as a new file: a link planted in a shared cache folder is replaced, never written through
        files.atomic_write(path, json.dumps(entry, sort_keys=True, default=str).encode("utf-8"),
                           as_new_file=True)
    except OSError as exc:
        _warn(f"route memory could not be written to {path.parent} ({type(exc).__name__}: {exc}); "
              f"set {ENV_CACHE_DIR} to a writable folder, or to 'off'")


def clear() -> int:
    """Remove every entry (all versions); returns how many."""
    folder = cache_dir()
    if folder is None:
        return 0
    count = 0
    for p in (folder / SUBDIR).glob("*.json"):
        try:
            p.unlink()
            count += 1
        except OSError:
            pass
    return count


def _warn(message: str) -> None:
    """Warn at the user's export call (default filters then show it once per call site)."""
    from compat.policy import notices

    notices.emit(RouteMemoryWarning(message), notices.find_call_site())


# --- the input signature ------------------------------------------------------------------------

def input_signature(req: ExportRequest) -> list[str]:
    """``dtype[d0,d1,...]`` per tensor input (``*`` on dynamic axes); type/value of other leaves."""
    from compat.request.layout import input_layout

    layout = input_layout(req)
    out: list[str] = []
    for i, leaf in enumerate(layout.leaves):
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            axes = layout.axes.get(i, {})
            dims = ",".join("*" if a in axes else str(int(d)) for a, d in enumerate(leaf.shape))
            out.append(f"{str(leaf.dtype).replace('torch.', '')}[{dims}]")
        else:
            out.append(f"{type(leaf).__qualname__}:{_stable(leaf)}")
    return out


def _stable(value: Any) -> Any:
    """A JSON-able value that is the same in every process for the same option."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(_stable(k)): _stable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (set, frozenset)):
        return sorted(str(_stable(v)) for v in value)
    if isinstance(value, (list, tuple)):
        return [_stable(v) for v in value]
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{value.dtype}{list(value.shape)}"
    qualname = getattr(value, "__qualname__", None)
    if qualname is not None:
        return f"{getattr(value, '__module__', '')}.{qualname}"
    text = repr(value)
    return type(value).__qualname__ if " at 0x" in text else text
