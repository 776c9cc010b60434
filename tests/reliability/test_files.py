"""compat.files: the one atomic write and the one pyproject.toml finder of the project."""

from __future__ import annotations

import os
import stat
import threading
import time

import pytest
from rel_helpers import open_descriptors

from compat import files


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_new_file_gets_the_umask_mode(tmp_path):
    target = tmp_path / "a.json"
    assert files.atomic_write(target, b"new") == str(target)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~_umask()
    assert os.listdir(tmp_path) == ["a.json"]


def test_existing_file_keeps_its_mode(tmp_path):
    target = tmp_path / "a.py"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    files.atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640


def test_symlink_is_followed_and_stays_a_link(tmp_path):
    (tmp_path / "store").mkdir()
    real = tmp_path / "store" / "real.py"
    real.write_bytes(b"old")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    assert files.atomic_write(link, b"new") == str(real)
    assert link.is_symlink() and real.read_bytes() == b"new"


def test_failure_before_replace_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "a.py"
    target.write_bytes(b"old")

    def crash() -> None:
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        files.atomic_write(target, b"new", before_replace=crash)
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["a.py"]


def test_a_leftover_temp_of_this_pid_is_not_reused(tmp_path):
    leftover = tmp_path / f".a.py.compat-{os.getpid()}-{threading.get_ident()}.tmp"
    leftover.write_bytes(b"someone else's")
    files.atomic_write(tmp_path / "a.py", b"new")
    assert (tmp_path / "a.py").read_bytes() == b"new"
    assert leftover.read_bytes() == b"someone else's"
    assert sorted(os.listdir(tmp_path)) == sorted(["a.py", leftover.name])


def test_temp_names_are_recognised_with_their_pid(tmp_path):
    seen: list[str] = []
    files.atomic_write(tmp_path / "m.onnx", b"x", before_replace=lambda: seen.extend(os.listdir(tmp_path)))
    (name,) = seen
    match = files.TEMP_FILE.match(name)
    assert match is not None and int(match.group(1)) == os.getpid()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_unwritable_folder_raises_folder_not_writable(tmp_path):
    target = tmp_path / "a.py"
    target.write_bytes(b"old")
    os.chmod(tmp_path, 0o500)
    try:
        with pytest.raises(files.FolderNotWritable) as info:
            files.atomic_write(target, b"new")
    finally:
        os.chmod(tmp_path, 0o700)
    assert isinstance(info.value, PermissionError) and isinstance(info.value.error, PermissionError)
    assert info.value.strerror == info.value.error.strerror
    assert target.read_bytes() == b"old"


def test_find_pyproject_walks_up_to_the_nearest(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'outer'\n")
    inner = tmp_path / "pkg" / "sub"
    inner.mkdir(parents=True)
    assert files.find_pyproject(inner) == str(tmp_path / "pyproject.toml")
    assert files.find_project_root(inner) == str(tmp_path)
    (tmp_path / "pkg" / "pyproject.toml").write_text("")
    assert files.find_project_root(inner) == str(tmp_path / "pkg")
    (inner / ".git").mkdir()  # a checkout's root is a project root too (find_pyproject ignores it)
    assert files.find_project_root(inner) == str(inner)
    assert files.find_pyproject(inner) == str(tmp_path / "pkg" / "pyproject.toml")


def test_files_is_torch_free():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(files))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "contextlib", "os", "queue", "re", "secrets", "stat", "threading",
                        "collections", "sys", "ctypes", "time"}


def test_as_new_file_replaces_a_link_and_takes_the_umask_mode(tmp_path):
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(b"not yours")
    os.chmod(elsewhere, 0o600)
    entry = tmp_path / "cache" / "k.json"
    entry.parent.mkdir()
    entry.symlink_to(elsewhere)
    files.atomic_write(entry, b"{}", as_new_file=True)
    assert not entry.is_symlink() and entry.read_bytes() == b"{}"
    assert elsewhere.read_bytes() == b"not yours"
    assert stat.S_IMODE(os.stat(entry).st_mode) == 0o666 & ~_umask()


