"""External data as plain torch names it (issue 20 item 2): always ``<f>.data``, on both routes and
every export; no empty data files; nothing deleted that is not ours or that another model still
uses; a kill at every step of a save leaves the previous complete pair or the new one."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
import warnings

import numpy as np
import onnx
import pytest
import torch
from rel_helpers import ROOT, Tiny, run_onnx, run_python

import compat
from compat.errors import CompatFileExistsError
from compat.records import saving
from compat.request import ExportRequest, Outcome

X = torch.randn(3, 4)
ROUTES = ["legacy", pytest.param("dynamo", marks=pytest.mark.slow)]


class Wide(torch.nn.Module):
    """Weights large enough (4 KiB) for the torch.export route to put them in the data file."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.fc1 = torch.nn.Linear(4, 256)
        self.fc2 = torch.nn.Linear(256, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x)))


def _export(model: torch.nn.Module, f, route: str, **kw) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (X,), f, route=route, input_names=["x"], **kw)


def _locations(path) -> set[str]:
    proto = onnx.load(str(path), load_external_data=False)
    return {e.value for t in saving._tensors(proto) for e in t.external_data if e.key == "location"}


def _assert_loads_as(path, model: torch.nn.Module) -> None:
    with torch.no_grad():
        want = model(X).numpy()
    np.testing.assert_allclose(run_onnx(path, {"x": X.numpy()})[0], want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("route", ROUTES)
def test_every_re_export_writes_f_and_f_data_like_torch(tmp_path, route):
    target = tmp_path / "model.onnx"
    for seed in range(4):
        model = Wide(seed).eval()
        _export(model, target, route, external_data=True)
        assert sorted(os.listdir(tmp_path)) == ["model.onnx", "model.onnx.data"], seed
        assert _locations(target) == {"model.onnx.data"}
        assert os.path.getsize(tmp_path / "model.onnx.data") > 0
        _assert_loads_as(target, model)


@pytest.mark.slow
def test_the_names_are_the_ones_plain_torch_writes(tmp_path):
    """torch 2.13's own ``dynamo=True, external_data=True`` export, side by side."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "compat").mkdir()
    model = Wide(1).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (X,), str(tmp_path / "torch" / "m.onnx"), dynamo=True,
                          external_data=True, input_names=["x"])
    _export(model, tmp_path / "compat" / "m.onnx", "dynamo", external_data=True)
    assert sorted(os.listdir(tmp_path / "compat")) == sorted(os.listdir(tmp_path / "torch"))
    assert _locations(tmp_path / "compat" / "m.onnx") == _locations(tmp_path / "torch" / "m.onnx")


@pytest.mark.slow
def test_small_weights_get_no_data_file_however_often_exported(tmp_path):
    """The torch.export route keeps weights under its size threshold inline: no (empty) data
    file is written, none piles up over re-exports in one process."""
    target = tmp_path / "m.onnx"
    for seed in range(3):
        model = Tiny(seed).eval()
        _export(model, target, "dynamo", external_data=True)
        assert os.listdir(tmp_path) == ["m.onnx"]
        _assert_loads_as(target, model)


@pytest.mark.parametrize("route", ROUTES)
def test_an_unrelated_data_file_beside_a_self_contained_export_stays(tmp_path, route):
    unrelated = tmp_path / "m.onnx.data"
    unrelated.write_bytes(b"someone else's weights")
    hour_ago = time.time() - 3600
    os.utime(unrelated, (hour_ago, hour_ago))
    model = Tiny(1).eval()
    for _ in range(2):
        _export(model, tmp_path / "m.onnx", route)
    assert unrelated.read_bytes() == b"someone else's weights"
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "m.onnx.data"]
    _assert_loads_as(tmp_path / "m.onnx", model)


@pytest.mark.parametrize("route", ROUTES)
def test_the_replaced_models_own_data_goes_with_it(tmp_path, route):
    _export(Wide(1).eval(), tmp_path / "m.onnx", route, external_data=True)
    model = Tiny(2).eval()
    _export(model, tmp_path / "m.onnx", route)
    assert os.listdir(tmp_path) == ["m.onnx"]
    _assert_loads_as(tmp_path / "m.onnx", model)


@pytest.mark.parametrize("route", ROUTES)
def test_a_copy_sharing_the_data_file_keeps_loading(tmp_path, route):
    target, copy = tmp_path / "m.onnx", tmp_path / "copy.onnx"
    first = Wide(1).eval()
    _export(first, target, route, external_data=True)
    shutil.copyfile(target, copy)
    data_before = (tmp_path / "m.onnx.data").read_bytes()

    # the new data would have to replace the data file the copy uses: refused, nothing written
    with pytest.raises(CompatFileExistsError, match="copy.onnx") as info:
        _export(Wide(2).eval(), target, route, external_data=True)
    assert isinstance(info.value, FileExistsError) and "m.onnx.data" in str(info.value)
    assert sorted(os.listdir(tmp_path)) == ["copy.onnx", "m.onnx", "m.onnx.data"]
    assert (tmp_path / "m.onnx.data").read_bytes() == data_before
    _assert_loads_as(target, first)
    _assert_loads_as(copy, first)

    # a self-contained re-export replaces m.onnx and leaves the data the copy uses, with a note
    second = Tiny(2).eval()
    _export(second, target, route)
    assert sorted(os.listdir(tmp_path)) == ["copy.onnx", "m.onnx", "m.onnx.data"]
    assert any("copy.onnx still uses it" in n for n in compat.last_outcome().notes)
    _assert_loads_as(target, second)
    _assert_loads_as(copy, first)


def test_a_hard_link_or_symlink_to_f_is_not_another_model(tmp_path):
    """A second name for the model file itself is not a copy that keeps the old data alive."""
    target = tmp_path / "m.onnx"
    _export(Wide(1).eval(), target, "legacy", external_data=True)
    (tmp_path / "alias.onnx").symlink_to(target)
    model = Wide(2).eval()
    _export(model, target, "legacy", external_data=True)
    assert sorted(os.listdir(tmp_path)) == ["alias.onnx", "m.onnx", "m.onnx.data"]
    _assert_loads_as(tmp_path / "alias.onnx", model)


def test_concurrent_re_exports_to_one_file_leave_one_complete_pair(tmp_path):
    """Threads saving to the same f are serialised: the last pair written is whole."""
    target = tmp_path / "m.onnx"
    models = [Wide(seed).eval() for seed in range(4)]
    errors: list[BaseException] = []

    def work(model: torch.nn.Module) -> None:
        try:
            _export(model, target, "legacy", external_data=True)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(m,)) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "m.onnx.data"]
    got = run_onnx(target, {"x": X.numpy()})[0]
    with torch.no_grad():
        assert any(np.allclose(got, m(X).numpy(), atol=1e-5, rtol=1e-4) for m in models)


def test_several_staged_data_files_become_one_f_data(tmp_path):
    """The TorchScript exporter writes one file per tensor for a model over 2 GB: saving puts
    them into ``<f>.data`` (offsets page aligned), as for every other export."""
    model = Wide(3).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (X,), str(tmp_path / "plain.onnx"), dynamo=False, input_names=["x"])
    staging = saving.staging_dir(str(tmp_path))
    staged = os.path.join(staging, "m.onnx")
    onnx.save_model(onnx.load(str(tmp_path / "plain.onnx")), staged, save_as_external_data=True,
                    all_tensors_to_one_file=False, size_threshold=0)
    assert len(os.listdir(staging)) > 2
    os.unlink(tmp_path / "plain.onnx")
    outcome = Outcome(route="legacy", staged=staged)
    saving.save(outcome, ExportRequest(model=model, args=(X,), f=str(tmp_path / "m.onnx")))
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "m.onnx.data"]
    proto = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    offsets = [int(e.value) for t in saving._tensors(proto) for e in t.external_data if e.key == "offset"]
    assert offsets and all(o % 4096 == 0 for o in offsets)
    _assert_loads_as(tmp_path / "m.onnx", model)


def test_leftovers_of_a_killed_save_go_and_a_live_ones_stay(tmp_path, monkeypatch):
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = os.getppid()
    leftovers = {
        f".m.onnx.data.compat-{dead.pid}-0123456789ab.next": False,
        f".m.onnx.data.compat-{dead.pid}-0123456789ab.link": False,
        "m.onnx.0123456789ab.data": False,  # the versioned name earlier releases wrote
        f".m.onnx.data.compat-{live}-0123456789ab.next": True,  # a live process's
        f".other.onnx.data.compat-{dead.pid}-0123456789ab.next": True,  # another model's
        "m.onnx.backup.data": True,  # not a name of ours
    }
    for name in leftovers:
        (tmp_path / name).write_bytes(b"partial")
    monkeypatch.setattr(saving, "_STARTED", saving._STARTED + 1e9)  # as if in a later process
    model = Wide(1).eval()
    _export(model, tmp_path / "m.onnx", "legacy", external_data=True)
    _assert_loads_as(tmp_path / "m.onnx", model)
    remaining = set(os.listdir(tmp_path))
    for name, kept in leftovers.items():
        assert (name in remaining) == kept, name
    assert {"m.onnx", "m.onnx.data"} <= remaining


# --- kill -9 at every step ----------------------------------------------------------------------

_KILLED_SAVE = """
    import os, sys, warnings, torch, compat
    sys.path.insert(0, {here!r})
    from test_saving_names import Wide
    warnings.simplefilter("ignore")
    x = torch.randn(3, 4)
    compat.export(Wide(1).eval(), (x,), {target!r}, route={route!r}, external_data=True,
                  input_names=["x"])
    os.environ["TORCH_ONNX_COMPAT_TEST_KILL_AT"] = {step!r}
    compat.export(Wide(2).eval(), (x,), {target!r}, route={route!r}, external_data=True,
                  input_names=["x"])
    print("not killed")
"""

STEPS = [("staged", 1), ("data-placed", 1), ("model-replaced", 2), ("data-renamed", 2),
         ("model-final", 2), ("old-data-removed", 2)]
KILL_CASES = [("legacy", step, survivor) for step, survivor in STEPS] + [
    pytest.param("dynamo", step, survivor, marks=pytest.mark.slow)
    for step, survivor in STEPS if step in ("data-placed", "model-replaced", "data-renamed", "model-final")
]


@pytest.mark.parametrize("route,step,survivor", KILL_CASES)
def test_a_kill_at_every_step_leaves_a_complete_pair(tmp_path, monkeypatch, route, step, survivor):
    target = tmp_path / "m.onnx"
    code = _KILLED_SAVE.format(here=os.path.dirname(__file__), target=str(target), route=route, step=step)
    proc = run_python(code, env={"PYTHONPATH": f"{ROOT}{os.pathsep}{os.path.dirname(__file__)}"})
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    got = run_onnx(target, {"x": X.numpy()})[0]
    with torch.no_grad():
        matches = [s for s in (1, 2) if np.allclose(got, Wide(s).eval()(X).numpy(), atol=1e-5, rtol=1e-4)]
    assert matches == [survivor], "the model at f is not the expected complete model"

    # the next export (as from a later process) leaves exactly f and f.data again
    monkeypatch.setattr(saving, "_STARTED", saving._STARTED + 1e9)
    model = Wide(3).eval()
    _export(model, target, "legacy", external_data=True)
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "m.onnx.data"]
    assert _locations(target) == {"m.onnx.data"}
    _assert_loads_as(target, model)
