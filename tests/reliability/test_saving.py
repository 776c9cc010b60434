"""Saving writes to f as ``open(f, "wb")`` would (mode, symlinks, FIFOs, devices, read-only
folders), but atomically wherever it can."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

import onnx
import pytest
import torch
from rel_helpers import (
    PACKAGES,
    Tiny,
    blocked_folder,
    check_parity,
    run_python,
    world_readable_code,
)

import compat

X = (torch.randn(2, 4),)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("route", ["legacy", pytest.param("dynamo", marks=pytest.mark.slow)])
def test_existing_file_keeps_its_mode(tmp_path, route):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old")
    os.chmod(target, 0o600)
    model = Tiny().eval()
    compat.export(model, X, target, route=route, input_names=["x"])
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    check_parity(target, model, X, ["x"])


def test_new_file_gets_the_umask_mode(tmp_path):
    target = tmp_path / "m.onnx"
    compat.export(Tiny().eval(), X, target, route="legacy")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~_umask()


def test_external_data_files_get_the_model_files_mode(tmp_path):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    model = Tiny().eval()
    compat.export(model, X, target, route="legacy", external_data=True, input_names=["x"])
    for name in os.listdir(tmp_path):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o640, name
    check_parity(target, model, X, ["x"])


def test_symlink_is_followed_and_stays_a_link(tmp_path):
    real_dir = tmp_path / "store"
    real_dir.mkdir()
    real = real_dir / "real.onnx"
    real.write_bytes(b"old")
    link = tmp_path / "m.onnx"
    link.symlink_to(real)
    model = Tiny().eval()
    compat.export(model, X, link, route="legacy", input_names=["x"])
    assert link.is_symlink() and os.readlink(link) == str(real)
    check_parity(real, model, X, ["x"])
    assert sorted(os.listdir(real_dir)) == ["real.onnx"] and sorted(os.listdir(tmp_path)) == ["m.onnx", "store"]


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "m.onnx"
    link.symlink_to(tmp_path / "target.onnx")
    model = Tiny().eval()
    compat.export(model, X, link, route="legacy", input_names=["x"])
    assert link.is_symlink()
    check_parity(tmp_path / "target.onnx", model, X, ["x"])


@pytest.mark.parametrize("external_data", [False, True])
def test_a_link_before_dotdot_is_followed_as_open_follows_it(tmp_path, monkeypatch, external_data):
    """``f="link/../m.onnx"``: open() follows the link, then goes up from its target, so torch
    writes beside the target's folder; the shim writes there too (it used to drop ``link/..``
    lexically and write into the current folder), and nothing lands in the current folder."""
    (tmp_path / "store" / "deep").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "link").symlink_to(tmp_path / "store" / "deep")
    monkeypatch.chdir(tmp_path / "work")
    model = Tiny().eval()
    torch.onnx.export(model, X, "link/../torch.onnx", dynamo=False, input_names=["x"])
    compat.export(model, X, "link/../m.onnx", route="legacy", external_data=external_data, input_names=["x"])
    assert (tmp_path / "store" / "torch.onnx").is_file()  # where open() resolves the name
    assert sorted(os.listdir(tmp_path / "work")) == ["link"]
    check_parity(tmp_path / "store" / "m.onnx", model, X, ["x"])
    assert ("m.onnx.data" in os.listdir(tmp_path / "store")) == external_data


def test_a_file_through_a_linked_folder_is_replaced_in_the_real_folder(tmp_path):
    """A save through a folder link replaces the file in the folder the link leads to; the link
    stays a link and nothing else is left there."""
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    model = Tiny().eval()
    for _ in range(3):
        compat.export(model, X, tmp_path / "alias" / "m.onnx", route="legacy", input_names=["x"])
        compat.export(model, X, tmp_path / "real" / "m.onnx", route="legacy", input_names=["x"])
    assert (tmp_path / "alias").is_symlink() and sorted(os.listdir(tmp_path / "real")) == ["m.onnx"]
    check_parity(tmp_path / "alias" / "m.onnx", model, X, ["x"])


def _loads_everywhere(path, model) -> None:
    """onnx (which refuses data files with a second hard link or behind a symlink) and
    onnxruntime both load ``path`` with its data, and it computes what ``model`` does."""
    onnx.load(str(path), load_external_data=True)
    check_parity(path, model, X, ["x"])


@pytest.mark.parametrize("route", ["legacy", pytest.param("dynamo", marks=pytest.mark.slow)])
def test_symlinked_external_data_model_gets_its_data_beside_the_target(tmp_path, route):
    """The model goes to the link's target (the link stays), the data file beside the target and
    named after it: the pair loads through the target and through a link in its folder (issue 35
    item 4: the data went beside the link, named after it, and the target did not load)."""
    link = tmp_path / "latest.onnx"
    link.symlink_to(tmp_path / "real.onnx")
    torch.manual_seed(0)  # weights large enough for the torch.export route's data file
    model = torch.nn.Sequential(torch.nn.Linear(4, 256), torch.nn.Tanh(), torch.nn.Linear(256, 3)).eval()
    for _ in range(2):
        compat.export(model, X, link, route=route, external_data=True, input_names=["x"])
        assert link.is_symlink() and os.readlink(link) == str(tmp_path / "real.onnx")
        assert sorted(os.listdir(tmp_path)) == ["latest.onnx", "real.onnx", "real.onnx.data"]
        _loads_everywhere(link, model)
        _loads_everywhere(tmp_path / "real.onnx", model)


def test_a_link_in_another_folder_gets_the_pair_beside_its_target_and_says_so(tmp_path):
    """No one data file loads through a link in another folder and through its target; the pair
    stays together beside the target (where it loads), and the outcome's note names the path."""
    real_dir = tmp_path / "store"
    real_dir.mkdir()
    link = tmp_path / "m.onnx"
    link.symlink_to(real_dir / "real.onnx")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 256), torch.nn.Tanh(), torch.nn.Linear(256, 3)).eval()
    compat.export(model, X, link, route="legacy", external_data=True, input_names=["x"])
    assert sorted(os.listdir(real_dir)) == ["real.onnx", "real.onnx.data"]
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "store"]
    _loads_everywhere(real_dir / "real.onnx", model)
    assert any("load the model through" in n and str(real_dir / "real.onnx") in n
               for n in compat.last_outcome().notes)


