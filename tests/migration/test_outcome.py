"""``python -m compat.migrate --write`` counts where the export calls stand (issue 30.8)."""

from __future__ import annotations

from migration.cli import main as migrate
from migration.outcome import FINISHED, PINNED, POST_STEP, SHIM, classify

SRC = """\
import torch


def a(m, x):
    torch.onnx.export(m, (x,), "a.onnx")


def b(m, x):
    torch.onnx.export(m, (x,), "b.onnx", opset_version=13)


def c(m, x, path):
    torch.onnx.export(m, (x,), path, opset_version=11)
"""


def test_each_call_site_is_counted_once_by_its_state(tmp_path, capsys) -> None:
    (tmp_path / "m.py").write_text(SRC)
    assert migrate(["--write", "--unsafe-fixes", str(tmp_path)]) in (0, 1)
    out = capsys.readouterr().out
    assert "Export calls: 1 finished, 1 finished with a post-step, 1 pinned, 0 left on the shim." \
        in out, out
    assert "pinned (1): opset_version=11 is below 18" in out


def test_a_compat_export_is_left_on_the_shim() -> None:
    text = ("import torch_onnx_compat as compat\n"
            "def f(m, x):\n    if m:\n        compat.export(m, x, 'a.onnx')\n")
    assert classify(text) == [(SHIM, "")]
    text = ("import torch\n# compat.migrate: dynamo=False because why\n"
            "torch.onnx.export(m, x, f, dynamo=False)\n"
            "torch.onnx.export(m, x, 'a.onnx', dynamo=True)\n"
            "torch.onnx.export(m, x, 'b.onnx', dynamo=True)\ncompat.name_dims('b.onnx', {})\n")
    assert classify(text) == [(PINNED, "why"), (FINISHED, ""), (POST_STEP, "")]
