"""Eight threads exporting at once as a process's first exports (issue 35 item 5): each export
completes and loads, however long the route packages take to initialise.

A fresh interpreter, so the route packages are not loaded yet; an audit hook makes ``legacy``'s
``__init__`` slow (as on a cold, busy disk), which widens the race deterministically: a thread took
another thread's half-run ``legacy`` from ``sys.modules`` ("partially initialized module")."""

from __future__ import annotations

import pytest
from rel_helpers import run_python

_EIGHT_THREADS = """
import os, sys, threading, time
import numpy as np, onnxruntime as ort, torch

SLOW = os.path.join(os.getcwd(), "legacy", "__init__.py")  # the checkout's route package

def slow_route_packages(event, args):
    if event == "exec" and getattr(args[0], "co_filename", "") == SLOW:
        time.sleep(0.3)

sys.addaudithook(slow_route_packages)
import compat

errors, barrier = [], threading.Barrier(8)
x = torch.randn(2, 4)

def work(i):
    torch.manual_seed(i)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()).eval()
    path = os.path.join(sys.argv[1], f"m{i}.onnx")
    try:
        barrier.wait()
        time.sleep(0.02 * i)  # arrive while another thread's import is under way
        compat.export(model, (x,), path, route=ROUTE, input_names=["x"])
        got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
        np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    except BaseException as exc:
        errors.append(f"thread {i}: {type(exc).__name__}: {exc}")

threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("\\n".join(errors) or "ALL EIGHT OK")
"""


@pytest.mark.slow
def test_eight_threads_first_export_all_complete(tmp_path):
    code = "ROUTE = 'auto'\n" + _EIGHT_THREADS  # auto loads both route packages before its lock
    proc = run_python(f"import sys; sys.argv[1:] = [{str(tmp_path)!r}]\n" + code, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ALL EIGHT OK"), proc.stdout[-3000:]


_ONE_THREAD_AFTER_ANOTHER = """
import os, sys, threading
import torch
import compat

x = torch.randn(2, 4)

def work(i):
    model = torch.nn.Linear(4, 3).eval()
    compat.export(model, (x,), os.path.join(sys.argv[1], f"m{i}.onnx"), route="dynamo")

for i in range(3):
    thread = threading.Thread(target=work, args=(i,))
    thread.start()
    thread.join()
    print(f"export {i} ok", flush=True)
"""


def test_exports_in_threads_that_end_one_after_another(tmp_path):
    """Each export in its own thread, started after the previous one ended. Without a CUDA
    device, torch 2.10-2.11 keep the fake CUDA device guard FakeTensorMode installs in the first
    exporting thread's thread_local: the second export segfaulted (2.11.0, CUDA build, no GPU;
    torch_caps.fake_cuda_guard_dies_with_its_thread). The shim installs it from a thread that
    does not end."""
    code = f"import sys; sys.argv[1:] = [{str(tmp_path)!r}]\n" + _ONE_THREAD_AFTER_ANOTHER
    proc = run_python(code, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-1000:], proc.stderr[-3000:])
    assert proc.stdout.splitlines() == [f"export {i} ok" for i in range(3)]
