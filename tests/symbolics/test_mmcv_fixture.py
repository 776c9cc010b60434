"""mmcv-style ops export on the torch.export route exactly as the TorchScript route exports them."""

from __future__ import annotations

import mmcv_style_ops as F
import pytest
import symbolics_helpers as H

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def both_routes(tmp_path_factory):
    model, args = F.Detector().eval(), F.example_inputs()
    with H.registrations(*F.SYMBOLIC_REGISTRATIONS):
        legacy = H.export_legacy(model, args, tmp_path_factory.mktemp("legacy"),
                                 opset_version=18, custom_opsets={"mmcv": 2})
        new = H.export_new(model, args, custom_opsets={"mmcv": 2}).program.model_proto
    return legacy, new


def test_same_custom_nodes_attributes_and_domains(both_routes):
    legacy, new = both_routes
    nodes = H.custom_nodes(new)
    assert [n[1] for n in nodes] == ["MMCVCornerPool", "MMCVRoiAlign", "SoftNonMaxSuppression"]
    assert nodes == H.custom_nodes(legacy)
    custom = lambda p: {d: v for d, v in H.opset_imports(p).items() if d not in ("", "ai.onnx")}
    assert custom(new) == custom(legacy) == {"mmcv": 2}


def test_outputs_come_from_the_custom_nodes(both_routes):
    _, new = both_routes
    produced = {o for n in new.graph.node if n.domain == "mmcv" for o in n.output}
    assert {o.name for o in new.graph.output} <= produced
