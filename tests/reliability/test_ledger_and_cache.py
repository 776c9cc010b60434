"""Ledger and route-memory files that are missing, mangled, full or not files at all never hang,
mask or fail an export; concurrent writers never tear a ledger line."""

from __future__ import annotations

import json
import os
import threading
import warnings

import pytest
import torch
from rel_helpers import Tiny, check_parity, run_python

import compat
from compat.records import ledger
from compat.routing import route_memory
from compat.request import normalize
from compat.errors import CompatValueError

X = (torch.randn(2, 4),)


class TorchScriptOnly(torch.nn.Module):
    """Refuses torch.export's capture (a stand-in for what it cannot capture): auto falls back to
    the TorchScript route."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_exporting():
            raise NotImplementedError("captured by the TorchScript tracer only")
        return torch.tanh(self.fc(x))


class Broken(torch.nn.Module):
    """Fails on both routes."""

    def forward(self, x: torch.Tensor) -> float:
        return float(x.sum()) if x.sum() > 0 else x


@pytest.mark.parametrize("where", ["folder", "missing-folder", "fifo"])
def test_bad_ledger_path_fails_before_any_work(counting, tmp_path, monkeypatch, where):
    path = {"folder": tmp_path, "missing-folder": tmp_path / "nope" / "l.jsonl",
            "fifo": tmp_path / "l.fifo"}[where]
    if where == "fifo":
        os.mkfifo(path)
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(path))
    target = tmp_path / "m.onnx"
    target.write_bytes(b"previous model")
    with pytest.raises(CompatValueError, match="TORCH_ONNX_COMPAT_LEDGER"):
        compat.export(counting, X, target)
    assert counting.calls == 0 and target.read_bytes() == b"previous model"


def test_ledger_on_dev_null_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", os.devnull)
    model = Tiny().eval()
    compat.export(model, X, tmp_path / "m.onnx", route="legacy", input_names=["x"])
    check_parity(tmp_path / "m.onnx", model, X, ["x"])


def test_a_torn_line_is_ended_before_the_next_record(tmp_path):
    book = tmp_path / "l.jsonl"
    book.write_bytes(b'{"call_site": "a.py:1"}\n{"call_site": "torn by a cr')
    assert ledger.append(book, {"call_site": "b.py:2"})
    lines = book.read_bytes().split(b"\n")
    last = json.loads(lines[-2])
    last.pop("recorded_at", None)  # the time the record was appended
    assert lines[-1] == b"" and last == {"call_site": "b.py:2"}
    assert [r["call_site"] for r in ledger.read([book])] == ["a.py:1", "b.py:2"]


def test_threads_append_whole_lines(tmp_path):
    book = tmp_path / "l.jsonl"

    def writer(n: int) -> None:
        for i in range(100):
            ledger.append(book, {"call_site": f"t{n}", "i": i, "pad": "x" * 5000})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    recs = [json.loads(line) for line in book.read_text().splitlines()]
    assert len(recs) == 800
    for n in range(8):
        assert [r["i"] for r in recs if r["call_site"] == f"t{n}"] == list(range(100))


_DISK_FULL = """
    import json, os, resource, signal, warnings
    import torch
    import compat
    from compat.records import ledger
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a full disk: writes fail with EFBIG
    book = {book!r}
    good = {{"call_site": "before.py:1", "pad": "x" * 100}}
    for _ in range(20):
        ledger.append(book, good)
    size = os.path.getsize(book)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, resource.RLIM_INFINITY))
    os.environ["TORCH_ONNX_COMPAT_LEDGER"] = book
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2).eval()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        compat.export(net, (torch.randn(2, 4),), {model!r}, route="legacy")   # result not masked
        assert os.path.getsize(book) == size, "a short write was left in the ledger"
        class Broken(torch.nn.Module):
            def forward(self, x):
                return float(x.sum()) if x.sum() > 0 else x
        try:
            compat.export(Broken(), (torch.ones(2),), {model!r} + ".2", route="legacy")
        except compat.ExportFailed:
            pass                                                   # the real error, not OSError
        else:
            raise SystemExit("no error")
    kinds = [type(w.message).__name__ for w in seen]
    assert kinds.count("LedgerWarning") == 2, kinds
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert ledger.append(book, {{"call_site": "after.py:1"}})
    recs = [json.loads(line) for line in open(book)]               # every line whole
    assert [r["call_site"] for r in recs] == ["before.py:1"] * 20 + ["after.py:1"], recs[-3:]
    print("ok")
"""


def test_disk_full_ledger_warns_and_never_masks_the_export(tmp_path):
    proc = run_python(_DISK_FULL.format(book=str(tmp_path / "l.jsonl"), model=str(tmp_path / "m.onnx")))
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
    import onnx

    onnx.checker.check_model(str(tmp_path / "m.onnx"))


# --- route memory -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "folder", "socket-like-garbage"])
def test_non_regular_route_memory_entry_never_hangs(tmp_path, kind):
    model = TorchScriptOnly().eval()
    x = torch.rand(2, 4)
    req = normalize.normalize(model, (x,), tmp_path / "m.onnx", input_names=["x"])
    path = route_memory.entry_path(req)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"\xff\xfe not json")
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(route_memory.lookup(req)), daemon=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t.start()
        t.join(timeout=20)
    assert not t.is_alive(), "route memory lookup hangs on a non-regular cache entry"
    assert result == [None]


def test_auto_export_with_a_fifo_in_the_cache_falls_back_and_remembers(tmp_path):
    model = TorchScriptOnly().eval()
    x = torch.rand(2, 4)
    req = normalize.normalize(model, (x,), tmp_path / "m.onnx", input_names=["x"])
    path = route_memory.entry_path(req)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    done = threading.Event()

    def export() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compat.export(model, (x,), tmp_path / "m.onnx", input_names=["x"])
        done.set()

    t = threading.Thread(target=export, daemon=True)
    t.start()
    t.join(timeout=300)
    assert done.is_set(), "the auto export hangs on a FIFO in the route-memory folder"
    assert compat.last_outcome().route == "legacy"
    check_parity(tmp_path / "m.onnx", model, (x,), ["x"])
    assert path.is_file() and route_memory.lookup(req) is not None  # the FIFO was replaced by an entry
