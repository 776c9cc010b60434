"""``fallback=`` (ONX207) means the same on every torch (issue 34): torch 2.9 and 2.10 still take it
in ``torch.onnx.export``, 2.11 removed it; the shim never passes it on, and gives it torch 2.5-2.10's
meaning: ``True`` lets a torch.export export fall back to TorchScript, ``False`` does not, and
beside ``dynamo=False`` (TorchScript only) it changes nothing. The matrix runs this on each torch."""

from __future__ import annotations

import warnings

import pytest
import torch

import compat
from compat.installed import torch_api

X = torch.rand(2, 4)


def _export(model, tmp_path, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (X,), tmp_path / "m.onnx", **options)
    return compat.last_outcome()


@pytest.mark.needs_torchscript
@pytest.mark.parametrize("dynamo", [None, True])
def test_fallback_true_falls_back_to_torchscript(models, parity, tmp_path, dynamo):
    model = models.TorchScriptOnly().eval()
    options = {} if dynamo is None else {"dynamo": dynamo}
    assert _export(model, tmp_path, fallback=True, **options).route == "legacy"
    parity.check(tmp_path / "m.onnx", model, (X,))


def test_fallback_false_beside_dynamo_true_does_not_fall_back(models, tmp_path):
    with pytest.raises(compat.ExportFailed) as err:
        _export(models.TorchScriptOnly().eval(), tmp_path, dynamo=True, fallback=False)
    assert set(err.value.failures) == {"dynamo"}
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.needs_torchscript
def test_fallback_true_beside_dynamo_false_stays_on_torchscript(small_net, parity, tmp_path):
    # small_net exports on both routes: dynamo=False alone decides, as in torch 2.5-2.10
    assert _export(small_net, tmp_path, dynamo=False, fallback=True).route == "legacy"
    parity.check(tmp_path / "m.onnx", small_net, (X,))


def test_fallback_never_reaches_torch(small_net, tmp_path, monkeypatch):
    """Under the patch, ``torch.onnx.export(..., fallback=True)`` is the shim's on every torch,
    whether or not the installed torch's own export still takes ``fallback``."""
    seen = []
    real = torch_api.torch_export()

    def spy(*args, **kwargs):
        seen.append(set(kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch_api, "torch_export", lambda: spy)
    with compat.patch(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(small_net, (X,), str(tmp_path / "m.onnx"), dynamo=True, fallback=True)
    assert compat.last_outcome().route == "dynamo"
    assert seen and all("fallback" not in kwargs for kwargs in seen)
