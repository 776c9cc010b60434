"""Save a route's result to ``f`` as ``open(f, "wb")`` would, but atomically.

* A path: the model is staged beside the file ``f`` resolves to (symlinks are followed, the link
  stays) and moved over it with one ``os.replace``. An existing file keeps its mode (and, as
  root, its owner); a new one gets the umask's mode, as ``open()`` would give it.
* A FIFO or a device (``os.devnull``): written in place, as torch does.
* A folder that is not writable, with a writable ``f``: written in place (not atomically); the
  reason is recorded in ``Outcome.notes`` (and the ledger).
* External data: the data file is given a name nothing refers to yet (``<f>.data``, or
  ``<f>.<token>.data`` when that exists) and moved in first, then the model that refers to it;
  the old model's data files are removed last. A kill at any point leaves the old model with its
  data or the new model with its data, never a mix.
* Leftovers of killed exports in the folder (staging folders, temp files, orphaned data files;
  recognised by name, older than this process, their process gone) are removed by the next save
  to that folder.

A failed save leaves any previous file at ``f`` untouched and no temp file behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from compat import files
from compat.errors import CompatValueError
from compat.request import ExportRequest, Outcome

PROTOBUF_LIMIT = 2**31 - 1  # a single ModelProto cannot be larger than 2 GB
STAGING_PREFIX = ".compat-export-"
#: test hook: ``TORCH_ONNX_COMPAT_TEST_KILL_AT=<step>`` SIGKILLs the process at that step, so tests
#: can check what a crash there leaves behind (steps: tmp-written, staged, data-placed,
#: model-replaced, old-data-removed)
KILL_ENV = "TORCH_ONNX_COMPAT_TEST_KILL_AT"
_STARTED = time.time()  # leftovers older than this process may be cleaned up
_STAGING_DIR = re.compile(re.escape(STAGING_PREFIX) + r"(?:(\d+)-)?")
_LOCATION_KEY = b"\n\x08location"  # how a tensor's external-data location starts on the wire


def save(outcome: Outcome, req: ExportRequest) -> str | None:
    """Write the exported model to ``req.f``; returns where it went."""
    f = req.f
    if f is None:
        return None
    _check_output_names(outcome, req)
    if not isinstance(f, (str, os.PathLike)):
        f.write(_as_bytes(outcome))
        return f"<{type(f).__name__}>"
    shown = os.path.abspath(os.fsdecode(os.fspath(f)))
    target = os.path.realpath(shown)
    st = _stat(target)
    if st is not None and not stat.S_ISREG(st.st_mode):
        data = _as_bytes(outcome)
        discard(outcome)
        _write_in_place(target, data)
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) else "special"
        outcome.notes.append(f"f is not a regular file ({kind}): written in place")
        return shown
    folder, name = os.path.split(target)
    clean_stale(folder)
    if outcome.staged is not None or _external(outcome, req):
        if outcome.staged is not None:
            staging, staged_name = os.path.split(outcome.staged)
        else:
            staging, staged_name = _stage(folder, name, outcome), name
        outcome.staged = None
        _commit(staging, staged_name, target, st)
        return shown
    data = _as_bytes(outcome)
    old_refs = _external_locations(target) if st is not None else set()
    try:
        files.atomic_write(target, data, before_replace=lambda: _step("tmp-written"))
    except files.FolderNotWritable as exc:
        if st is None or not os.access(target, os.W_OK):
            raise exc.error from None
        _write_in_place(target, data)
        outcome.notes.append(
            f"{target} written in place, not atomically: its folder is not writable ({exc.error.strerror})"
        )
        return shown
    for loc in old_refs:  # the replaced model's data files
        _remove_data_file(folder, loc, name)
    _remove_orphans(folder, name, keep=set())
    return shown


def _check_output_names(outcome: Outcome, req: ExportRequest) -> None:
    """The torch.export route silently ignores extra ``output_names`` (the TorchScript route
    raises): refuse them before anything is written."""
    if not req.output_names or outcome.program is None:
        return
    try:
        count = len(outcome.program.model.graph.outputs)
    except AttributeError:
        return
    if len(req.output_names) > count:
        raise CompatValueError(
            f"output_names has {len(req.output_names)} names but the model has {count} "
            f"output{'s' if count != 1 else ''}: {list(req.output_names)}"
        )


# --- one self-contained file --------------------------------------------------------------------

def _write_in_place(target: str, data: bytes) -> None:
    """Write into the existing file (a FIFO, a device, a file in a read-only folder)."""
    fd = os.open(target, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


# --- a model with external data -----------------------------------------------------------------

def staging_dir(folder: str) -> str:
    """A fresh staging folder beside the target, recognisable (and its process known) later."""
    return tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=folder)


def _stage(folder: str, name: str, outcome: Outcome) -> str:
    """Write the model and its data file into a staging folder under their final names."""
    tmp = staging_dir(folder)
    try:
        staged = os.path.join(tmp, name)
        if outcome.program is not None:
            # export_params / keep_initializers_as_inputs are already applied to the program
            outcome.program.save(staged, external_data=True)
        else:
            import onnx

            onnx.save_model(
                onnx.load_from_string(outcome.model_bytes), staged, save_as_external_data=True,
                all_tensors_to_one_file=True, location=name + ".data", size_threshold=0,
            )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def _commit(staging: str, staged_name: str, target: str, st: os.stat_result | None) -> None:
    """Move a staged model (``staging/staged_name``) and its data files into place: data under
    names nothing refers to, then the model, then the old model's data files are removed."""
    folder, name = os.path.split(target)
    placed: list[str] = []
    committed = False
    try:
        _step("staged")
        old_refs = _external_locations(target) if st is not None else set()
        data_files = sorted(n for n in os.listdir(staging) if n != staged_name)
        token = secrets.token_hex(6)
        renames: dict[str, str] = {}
        for n in data_files:
            src = os.path.join(staging, n)
            files.keep_owner_and_mode_of_path(src, st)
            versioned = f"{name}.{token}.data" if len(data_files) == 1 else f"{n}.{token}"
            dest = _place(src, folder, n, versioned)
            placed.append(dest)
            if dest != n:
                renames[n] = dest
        _step("data-placed")
        model = os.path.join(staging, staged_name)
        if renames:
            _relocate(model, renames)
        files.keep_owner_and_mode_of_path(model, st)
        os.replace(model, target)
        committed = True
        files.fsync_folder(folder)
        _step("model-replaced")
    except BaseException:
        if not committed:  # nothing refers to the new data files yet
            for n in placed:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, n))
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for loc in old_refs - set(placed):
        _remove_data_file(folder, loc, name)
    _remove_orphans(folder, name, keep=set(placed))
    _step("old-data-removed")