@pytest.fixture
def null_device(tmp_path) -> str:
    """A private copy of /dev/null (same device numbers): a regression must not replace the
    machine's own /dev/null, which every later process writes to."""
    path = tmp_path / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.stat(os.devnull).st_rdev)
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot create a device node here: {exc}")
    return str(path)


def test_dev_null_stays_a_device(null_device):
    before = os.stat(null_device)
    compat.export(Tiny().eval(), X, null_device, route="legacy")
    after = os.stat(null_device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert stat.S_IMODE(after.st_mode) == stat.S_IMODE(before.st_mode)
    assert any("not a regular file" in n for n in compat.last_outcome().notes)


def test_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "m.onnx"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    model = Tiny().eval()
    compat.export(model, X, fifo, route="legacy", input_names=["x"])
    reader.join(timeout=600)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    check_parity(got[0], model, X, ["x"])


def test_external_data_to_a_device_is_refused_before_work(counting, null_device):
    with pytest.raises(compat.CompatError, match="not a regular file"):
        compat.export(counting, X, null_device, external_data=True)
    assert counting.calls == 0


_READ_ONLY_FOLDER = """
    import json, os, sys, torch, compat
    uid, gid = {uid!r}, {gid!r}
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()).eval()
    x = torch.randn(2, 4)
    # warm up as the starting user, the way the checked calls go (a ledger too): the interpreter
    # may live where 'nobody' cannot go, so nothing it needs may be loaded after the drop
    os.environ["TORCH_ONNX_COMPAT_LEDGER"] = {warm_book!r}
    compat.export(net, (x,), {warm!r}, route="legacy", input_names=["x"])
    del os.environ["TORCH_ONNX_COMPAT_LEDGER"]
    late = []  # modules first imported after the drop
    if uid is not None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        sys.addaudithook(lambda event, args: late.append(args[0]) if event == "import" else None)
    # what open(f, "wb") refuses is refused before any work: a new file in the read-only folder,
    # a read-only file in a writable folder
    class Counting(torch.nn.Module):
        calls = 0
        def forward(self, x):
            Counting.calls += 1
            return x * 2
    for f in ({new!r}, {read_only!r}):
        try:
            compat.export(Counting(), (x,), f)
        except compat.CompatError as exc:
            assert isinstance(exc, PermissionError) and "f: " in str(exc), exc
        else:
            raise SystemExit(f"no error for {{f}}")
    assert Counting.calls == 0 and not os.path.exists({new!r})
    assert open({read_only!r}, "rb").read() == b"old"
    os.environ["TORCH_ONNX_COMPAT_LEDGER"] = {book!r}
    compat.export(net, (x,), {target!r}, route="legacy", input_names=["x"])
    loaded = {{name: getattr(sys.modules.get(name), "__file__", None) for name in late}}
    print(json.dumps({{"notes": compat.last_outcome().notes, "late": loaded,
                      "packages": {{name: sys.modules[name].__file__ for name in {packages!r}
                                   if name in sys.modules}}}}))
"""


def _reachable_temp_folder(uid: int, gid: int) -> Path:
    """A temporary folder the user ``uid`` can reach (pytest's own are private to their owner);
    skips, naming the folder in the way, when there is none."""
    blocked: dict[str, Path] = {}
    for parent in dict.fromkeys((tempfile.gettempdir(), "/tmp", "/var/tmp")):
        if os.path.isdir(parent):
            in_the_way = blocked_folder(Path(parent), uid, gid)
            if in_the_way is None:
                return Path(tempfile.mkdtemp(prefix="compat-ro-", dir=parent))
            blocked[parent] = in_the_way
    pytest.skip(f"uid {uid} cannot reach a temporary folder: "
                + ", ".join(f"{p} (blocked at {b})" for p, b in blocked.items()))


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_writable_file_in_a_read_only_folder_is_written_in_place():
    """As a non-root user (root ignores folder permissions: as root, a subprocess drops to
    'nobody' after warming up). Wherever the checkout and its interpreter live (issue 23): the
    subprocess runs in a world-readable temporary folder, on a world-readable copy of the code,
    and loads nothing after the drop from anywhere else."""
    uid = gid = None
    if os.geteuid() == 0:
        import pwd

        try:
            pw = pwd.getpwnam("nobody")
        except KeyError:
            pytest.skip("no 'nobody' user to drop root to")
        uid, gid = pw.pw_uid, pw.pw_gid
    base = _reachable_temp_folder(os.geteuid() if uid is None else uid,
                                  os.getegid() if gid is None else gid)
    try:
        os.chmod(base, 0o755)
        code_copy = world_readable_code(base / "code")
        folder = base / "ro"
        folder.mkdir()
        target = folder / "m.onnx"
        target.write_bytes(b"old")
        book = base / "ledger.jsonl"
        book.write_text("")
        if uid is not None:
            for p in (folder, target, book):
                os.chown(p, uid, gid)
        read_only = base / "read_only.onnx"  # the user's own file, in a folder they may write
        read_only.write_bytes(b"old")
        os.chmod(read_only, 0o444)
        os.chmod(base, 0o777)
        if uid is not None:
            os.chown(read_only, uid, gid)
        os.chmod(target, 0o644)
        os.chmod(folder, 0o555)
        code = _READ_ONLY_FOLDER.format(book=str(book), target=str(target),
                                        warm=str(base / "warm.onnx"),
                                        warm_book=str(base / "warm.jsonl"), uid=uid, gid=gid,
                                        new=str(folder / "new.onnx"), read_only=str(read_only),
                                        packages=PACKAGES)
        proc = run_python(code, cwd=base, env={"TORCH_ONNX_COMPAT_CACHE_DIR": "off",
                                               "PYTHONPATH": str(code_copy)})
        _check_read_only_result(proc, folder, target, book, code_copy)
    finally:
        if (base / "ro").exists():
            os.chmod(base / "ro", 0o755)
        shutil.rmtree(base, ignore_errors=True)


def _check_read_only_result(proc, folder, target, book, code_copy) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    notes = result["notes"]
    assert any("in place" in n and "not writable" in n for n in notes), notes
    # the code under test is the checkout's, read from the copy that every user can read
    assert {"compat", "legacy"} <= result["packages"].keys(), result["packages"]
    for name, path in result["packages"].items():
        assert Path(path).is_relative_to(code_copy), (name, path)
    # a module first loaded after the drop, from outside the copy, would be out of reach when the
    # interpreter lives in a private folder: the warm-up must load it
    outside = {m: f for m, f in result["late"].items()
               if f is not None and not Path(f).is_relative_to(code_copy)}
    assert not outside, f"loaded after the drop, out of reach of a private install: {outside}"
    (rec,) = [json.loads(line) for line in book.read_text().splitlines()]
    assert rec["status"] == "ok" and rec["notes"] == notes
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()).eval()
    check_parity(target, net, X, ["x"])
    assert os.listdir(folder) == ["m.onnx"]


