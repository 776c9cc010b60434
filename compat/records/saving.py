"""Save a route's result to ``f`` as ``open(f, "wb")`` would, but atomically.

* A path: the model is staged beside the file ``f`` resolves to (symlinks are followed, the link
  stays) and moved over it with one ``os.replace``. An existing file keeps its mode (and, as
  root, its owner); a new one gets the umask's mode, as ``open()`` would give it.
* A FIFO or a device (``os.devnull``): written in place, as torch does.
* A folder that is not writable, with a writable ``f``: written in place (not atomically); the
  reason is recorded in ``Outcome.notes`` (and the ledger).
* External data: the data file is always ``<model file>.data`` (torch's name and ``location``)
  beside the model file: a symlinked ``f`` gets it beside the link's target, named after the
  target, so the pair is one folder's pair and loads through the target and through a link in
  the same folder (onnx and onnxruntime look for the data beside the path they are given: a link
  in another folder cannot reach it; the note says so). A model whose tensors all fit inline gets
  no data file. The pair is replaced in an order in which a kill can only leave the previous
  complete pair or the new one (see :func:`_commit`); no data file the model names ever has a
  second hard link (onnx refuses to load one) nor is renamed away while a model names it.
* Deleted afterwards: only the data files the replaced model referred to and leftovers of this
  shim's own killed saves; never a data file another model file (``*.onnx``) in the folder still
  refers to (when the new data would have to replace such a file, the save is refused with
  ``CompatFileExistsError`` before anything is written), never a file nothing of ours wrote.
* Leftovers of killed exports in the folder (staging folders, temp files, hidden data files;
  recognised by name, their process gone) are removed by the next save to that folder (a save
  lists the folder only when it changed since this process's last save there).

Saves to one folder are serialised (``flock`` on the folder, where the file system has it).
A failed save leaves any previous file at ``f`` untouched and no temp file behind.

Durability: a self-contained model is not fsynced (``files.atomic_write(durable=False)``), as
torch's own write is not: the replace stays atomic for readers and for a killed process, and
costs no flush to disk (an fsync took 0.3-3x a small model's whole export on a busy disk). A
model with external data is fsynced at each step of its commit, whose order is what keeps the
pair loadable across a power loss.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import secrets
import shutil
import signal
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from compat import files
from compat.errors import CompatFileExistsError, CompatValueError
from compat.records import folder_lock
from compat.request import ExportRequest, Outcome

PROTOBUF_LIMIT = 2**31 - 1  # a single ModelProto cannot be larger than 2 GB
STAGING_PREFIX = ".compat-export-"
#: test hook: ``TORCH_ONNX_COMPAT_TEST_KILL_AT=<step>`` SIGKILLs the process at that step, so tests
#: can check what a crash there leaves behind (steps: tmp-written; with external data: staged,
#: data-placed, model-replaced; re-saving over a pair: data-renamed, model-final; old-data-removed)
KILL_ENV = "TORCH_ONNX_COMPAT_TEST_KILL_AT"
_STARTED = time.time()  # leftovers older than this process may be cleaned up
_STAGING_DIR = re.compile(re.escape(STAGING_PREFIX) + r"(?:(\d+)-)?")
_LOCATION_KEY = b"\n\x08location"  # how a tensor's external-data location starts on the wire
#: hidden names a save gives the new data before it is ``<f>.data``: ``.<f>.data.compat-<pid>-<token>.next``
#: (what the model points at between its two writes) and ``.link`` (the data just before its rename)
_HIDDEN_DATA = r"\.{data}\.compat-(\d+)-[0-9a-f]+\.(?:next|link)"
_OLD_VERSIONED = r"{name}\.[0-9a-f]{{12}}\.data"  # this shim's earlier data file names
_ALIGN = 4096  # tensor offsets in a consolidated data file (page aligned, so it can be mapped)
_ANY_HIDDEN_DATA = re.compile(_HIDDEN_DATA.format(data=r".+"))
_ANY_OLD_VERSIONED = re.compile(_OLD_VERSIONED.format(name=r".+"))
#: folder -> its stat key (and ``_STARTED``) after this process's last save there, when that save
#: found nothing by our leftovers' names. While the key is unchanged a save skips the listing:
#: what a listing removes is older than this process or of this process, and nothing of either
#: can have come since (a failed save of ours forgets the folder). Saving into a folder of
#: thousands of files no longer lists it each time.
_QUIET_FOLDERS: dict[str, tuple[Any, ...]] = {}
_QUIET_FOLDERS_LIMIT = 256
#: what the model files this process wrote refer to, by (path, device, inode, size, mtime): a
#: re-export need not read the file it replaces to learn which data files it used
_WRITTEN_REFS: dict[tuple[Any, ...], frozenset[str]] = {}
_WRITTEN_REFS_LIMIT = 256


@dataclass
class _Pair:
    """Where one save writes: the model file ``target`` (``f`` with symlinks followed) and its
    data file ``data`` in ``folder``, the folder of the path the user passed."""

    target: str
    folder: str
    name: str  # the basename of the path the user passed
    target_stat: os.stat_result | None
    notes: list[str] = field(default_factory=list)
    _sibling_refs: dict[str, str] | None = None
    _entries: list[os.DirEntry[str]] | None = None

    @property
    def data(self) -> str:
        return self.name + ".data"

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def entries(self) -> list[os.DirEntry[str]]:
        """The folder's entries when this save began (one scan, under the folder lock: no other
        save of ours writes there meanwhile), for its leftover checks."""
        if self._entries is None:
            try:
                with os.scandir(self.folder) as found:
                    self._entries = list(found)
            except OSError:
                self._entries = []
        return self._entries

    def siblings(self) -> dict[str, str]:
        """Data file names other model files (``*.onnx``) in the folder refer to -> one of them."""
        if self._sibling_refs is None:
            refs: dict[str, str] = {}
            with contextlib.suppress(OSError), os.scandir(self.folder) as entries:
                for e in entries:
                    if not e.name.lower().endswith(".onnx"):
                        continue
                    with contextlib.suppress(OSError):
                        if not e.is_file() or os.path.realpath(e.path) == self.target:
                            continue
                        for loc in _external_locations(e.path):
                            refs.setdefault(loc, e.name)
            self._sibling_refs = refs
        return self._sibling_refs


def save(outcome: Outcome, req: ExportRequest) -> str | None:
    """Write the exported model to ``req.f``; returns where it went."""
    f = req.f
    if f is None:
        return None
    _check_output_names(outcome, req)
    if not isinstance(f, (str, os.PathLike)):
        f.write(_as_bytes(outcome))
        return f"<{type(f).__name__}>"
    path = os.fsdecode(os.fspath(f))
    shown = os.path.abspath(path)
    with_data = outcome.staged is not None or _external(outcome, req)
    target, st = _resolve(path, shown, with_data)
    if st is not None and not stat.S_ISREG(st.st_mode):
        data = _as_bytes(outcome)
        discard(outcome)
        _write_in_place(target, data)
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) else "special"
        outcome.notes.append(f"f is not a regular file ({kind}): written in place")
        return shown
    # the data file goes beside the model file (a link's target): one folder holds the pair
    pair = _Pair(target, os.path.dirname(target), os.path.basename(target), st)
    try:
        with folder_lock.held(pair.folder) as folder_stat:
            known = _QUIET_FOLDERS.pop(pair.folder, None)  # remembered again once this save succeeds
            if known is not None and known == _folder_key(pair.folder, folder_stat):
                pair._entries = []  # nothing a listing could find to remove (_QUIET_FOLDERS)
            else:
                clean_stale(pair.folder, pair.entries())
            if with_data:
                staged = outcome.staged if outcome.staged is not None else _stage(pair, outcome)
                outcome.staged = None
                if _commit(staged, pair) and os.path.dirname(shown) != pair.folder:
                    pair.notes.append(
                        f"f is a link to {target} in another folder: its data file {pair.data} is "
                        f"beside {target}; load the model through {target} (onnx and onnxruntime "
                        f"look for external data beside the path they are given)")
            else:
                _write_model(_as_bytes(outcome), pair)
            _remember_quiet(pair)
    finally:
        outcome.notes.extend(pair.notes)
    return shown


def _resolve(path: str, shown: str, with_data: bool) -> tuple[str, os.stat_result | None]:
    """The file ``path`` names with symlinks followed, and its stat (None: no file yet).

    A self-contained model (not ``with_data``) at a name that is not a link takes one ``lstat``: it is
    replaced in the folder its name is in, through whatever links lead there. A model with
    external data, or a link, gets the real path (the data file goes beside the real file).
    ``realpath`` gets ``path`` as given: it follows a link before a ``..`` after it, as ``open``
    does (``abspath`` would drop the pair lexically)."""
    if not with_data and os.pardir not in path.replace(os.altsep or os.sep, os.sep).split(os.sep):
        try:
            st = os.lstat(shown)
        except FileNotFoundError:
            return shown, None
        except OSError:
            pass
        else:
            if not stat.S_ISLNK(st.st_mode):
                return shown, st
    target = os.path.realpath(path)
    return target, _stat(target)


def _folder_key(folder: str, st: os.stat_result | None = None) -> tuple[Any, ...] | None:
    """What tells whether ``folder`` changed (``st``: its stat, taken just now; None: take it)."""
    st = st if st is not None else files.stat_or_none(folder)
    if st is None:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink, _STARTED)


def _remember_quiet(pair: _Pair) -> None:
    """After a successful save: remember the folder as it is now, if its listing (when this save
    made one) held nothing by the names of our leftovers, which a later listing could then find
    removable (a process alive now may be gone by then)."""
    listed = pair._entries
    if listed is None or any(_looks_like_ours(e.name) for e in listed):
        return
    key = _folder_key(pair.folder)
    if key is not None:
        if len(_QUIET_FOLDERS) >= _QUIET_FOLDERS_LIMIT:
            _QUIET_FOLDERS.clear()
        _QUIET_FOLDERS[pair.folder] = key


def _looks_like_ours(name: str) -> bool:
    return bool(_STAGING_DIR.match(name) or files.TEMP_FILE.match(name) or _ANY_HIDDEN_DATA.fullmatch(name)
                or _ANY_OLD_VERSIONED.fullmatch(name))


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

def _write_model(data: bytes, pair: _Pair) -> None:
    """Replace the model file with a self-contained model; then remove the data files the
    replaced model used (that no other model uses)."""
    st = _stat(pair.target)  # under the folder lock: what the save replaces
    old_refs = _external_locations(pair.target, st) if st is not None else set()
    try:
        files.atomic_write(pair.target, data, before_replace=lambda: _step("tmp-written"), durable=False,
                           resolved=True, current=st)
        _remember_refs(pair.target, frozenset())
    except files.FolderNotWritable as exc:
        if st is None or not os.access(pair.target, os.W_OK):
            raise exc.error from None
        _write_in_place(pair.target, data)
        pair.notes.append(f"{pair.target} written in place, not atomically: its folder is not "
                          f"writable ({exc.error.strerror})")
        return
    _remove_replaced(pair, old_refs, keep=set())


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


def _stage(pair: _Pair, outcome: Outcome) -> str:
    """Write the model and its data file into a staging folder in the data file's folder."""
    tmp = staging_dir(pair.folder)
    try:
        staged = os.path.join(tmp, pair.name)
        if outcome.program is not None:
            # export_params / keep_initializers_as_inputs are already applied to the program
            outcome.program.save(staged, external_data=True)
        else:
            import onnx

            onnx.save_model(
                onnx.load_from_string(outcome.model_bytes), staged, save_as_external_data=True,
                all_tensors_to_one_file=True, location=pair.data, size_threshold=0,
            )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return staged