def _place(src: str, folder: str, preferred: str, versioned: str) -> str:
    """Move ``src`` into ``folder`` under a name no file has: ``preferred`` when free (a hard
    link fails rather than clobber), else the unique ``versioned`` one. Returns the name used."""
    dest = os.path.join(folder, preferred)
    try:
        os.link(src, dest)
    except OSError:  # taken, or no hard links on this file system
        os.replace(src, os.path.join(folder, versioned))
        return versioned
    os.unlink(src)
    return preferred


def _relocate(model_path: str, renames: dict[str, str]) -> None:
    """Point the staged model's external tensors at their data files' new names."""
    import onnx

    proto = onnx.load(model_path, load_external_data=False)
    for tensor in _tensors(proto):
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value in renames:
                entry.value = renames[entry.value]
    with open(model_path, "wb") as fh:
        fh.write(proto.SerializeToString())


def _external_locations(path: str) -> set[str]:
    """Data files the model at ``path`` refers to (empty when it is self-contained or unreadable).
    A byte scan first: a self-contained model is not parsed."""
    try:
        if not _contains(path, _LOCATION_KEY):
            return set()
        import onnx

        proto = onnx.load(path, load_external_data=False)
    except Exception:  # noqa: BLE001 - not a model we can read: leave its neighbours alone
        return set()
    return {e.value for t in _tensors(proto) for e in t.external_data if e.key == "location"}