def test_stale_temp_files_and_staging_folders_are_cleaned(tmp_path, monkeypatch):
    """Leftovers of a killed export (a dead process, older than this one) go; those of a live
    process, of someone else, or of files that only look similar stay."""
    import subprocess
    import sys

    from compat.records import saving

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = os.getppid()
    leftovers = {
        f".m.onnx.compat-{dead.pid}-1234.tmp": False,
        f".compat-export-{dead.pid}-abc123": False,
        ".compat-export-old_style1": False,
        f".m.onnx.compat-{live}-1234.tmp": True,   # a live process may still be writing it
        f".compat-export-{live}-abc123": True,
        "notes.tmp": True,                         # not ours
        ".m.onnx.tmp": True,
        f".m.onnx.{dead.pid}.1234.tmp": True,     # looks alike, but is not one of ours
    }
    for name in leftovers:
        p = tmp_path / name
        if "compat-export" in name:
            p.mkdir()
            (p / "m.onnx").write_bytes(b"partial")
        else:
            p.write_bytes(b"partial")
    monkeypatch.setattr(saving, "_STARTED", saving._STARTED + 1e9)  # as if in a later process
    model = Tiny().eval()
    compat.export(model, X, tmp_path / "m.onnx", route="legacy", input_names=["x"])
    check_parity(tmp_path / "m.onnx", model, X, ["x"])
    remaining = set(os.listdir(tmp_path))
    for name, kept in leftovers.items():
        assert (name in remaining) == kept, name


def test_a_folder_unchanged_since_the_last_save_is_not_listed_again(tmp_path, monkeypatch):
    """Saving lists the folder for leftovers of killed exports only when something changed there
    since this process's last save: a leftover that appears later (of a process gone, older than
    this one) is still removed by the next save, and the saves keep their models."""
    import subprocess
    import sys

    from compat.records import saving

    listed: list[str] = []
    real_scandir = os.scandir

    def counting_scandir(path="."):
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    target = tmp_path / "m.onnx"
    for seed in (1, 2, 3):
        model = Tiny(seed).eval()
        compat.export(model, X, target, route="legacy", input_names=["x"])
        check_parity(target, model, X, ["x"])
    assert listed.count(str(tmp_path)) == 1, listed  # the first save only

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = tmp_path / f".m.onnx.compat-{dead.pid}-1234.tmp"
    leftover.write_bytes(b"partial")
    monkeypatch.setattr(saving, "_STARTED", saving._STARTED + 1e9)  # as if in a later process
    model = Tiny(4).eval()
    compat.export(model, X, target, route="legacy", input_names=["x"])
    check_parity(target, model, X, ["x"])
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]
    assert listed.count(str(tmp_path)) == 2, listed