def _commit(staged: str, pair: _Pair) -> bool:
    """Move a staged model and its data into place as ``f`` and ``<f>.data``; whether the model
    has a data file.

    The order keeps a complete, loadable pair at ``f`` at every moment. When the model at ``f``
    does not use ``<f>.data`` (a new file, a self-contained one): (1) the data moves to
    ``<f>.data``; (2) the model replaces ``f``. Else: (1) the new data goes in under a hidden name
    nothing refers to; (2) the model, pointing at that name, replaces ``f``: the new pair is
    complete; (3) a copy of the data (never a hard link: onnx refuses data with two links)
    replaces ``<f>.data``, which only the replaced model used; (4) the model, now pointing at
    ``<f>.data``, replaces ``f``; (5) the hidden name goes. A kill before (2) leaves the previous
    pair, after it the new one.
    """
    import onnx

    staging = os.path.dirname(staged)
    hidden = f".{pair.data}.compat-{os.getpid()}-{secrets.token_hex(6)}"
    placed: list[str] = []
    committed = False
    try:
        _step("staged")
        proto = onnx.load(staged, load_external_data=False)
        external = [t for t in _tensors(proto) if _is_external(t)]
        if not external:  # every tensor inline (small weights): no data file at all
            with open(staged, "rb") as fh:
                data = fh.read()
            shutil.rmtree(staging, ignore_errors=True)
            _write_model(data, pair)
            return False
        if os.path.lexists(pair.path(pair.data)) and pair.data in pair.siblings():
            raise CompatFileExistsError(
                f"f: {pair.path(pair.data)} is still used by {pair.siblings()[pair.data]} in the "
                f"same folder, and this export's data file must take that name; nothing was "
                f"written. Export to another file name, or re-export or remove "
                f"{pair.siblings()[pair.data]} first"
            )
        old_refs = _external_locations(pair.target) if pair.target_stat is not None else set()
        direct = pair.data not in old_refs  # nothing loadable names <f>.data: it can go first
        nxt = pair.path(hidden + ".link" if direct else hidden + ".next")
        placed.append(nxt)
        _place_data(proto, external, staging, nxt)
        files.keep_owner_and_mode_of_path(nxt, pair.target_stat)
        _fsync(nxt)
        if direct:
            os.replace(nxt, pair.path(pair.data))
            placed[0] = pair.path(pair.data)
        files.fsync_folder(pair.folder)
        _step("data-placed")
        _set_location(external, pair.data if direct else os.path.basename(nxt))
        files.atomic_write(pair.target, proto.SerializeToString())
        committed = True
        _step("model-replaced")
        if not direct:
            copy = pair.path(hidden + ".link")
            placed.append(copy)
            _copy(nxt, copy)
            os.replace(copy, pair.path(pair.data))
            files.fsync_folder(pair.folder)
            _step("data-renamed")
            _set_location(external, pair.data)
            files.atomic_write(pair.target, proto.SerializeToString())
        _remember_refs(pair.target, frozenset({pair.data}))
        if not direct:
            _step("model-final")
            os.unlink(nxt)
    except BaseException:
        for path in placed if not committed else placed[1:]:  # after (2) the model uses nxt
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _remove_replaced(pair, old_refs, keep={pair.data})
    _step("old-data-removed")
    return True