def _contains(path: str, needle: bytes, chunk: int = 1 << 23) -> bool:
    """Whether the file holds ``needle`` (read in chunks: no mmap, which a concurrent truncation
    would turn into SIGBUS)."""
    tail = b""
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            if needle in tail + block[: len(needle) - 1] or needle in block:
                return True
            tail = block[-(len(needle) - 1):]
    return False


def _tensors(proto: Any) -> Iterator[Any]:
    """Every TensorProto of a model: initializers, sparse ones, attribute tensors, subgraphs."""
    graphs = [proto.graph, *(fn for fn in proto.functions)]
    while graphs:
        g = graphs.pop()
        if hasattr(g, "initializer"):
            yield from g.initializer
            for sp in g.sparse_initializer:
                yield sp.values
                yield sp.indices
        for node in g.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t
                yield from attr.tensors
                if attr.HasField("g"):
                    graphs.append(attr.g)
                graphs.extend(attr.graphs)


def _remove_data_file(folder: str, loc: str, name: str) -> None:
    """Remove a data file the replaced model referred to (plain names in the folder only)."""
    if os.path.basename(loc) != loc or loc in ("", ".", "..", name):
        return
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(folder, loc))


def _remove_orphans(folder: str, name: str, keep: set[str]) -> None:
    """Data files named after ``name`` that no model refers to (a save killed after placing its
    data): ``<name>.data`` and ``<name>.<token>.data`` older than this process."""
    pattern = re.compile(re.escape(name) + r"(?:\.[0-9a-f]{12})?\.data")
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for e in entries:
            if e.name in keep or not pattern.fullmatch(e.name):
                continue
            with contextlib.suppress(OSError):
                if e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_mtime < _STARTED:
                    os.unlink(e.path)


# --- leftovers of killed exports ----------------------------------------------------------------

def clean_stale(folder: str) -> int:
    """Remove staging folders and temp files of killed exports from ``folder``: only ours (by
    name), older than this process, and whose process is gone. Returns how many."""
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for e in entries:
        staging = _STAGING_DIR.match(e.name)
        tmp = files.TEMP_FILE.match(e.name) if staging is None else None
        if staging is None and tmp is None:
            continue
        pid = staging.group(1) if staging is not None else tmp.group(1)
        try:
            if staging is not None and not e.is_dir(follow_symlinks=False):
                continue
            if tmp is not None and not e.is_file(follow_symlinks=False):
                continue
            if e.stat(follow_symlinks=False).st_mtime >= _STARTED or _alive(pid):
                continue
            if staging is not None:
                shutil.rmtree(e.path)
            else:
                os.unlink(e.path)
            removed += 1
        except OSError:
            continue
    return removed


def _alive(pid: str | None) -> bool:
    if pid is None:
        return False
    n = int(pid)
    if n == os.getpid():
        return True
    try:
        os.kill(n, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


# --- helpers ------------------------------------------------------------------------------------

def discard(outcome: Outcome) -> None:
    """Remove what an outcome staged on disk (its export was rejected after the route ran)."""
    if outcome.staged is not None:
        shutil.rmtree(os.path.dirname(outcome.staged), ignore_errors=True)
        outcome.staged = None


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


def _step(name: str) -> None:
    if os.environ.get(KILL_ENV) == name:
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


def _external(outcome: Outcome, req: ExportRequest) -> bool:
    if req.external_data is not None:
        return req.external_data
    return _size_estimate(outcome) > PROTOBUF_LIMIT


def _size_estimate(outcome: Outcome) -> int:
    if outcome.model_bytes is not None:
        return len(outcome.model_bytes)
    try:
        inits = outcome.program.model.graph.initializers.values()
        return sum(v.const_value.nbytes for v in inits if v.const_value is not None)
    except AttributeError:
        return 0


def _as_bytes(outcome: Outcome) -> bytes:
    if outcome.staged is not None:
        with open(outcome.staged, "rb") as fh:
            return fh.read()
    if outcome.model_bytes is not None:
        return outcome.model_bytes
    return outcome.program.model_proto.SerializeToString()
