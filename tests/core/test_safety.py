"""A failed export leaves nothing broken behind and never changes the user's model."""

from __future__ import annotations

import os
import threading

import pytest
import torch

import compat
from compat.errors import ExportFailed


def test_failed_export_keeps_old_file_and_leaves_no_temp(models, tmp_path):
    target = tmp_path / "model.onnx"
    target.write_bytes(b"previous model")
    with pytest.raises(ExportFailed):
        compat.export(models.Unexportable(), (torch.rand(2, 2),), target)
    assert target.read_bytes() == b"previous model"
    assert os.listdir(tmp_path) == ["model.onnx"]


def test_checker_runs_and_rejects_an_invalid_model(small_net, tmp_path):
    """enable_onnx_checker=True: a valid model passes and is written; one the checker rejects is a
    route failure (so dispatch writes nothing at f)."""
    import io

    import onnx

    from compat.routing import removed_options
    from compat.request import normalize
    from compat.errors import RouteFailed
    from compat.request import Outcome

    target = tmp_path / "m.onnx"
    with pytest.warns(compat.LegacyExportWarning, match="ONX203"):
        compat.export(small_net, (torch.randn(2, 4),), target, route="legacy", enable_onnx_checker=True)
    assert target.exists()
    assert any(t.code == "ONX203" for t in compat.last_outcome().translations)

    buf = io.BytesIO()
    compat.export(small_net, (torch.randn(2, 4),), buf, route="legacy")
    proto = onnx.load_from_string(buf.getvalue())
    proto.graph.node[0].attribute.append(onnx.helper.make_attribute("no_such_attribute", 1))
    req = normalize.normalize(small_net, (torch.randn(2, 4),), None, enable_onnx_checker=True)
    with pytest.raises(RouteFailed, match="onnx checker rejected the model"):
        removed_options.apply(req, Outcome(route="legacy", model_bytes=proto.SerializeToString()))


def test_successful_export_replaces_old_file(small_net, parity, tmp_path):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"old")
    x = torch.randn(2, 4)
    compat.export(small_net, (x,), target, route="legacy", input_names=["x"])
    parity.check(target, small_net, [x], ["x"])
    assert os.listdir(tmp_path) == ["m.onnx"]


@pytest.mark.parametrize("route", ["legacy", "dynamo"])
def test_training_flag_and_buffers_restored(route, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Dropout(0.5))
    net.train()
    net[2].eval()  # a mixed-mode model: each submodule's flag must come back as it was
    before = {k: v.clone() for k, v in net.state_dict().items()}
    compat.export(net, (torch.randn(4, 4),), tmp_path / "m.onnx", route=route)
    assert net.training and net[0].training and net[1].training and not net[2].training
    for k, v in net.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_state_restored_after_failure(models, tmp_path):
    m = models.Unexportable()
    m.train()
    with pytest.raises(ExportFailed):
        compat.export(m, (torch.rand(2, 2),), tmp_path / "m.onnx", training=torch.onnx.TrainingMode.EVAL)
    assert m.training


def test_concurrent_exports_are_serialised(small_net, parity, tmp_path):
    errors: list[BaseException] = []
    x = torch.randn(2, 4)

    def job(i: int) -> None:
        try:
            compat.export(small_net, (x,), tmp_path / f"m{i}.onnx", route="legacy", input_names=["x"])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(4):
        parity.check(tmp_path / f"m{i}.onnx", small_net, [x], ["x"])


def test_large_model_path_stages_beside_target(small_net, parity, models, tmp_path, monkeypatch):
    """A model over the protobuf limit is written by torch into a staging folder beside f (it needs
    a real path for its external data) and moved into place; the threshold is lowered here so a
    small model takes that path."""
    from legacy import route as legacy_route

    monkeypatch.setattr(legacy_route, "LARGE_MODEL_BYTES", 0)
    x = torch.randn(2, 4)
    target = tmp_path / "big.onnx"
    target.write_bytes(b"old")
    with pytest.warns(compat.LegacyExportWarning):
        compat.export(small_net, (x,), target, route="legacy", input_names=["x"], enable_onnx_checker=True)
    assert os.listdir(tmp_path) == ["big.onnx"]
    parity.check(target, small_net, [x], ["x"])
    with pytest.raises(ExportFailed):
        compat.export(models.Unexportable(), (torch.rand(2, 2),), tmp_path / "u.onnx", route="legacy")
    assert os.listdir(tmp_path) == ["big.onnx"]


def test_a_failed_torch_export_attempt_leaves_the_inputs_unmarked(models, tmp_path):
    """torch.export marks example tensors dynamic (``_dynamo_dynamic_indices``); after a failed
    attempt the next export of the same tensor must not inherit that."""
    x = torch.rand(2, 4)
    compat.export(models.TorchScriptOnly().eval(), (x,), tmp_path / "g.onnx", input_names=["x"],
                  dynamic_axes={"x": {0: "b"}})
    assert compat.last_outcome().route == "legacy"
    assert not [k for k in vars(x) if k.startswith("_dynamo_")]
    import onnx

    compat.export(torch.nn.ReLU(), (x,), tmp_path / "p.onnx", route="dynamo", input_names=["x"])
    dims = onnx.load(str(tmp_path / "p.onnx")).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [2, 4]