def _is_external(tensor: Any) -> bool:
    return tensor.data_location == 1 and any(e.key == "location" for e in tensor.external_data)


def _entries(tensor: Any) -> dict[str, str]:
    return {e.key: e.value for e in tensor.external_data}


def _set_entry(tensor: Any, key: str, value: str) -> None:
    for e in tensor.external_data:
        if e.key == key:
            e.value = value
            return
    entry = tensor.external_data.add()
    entry.key, entry.value = key, value


def _set_location(tensors: list[Any], location: str) -> None:
    for t in tensors:
        _set_entry(t, "location", location)


def _place_data(proto: Any, external: list[Any], staging: str, dest: str) -> None:
    """Put the staged tensors' data at ``dest``: the one staged data file moved there, or the
    several files the TorchScript exporter writes for a large model copied into one."""
    sources = {_entries(t)["location"] for t in external}
    if len(sources) == 1:
        _move(_inside(staging, sources.pop()), dest)
        return
    offset = 0
    with open(dest, "wb") as out:
        for t in external:
            info = _entries(t)
            src = _inside(staging, info["location"])
            start = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else os.path.getsize(src) - start
            pad = -offset % _ALIGN
            out.write(b"\0" * pad)
            offset += pad
            with open(src, "rb") as fh:
                fh.seek(start)
                left = length
                while left:
                    block = fh.read(min(left, 1 << 24))
                    if not block:
                        raise OSError(f"{src}: shorter than its tensor {t.name!r} says")
                    out.write(block)
                    left -= len(block)
            _set_entry(t, "offset", str(offset))
            _set_entry(t, "length", str(length))
            offset += length


