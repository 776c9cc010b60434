"""kill -9 at fixed points of a save: what is at f afterwards loads in onnxruntime and is the old
model or the new one (with its own data), never a mix; the next export to the folder cleans up.

Each case runs in a subprocess that exports v1, then exports v2 with
``TORCH_ONNX_COMPAT_TEST_KILL_AT=<step>`` (saving SIGKILLs itself at that step). The exporter
itself is real; only the moment of death is chosen."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import torch
from rel_helpers import ROOT, Tiny, run_onnx, run_python

import compat
from compat.records import saving

X = torch.randn(3, 4)

_KILLED_SAVE = """
    import os, torch, compat
    from rel_helpers import Tiny
    x = torch.randn(3, 4)
    target = {target!r}
    compat.export(Tiny(1).eval(), (x,), target, route={route!r}, external_data={external!r},
                  input_names=["x"])
    os.environ["TORCH_ONNX_COMPAT_TEST_KILL_AT"] = {step!r}
    compat.export(Tiny(2).eval(), (x,), target, route={route!r}, external_data={external!r},
                  input_names=["x"])
    print("not killed")
"""

CASES = [
    # (route, external data, step, which model must be at f afterwards)
    ("legacy", True, "staged", 1),
    ("legacy", True, "data-placed", 1),
    ("legacy", True, "model-replaced", 2),
    ("legacy", True, "old-data-removed", 2),
    ("legacy", False, "tmp-written", 1),
    # the torch.export route writes Tiny's small weights inline (no data file, as torch): its
    # kill cases, and every step of both routes, are in test_saving_names.py with a wider model
]


def _expected(seed: int) -> np.ndarray:
    with torch.no_grad():
        return Tiny(seed).eval()(X).numpy()


def _which(target) -> int:
    got = run_onnx(target, {"x": X.numpy()})[0]
    matches = [s for s in (1, 2) if np.allclose(got, _expected(s), atol=1e-5, rtol=1e-4)]
    assert len(matches) == 1, "the model at f is neither the old nor the new one"
    return matches[0]


@pytest.mark.parametrize("route,external,step,survivor", CASES)
def test_kill_during_save_leaves_old_or_new_never_a_mix(tmp_path, monkeypatch, route, external, step, survivor):
    target = tmp_path / "m.onnx"
    code = _KILLED_SAVE.format(target=str(target), route=route, external=external, step=step)
    proc = run_python(code, env={"PYTHONPATH": f"{ROOT}{os.pathsep}{os.path.dirname(__file__)}"})
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    assert _which(target) == survivor

    # the next export to the folder (a later process) leaves exactly one model and its data
    monkeypatch.setattr(saving, "_STARTED", saving._STARTED + 1e9)
    model = Tiny(3).eval()
    compat.export(model, (X,), target, route="legacy", external_data=external, input_names=["x"])
    got = run_onnx(target, {"x": X.numpy()})[0]
    np.testing.assert_allclose(got, model(X).detach().numpy(), atol=1e-5, rtol=1e-4)
    left = sorted(os.listdir(tmp_path))
    if external:
        assert len(left) == 2 and left[0] == "m.onnx" and left[1].endswith(".data"), left
    else:
        assert left == ["m.onnx"], left


def test_repeated_external_data_exports_keep_one_data_file(tmp_path):
    """In one process: every re-export removes the data file the replaced model used."""
    target = tmp_path / "m.onnx"
    names = set()
    for seed in (1, 2, 3, 4):
        model = Tiny(seed).eval()
        compat.export(model, (X,), target, route="legacy", external_data=True, input_names=["x"])
        left = sorted(os.listdir(tmp_path))
        assert len(left) == 2 and left[0] == "m.onnx", left
        names.add(left[1])
        np.testing.assert_allclose(run_onnx(target, {"x": X.numpy()})[0], model(X).detach().numpy(),
                                   atol=1e-5, rtol=1e-4)
    assert "m.onnx.data" in names  # torch's name whenever it is free
    # back to one self-contained file: the last data file goes too
    model = Tiny(5).eval()
    compat.export(model, (X,), target, route="legacy", input_names=["x"])
    assert os.listdir(tmp_path) == ["m.onnx"]
