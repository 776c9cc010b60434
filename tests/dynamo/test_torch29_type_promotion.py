"""torch 2.9's type-promotion fault on the torch.export route (issue 34): a parameter times a
Python scalar (``self.w * 2``, the parameter requiring grad, autograd on) fails in torch's ONNX
decomposition step ("Expected same OpOverload packet, got prim.device != aten.mul"). The shim
matches the overload by schema, as later torches do, only on a torch the probe finds the fault in,
and records that in the ledger; before, the route's retry under ``torch.no_grad()`` exported it
after a failed first export, with a reason naming another torch fault."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch

import compat
from compat.installed import torch_caps
from dynamo.options import OVERLOAD_ACTION
from dynamo.route import NO_GRAD_ACTION
from migration.ledger import shim_only


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 3))

    def forward(self, x):
        return x + self.w * 2


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    path = tmp_path_factory.mktemp("scaled") / "m.onnx"
    model = Scaled().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, (torch.randn(2, 3),), str(path), route="dynamo", input_names=["x"],
                      dynamic_axes={"x": {0: "n"}})
    return model, path, compat.last_outcome()


def test_parameter_times_scalar_exports_on_the_torch_export_route(exported):
    model, path, outcome = exported
    assert outcome.route == "dynamo"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for n in (2, 5):
        x = torch.randn(n, 3)
        got = session.run(None, {"x": x.numpy()})[0]
        np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_the_workaround_is_recorded_exactly_where_torch_has_the_fault(exported):
    _, _, outcome = exported
    actions = [t.action for t in outcome.translations]
    assert (OVERLOAD_ACTION in actions) == torch_caps.type_promotion_misfinds_overloads()
    assert NO_GRAD_ACTION not in actions  # one export, no failed first attempt
    # a ledger record of it keeps a migrated call site on the shim (plain torch fails there)
    found = shim_only({"translations": [t.to_dict() for t in outcome.translations]})
    assert bool(found) == torch_caps.type_promotion_misfinds_overloads(), found


def test_plain_torch_export_is_left_as_torch_has_it(tmp_path):
    """The shim's matching is scoped to its own exports: plain torch keeps its own pass."""
    compat.export(Scaled().eval(), (torch.randn(2, 3),), str(tmp_path / "a.onnx"), route="dynamo")
    if not torch_caps.type_promotion_misfinds_overloads():
        pytest.skip(f"torch {torch.__version__} has no type-promotion fault to scope")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception, match="OpOverload packet"):
            torch.onnx.export(Scaled().eval(), (torch.randn(2, 3),), dynamo=True, verbose=False)