def _inside(staging: str, location: str) -> str:
    path = os.path.normpath(os.path.join(staging, location))
    if os.path.dirname(path) != os.path.normpath(staging):
        raise OSError(f"staged external data {location!r} is not a file of the staging folder")
    return path


def _move(src: str, dest: str) -> None:
    """``os.replace``, or a copy where ``dest`` is on another file system (a symlinked ``f``)."""
    try:
        os.replace(src, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.copyfile(src, dest)


def _copy(src: str, dest: str) -> None:
    """A durable copy of ``src`` at ``dest`` with its mode (and, as root, its owner)."""
    shutil.copyfile(src, dest)
    files.keep_owner_and_mode_of_path(dest, os.stat(src))
    _fsync(dest)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stat_key(path: str, st: os.stat_result | None = None) -> tuple[Any, ...] | None:
    """What identifies the file at ``path`` and its content (from ``st`` when given)."""
    st = st if st is not None else files.stat_or_none(path)
    if st is None:
        return None
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _remember_refs(path: str, refs: frozenset[str]) -> None:
    key = _stat_key(path)
    if key is None:
        return
    if len(_WRITTEN_REFS) >= _WRITTEN_REFS_LIMIT:
        _WRITTEN_REFS.clear()
    _WRITTEN_REFS[key] = refs


def _external_locations(path: str, st: os.stat_result | None = None) -> set[str]:
    """Data files the model at ``path`` refers to (empty when it is self-contained or unreadable).
    A file this process wrote and nobody changed since (``st``: its stat just taken) is known;
    else a byte scan first: a self-contained model is not parsed."""
    known = _WRITTEN_REFS.get(_stat_key(path, st))  # type: ignore[arg-type]
    if known is not None:
        return set(known)
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


def _remove_replaced(pair: _Pair, old_refs: set[str], keep: set[str]) -> None:
    """After the model file was replaced: remove the data files the replaced model referred to
    and this shim's leftovers for this name, except what the new model uses (``keep``) and what
    another model file in the folder still refers to (that one is kept, with a note)."""
    candidates = (old_refs | _leftovers(pair)) - keep
    candidates = {c for c in candidates if os.path.basename(c) == c and c not in ("", ".", "..", pair.name)}
    candidates = {c for c in candidates if os.path.lexists(pair.path(c))}
    if not candidates:
        return
    used = pair.siblings()
    for loc in sorted(candidates):
        if loc in used:
            if loc in old_refs:
                pair.notes.append(f"kept {loc}, which the replaced model used: {used[loc]} still uses it")
            continue
        with contextlib.suppress(OSError):
            os.unlink(pair.path(loc))


@functools.lru_cache(maxsize=64)
def _leftover_patterns(name: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The hidden and the old versioned data file names of model file ``name``."""
    return (re.compile(_HIDDEN_DATA.format(data=re.escape(name + ".data"))),
            re.compile(_OLD_VERSIONED.format(name=re.escape(name))))


def _leftovers(pair: _Pair) -> set[str]:
    """This shim's data files for ``pair.name`` that a killed save left: hidden ones of a process
    that is gone (or of this one: saves to the folder are serialised), and the versioned names
    earlier releases used, older than this process."""
    hidden, versioned = _leftover_patterns(pair.name)
    hidden_start, versioned_start = f".{pair.data}.compat-", f"{pair.name}."
    found: set[str] = set()
    for e in pair.entries():
        if not e.name.startswith((hidden_start, versioned_start)):
            continue
        m = hidden.fullmatch(e.name)
        if m is None and not versioned.fullmatch(e.name):
            continue
        with contextlib.suppress(OSError):
            if not e.is_file(follow_symlinks=False):
                continue
            ours = m is not None and int(m.group(1)) == os.getpid()
            pid = m.group(1) if m is not None else None
            if ours or (e.stat(follow_symlinks=False).st_mtime < _STARTED and not _alive(pid)):
                found.add(e.name)
    return found


# --- leftovers of killed exports ----------------------------------------------------------------

def clean_stale(folder: str, entries: list[os.DirEntry[str]] | None = None) -> int:
    """Remove staging folders and temp files of killed exports from ``folder`` (whose entries
    the caller may have listed already): only ours (by name), older than this process, and whose
    process is gone. Returns how many."""
    removed = 0
    if entries is None:
        try:
            with os.scandir(folder) as found:
                entries = list(found)
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
    """None when nothing is at ``path``; any other error (a folder this user cannot read) is raised."""
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