@pytest.mark.skipif(not os.sys.platform.startswith("linux"), reason="fallocate is Linux's")
def test_the_temp_file_is_allocated_before_it_is_written(tmp_path, monkeypatch):
    """ext4 flushes delayed-allocation blocks of a file renamed over another one (a 24 MB model's
    replace cost ~19 ms): the temp file's blocks are reserved up front, so the rename is not a
    flush. The saved bytes are exactly the data (no reserved tail)."""
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old")
    data = os.urandom(3 * 2**20 + 5)
    allocated = []

    def check():
        tmp = next(p for p in tmp_path.iterdir() if p.name != "m.onnx")
        allocated.append(os.stat(tmp).st_blocks * 512)

    files.atomic_write(target, data, durable=False, before_replace=check)
    assert target.read_bytes() == data
    if allocated[0] == 0:
        pytest.skip("this file system has no fallocate")
    assert allocated[0] >= len(data)
    fd = os.open(tmp_path / "empty", os.O_WRONLY | os.O_CREAT)
    try:
        files.preallocate(fd, 2**20)
        assert os.fstat(fd).st_size == 2**20 and os.fstat(fd).st_blocks * 512 >= 2**20
    finally:
        os.close(fd)


def _descriptors_of_deleted_files() -> list[str]:
    return [where for where in open_descriptors() if where.endswith(" (deleted)")]


def _released(folder: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(folder in d for d in _descriptors_of_deleted_files()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
def test_a_replaced_file_is_released_by_the_closing_thread(tmp_path):
    """The file a replace drops is held open across the rename and closed off the caller's
    thread (freeing its blocks is not the caller's wait): a reader's view is unchanged, every
    replaced file is released, and nothing but the model is left in the folder."""
    target = tmp_path / "m.onnx"
    target.write_bytes(b"v0")
    with open(target, "rb") as reader:
        for i in range(1, 200):
            files.atomic_write(target, f"v{i}".encode(), durable=False)
        assert reader.read() == b"v0"  # the old file, still readable through an open descriptor
    assert target.read_bytes() == b"v199"
    assert _released(str(tmp_path)), _descriptors_of_deleted_files()
    assert os.listdir(tmp_path) == ["m.onnx"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
def test_a_large_replaced_file_is_freed_by_the_replace_itself(tmp_path, monkeypatch):
    """A replaced file over ``HOLD_MAX_BYTES`` is not held for the closing thread (freeing it there
    while the next large model is written slowed that write): when the replace returns, no
    descriptor of it is open; a small one is released by the closing thread."""
    monkeypatch.setattr(files, "HOLD_MAX_BYTES", 1 << 20)
    large, small = tmp_path / "large.onnx", tmp_path / "small.onnx"
    large.write_bytes(os.urandom(2 << 20))
    small.write_bytes(b"small")
    assert _released(str(tmp_path))
    files.atomic_write(large, b"new large", durable=False)
    assert not any(str(tmp_path) in d for d in _descriptors_of_deleted_files())
    assert large.read_bytes() == b"new large"
    files.atomic_write(small, b"new small", durable=False)
    assert _released(str(tmp_path)) and small.read_bytes() == b"new small"


@pytest.mark.skipif(not hasattr(os, "fork") or not os.path.isdir("/proc/self/fd"),
                    reason="forks, reads /proc/self/fd")
def test_a_forked_child_releases_its_replaced_files(tmp_path):
    """A child forked after the closing thread started has no such thread: it starts its own."""
    target = tmp_path / "m.onnx"
    files.atomic_write(target, b"parent", durable=False)
    files.atomic_write(target, b"parent again", durable=False)  # the parent's thread runs
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery, only its exit status
        ok = False
        try:
            for i in range(20):
                files.atomic_write(target, f"child {i}".encode(), durable=False)
            ok = _released(str(tmp_path)) and target.read_bytes() == b"child 19"
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert target.read_bytes() == b"child 19"
