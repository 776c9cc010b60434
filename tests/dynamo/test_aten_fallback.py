"""operator_export_type=ONNX_ATEN_FALLBACK / ONNX_FALLTHROUGH / ONNX_ATEN on the torch.export route
(issue 19 item 3): what the TorchScript exporter wrote, on the torch.export route alone.

A model whose operators all have ONNX forms gets no ATen node and runs in onnxruntime like eager;
an operator without one (aten ``cummax``/``median.dim``/``digamma`` on torch 2.13, a
``torch.library`` custom op) becomes the TorchScript exporter's node, compared with that
exporter's own output, and the ledger names it. ATen nodes are run by a reference ATen runtime
(onnx's ReferenceEvaluator with an ``org.pytorch.aten::ATen`` kernel calling the named ATen
overload), so the written model computes eager's result.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import onnx
import pytest
import route_parity as parity
import torch
from onnx import numpy_helper
from torch import nn

import compat
from compat.installed import torch_caps
from dynamo import torch_internals

ATEN = "org.pytorch.aten"
OET = torch.onnx.OperatorExportTypes
needs_torchscript = pytest.mark.skipif(not torch_caps.has_torchscript_exporter(),
                                       reason="compares with the TorchScript exporter's output")


@torch.library.custom_op("compat_aten_test::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor, alpha: float, n: int) -> torch.Tensor:
    return torch.tanh(x) * alpha * n


@scaled_tanh.register_fake
def _(x, alpha, n):
    return torch.empty_like(x)


@torch.library.custom_op("compat_aten_test::split_halves", mutates_args=())
def split_halves(x: torch.Tensor) -> list[torch.Tensor]:
    return [t.clone() for t in x.chunk(2, dim=1)]


@split_halves.register_fake
def _(x):
    return [x.new_empty(x.shape[0], x.shape[1] // 2)] * 2


class Translatable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean((2, 3))
        return torch.softmax(self.fc(y), -1).cumsum(1)


class Untranslated(nn.Module):
    """cummax (default overload) and median.dim have no ONNX translation on torch 2.13."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        y = self.fc(x)
        return torch.cummax(y, 1)[0] + torch.median(y, 1)[0].unsqueeze(1)


class Digamma(nn.Module):
    def forward(self, x):
        return torch.digamma(x.abs() + 1).sum(1)


class Custom(nn.Module):
    def forward(self, x):
        return scaled_tanh(x + 1, 0.5, 3) * 2 + torch.relu(x)


class CustomList(nn.Module):
    def forward(self, x):
        a, b = split_halves(x)
        return a * b


def _export(model: nn.Module, args: tuple, tmp_path, route: str = "dynamo", **options: Any
            ) -> tuple[onnx.ModelProto, dict]:
    """compat.export's model and its ledger record."""
    model = model.eval() if isinstance(model, nn.Module) else model
    return parity.compat_proto(model, args, tmp_path, route, **options)


def _nodes(proto: onnx.ModelProto, domain: str) -> list[onnx.NodeProto]:
    return [n for n in proto.graph.node if n.domain == domain]


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _consts(proto: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Every constant value by name: initializers and Constant node outputs."""
    out = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type == "Constant" and n.attribute[0].name == "value":
            out[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return out


def _input_values(proto: onnx.ModelProto, node: onnx.NodeProto) -> list[Any]:
    """The node's inputs: a constant's value (as a Python scalar/list), 'tensor' for a computed
    value, None for an empty input."""
    consts = _consts(proto)
    out: list[Any] = []
    for name in node.input:
        if not name:
            out.append(None)
        elif name in consts:
            out.append((str(consts[name].dtype), consts[name].tolist()))
        else:
            out.append("tensor")
    return out


def _aten_kernel() -> type:
    from onnx.reference.op_run import OpRun

    class ATen(OpRun):
        """A reference ATen runtime: the named overload of torch's ATen, on numpy inputs."""

        op_domain = ATEN

        def _run(self, *inputs, operator=None, overload_name=None):
            overload = getattr(getattr(torch.ops.aten, operator), overload_name or "default")
            args, kwargs = [], {}
            for arg, value in zip(overload._schema.arguments, inputs):
                if value is not None:
                    kind = str(arg.real_type)
                    value = (torch.from_numpy(np.array(value)) if "Tensor" in kind
                             else np.array(value).tolist())
                (kwargs.__setitem__(arg.name, value) if arg.kwarg_only else args.append(value))
            out = overload(*args, **kwargs)
            return tuple(o.numpy() for o in (out if isinstance(out, tuple) else (out,)))

    return ATen


def _run_with_aten(proto: onnx.ModelProto, x: torch.Tensor) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    session = ReferenceEvaluator(proto, new_ops=[_aten_kernel()])
    (name,) = [i.name for i in proto.graph.input if i.name not in {t.name for t in proto.graph.initializer}]
    return session.run(None, {name: x.numpy()})[0]


# --- every operator has an ONNX form: no ATen node, onnxruntime runs it like eager -----------------

@pytest.mark.parametrize("value", [OET.ONNX_ATEN_FALLBACK, OET.ONNX_FALLTHROUGH])
def test_translatable_model_has_no_fallback_node_and_matches_eager(value, tmp_path):
    model = Translatable().eval()
    x = torch.randn(2, 3, 8, 8)
    proto, record = _export(model, (x,), tmp_path, operator_export_type=value, input_names=["x"],
                            dynamic_axes={"x": {0: "batch"}})
    assert record["route_taken"] == "dynamo"
    assert not [n for n in proto.graph.node if n.domain not in ("", "ai.onnx")]
    assert ATEN not in {o.domain for o in proto.opset_import}
    ours = [t["action"] for t in record["translations"] if t["option"] == "operator_export_type"]
    assert any("every operator has an ONNX translation" in a for a in ours), ours
    for batch in (2, 5):  # the example and another size along the dynamic axis
        xb = torch.randn(batch, 3, 8, 8)
        got = parity.run(proto, {"x": xb})[0]
        np.testing.assert_allclose(got, model(xb).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_auto_route_takes_the_torch_export_route(tmp_path):
    _, record = _export(Translatable(), (torch.randn(2, 3, 8, 8),), tmp_path, route="auto",
                            operator_export_type=OET.ONNX_ATEN_FALLBACK)
    assert record["route_taken"] == "dynamo" and not record["fallback_reason"]


# --- operators without an ONNX form: the TorchScript exporter's node ------------------------------

def test_untranslated_aten_ops_become_aten_nodes_named_in_the_ledger(tmp_path):
    model, x = Untranslated().eval(), torch.randn(3, 6)
    proto, record = _export(model, (x,), tmp_path, operator_export_type=OET.ONNX_ATEN_FALLBACK)
    aten = {_attrs(n)["operator"].decode(): n for n in _nodes(proto, ATEN)}
    assert set(aten) == {"cummax", "median"}
    assert _attrs(aten["cummax"])["overload_name"] == b""
    assert _attrs(aten["median"])["overload_name"] == b"dim"  # the overload the model called
    assert {o.domain: o.version for o in proto.opset_import}[ATEN] == 1
    assert all(n.op_type == "ATen" and len(n.output) == 2 for n in aten.values())
    assert _input_values(proto, aten["cummax"]) == ["tensor", ("int64", 1)]
    assert _input_values(proto, aten["median"]) == ["tensor", ("int64", 1), ("bool", False)]
    assert [n.op_type for n in proto.graph.node if not n.domain].count("Gemm") == 1  # the rest: ONNX
    ours = [t["action"] for t in record["translations"] if t["option"] == "operator_export_type"]
    assert any(a.startswith("ONNX_ATEN_FALLBACK: aten::cummax (no ONNX translation)") for a in ours)
    assert any(a.startswith("ONNX_ATEN_FALLBACK: aten::median.dim (no ONNX translation)") for a in ours)
    # an ATen runtime computes eager's result from it
    np.testing.assert_allclose(_run_with_aten(proto, x), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@needs_torchscript
def test_aten_nodes_are_the_torchscript_exporters(tmp_path):
    """Domain, op type, operator, number of inputs/outputs and the constant inputs are the
    TorchScript exporter's. overload_name differs where the model called a non-default overload:
    torch 2.13's TorchScript exporter writes "" for every fallback node (the traced node has lost
    its schema by then), which an ATen runtime reads as the default overload (median(Tensor))."""
    model, x = Untranslated().eval(), torch.randn(3, 6)
    ours, _ = _export(model, (x,), tmp_path, operator_export_type=OET.ONNX_ATEN_FALLBACK)
    theirs = parity.legacy_proto(model, (x,), operator_export_type=OET.ONNX_ATEN_FALLBACK,
                                 opset_version=18)
    assert {o.domain: o.version for o in theirs.opset_import}[ATEN] == 1
    mine = {_attrs(n)["operator"]: n for n in _nodes(ours, ATEN)}
    legacy = {_attrs(n)["operator"]: n for n in _nodes(theirs, ATEN)}
    assert set(mine) == set(legacy) == {b"cummax", b"median"}
    for op, a in mine.items():
        b = legacy[op]
        assert (a.op_type, len(a.input), len(a.output)) == (b.op_type, len(b.input), len(b.output))
        assert _input_values(ours, a) == _input_values(theirs, b)
        assert set(_attrs(a)) == set(_attrs(b)) == {"operator", "overload_name"}
    assert _attrs(legacy[b"cummax"])["overload_name"] == _attrs(mine[b"cummax"])["overload_name"]
    assert _attrs(legacy[b"median"])["overload_name"] == b""


def test_a_decomposed_op_falls_back_as_the_op_the_model_called(tmp_path):
    """digamma decomposes into prims.digamma, which has no translation: the ATen node is
    aten::digamma, the operator the TorchScript exporter saw."""
    model, x = Digamma().eval(), torch.randn(2, 5)
    proto, record = _export(model, (x,), tmp_path, operator_export_type=OET.ONNX_ATEN_FALLBACK)
    (node,) = _nodes(proto, ATEN)
    assert _attrs(node) == {"operator": b"digamma", "overload_name": b""}
    assert "prims" not in {o.domain for o in proto.opset_import}
    assert any("aten::digamma" in t["action"] for t in record["translations"])
    np.testing.assert_allclose(_run_with_aten(proto, x), model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_fallthrough_writes_the_op_in_its_namespace_domain(tmp_path):
    proto, record = _export(Untranslated(), (torch.randn(3, 6),), tmp_path,
                            operator_export_type=OET.ONNX_FALLTHROUGH)
    nodes = _nodes(proto, ATEN)
    assert sorted(n.op_type for n in nodes) == ["cummax", "median"]
    assert all(not n.attribute for n in nodes)
    assert any("aten::median.dim (no ONNX translation) written as a org.pytorch.aten::median node"
               in t["action"] for t in record["translations"])


@needs_torchscript
@pytest.mark.parametrize("value", [OET.ONNX_ATEN_FALLBACK, OET.ONNX_FALLTHROUGH])
def test_custom_op_without_translation_as_torchscript_wrote_it(value, tmp_path):
    model, x = Custom().eval(), torch.randn(3, 5)
    ours, record = _export(model, (x,), tmp_path, operator_export_type=value)
    theirs = parity.legacy_proto(model, (x,), operator_export_type=value, opset_version=18)
    domain = ATEN if value == OET.ONNX_ATEN_FALLBACK else "compat_aten_test"
    (mine,) = _nodes(ours, domain)
    (legacy,) = _nodes(theirs, domain)
    assert (mine.op_type, _attrs(mine)) == (legacy.op_type, _attrs(legacy))
    assert _input_values(ours, mine) == _input_values(theirs, legacy)
    assert _input_values(ours, mine) == ["tensor", ("float64", 0.5), ("int64", 3)]
    assert ({o.domain: o.version for o in ours.opset_import}[domain]
            == {o.domain: o.version for o in theirs.opset_import}[domain] == 1)
    if value == OET.ONNX_ATEN_FALLBACK:
        assert _attrs(mine) == {"operator": b"scaled_tanh", "overload_name": b""}
    assert any("compat_aten_test::scaled_tanh (no ONNX translation)" in t["action"]
               for t in record["translations"])


def test_custom_opsets_sets_the_fallthrough_domain_version(tmp_path):
    proto, _ = _export(Custom(), (torch.randn(3, 5),), tmp_path,
                       operator_export_type=OET.ONNX_FALLTHROUGH, custom_opsets={"compat_aten_test": 2})
    assert {o.domain: o.version for o in proto.opset_import}["compat_aten_test"] == 2


def test_low_opset_keeps_the_aten_nodes(tmp_path):
    """detectron2's caffe2 export: ONNX_ATEN_FALLBACK at opset 11, through compat's
    down-conversion."""
    model, x = Untranslated().eval(), torch.randn(3, 6)
    proto, record = _export(model, (x,), tmp_path, operator_export_type=OET.ONNX_ATEN_FALLBACK,
                            opset_version=11)
    assert {o.domain: o.version for o in proto.opset_import} == {"": 11, ATEN: 1}
    assert len(_nodes(proto, ATEN)) == 2
    assert any("converted to 11" in t["action"] for t in record["translations"]), record
    np.testing.assert_allclose(_run_with_aten(proto, x), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_exported_program_takes_the_fallback(tmp_path):
    model, x = Untranslated().eval(), torch.randn(3, 6)
    program = torch.export.export(model, (x,))
    proto, record = _export(program, (x,), tmp_path, operator_export_type=OET.ONNX_ATEN_FALLBACK)
    assert len(_nodes(proto, ATEN)) == 2 and record["route_taken"] == "dynamo"
    np.testing.assert_allclose(_run_with_aten(proto, x), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_op_without_an_aten_node_form_fails_by_name_and_auto_falls_back(tmp_path):
    """A custom op returning a tensor list has no fixed-output ATen node: route='dynamo' names
    it; auto takes the TorchScript route, whose result is recorded."""
    with pytest.raises(compat.ExportFailed, match="compat_aten_test::split_halves") as info:
        _export(CustomList(), (torch.randn(2, 4),), tmp_path, operator_export_type=OET.ONNX_ATEN_FALLBACK)
    assert "operator without an ATen fallback form" in str(info.value)
    assert not (tmp_path / "m.onnx").exists()
    if torch_caps.has_torchscript_exporter():
        _, record = _export(CustomList(), (torch.randn(2, 4),), tmp_path / "auto", route="auto",
                            operator_export_type=OET.ONNX_ATEN_FALLBACK)
        assert record["route_taken"] == "legacy"
        assert record["fallback_reason"].startswith("dynamo: operator without an ATen fallback form")


# --- ONNX_ATEN: every aten operator as ATen -------------------------------------------------------

def test_onnx_aten_writes_every_aten_op(tmp_path):
    model, x = Untranslated().eval(), torch.randn(3, 6)
    proto, record = _export(model, (x,), tmp_path, operator_export_type=OET.ONNX_ATEN)
    ops = {_attrs(n)["operator"].decode() for n in _nodes(proto, ATEN)}
    assert {"linear", "cummax", "median", "add", "unsqueeze"} <= ops
    assert all(n.domain == ATEN for n in proto.graph.node if n.op_type not in ("Constant",))
    actions = [t["action"] for t in record["translations"] if t["option"] == "operator_export_type"]
    assert any(a.startswith("ONNX_ATEN: aten::linear (an aten operator) written as") for a in actions)
    np.testing.assert_allclose(_run_with_aten(proto, x), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@needs_torchscript
def test_aten_true_is_onnx_aten_like_torchscript(tmp_path):
    """torch 1.x's aten=True: the same operators the TorchScript exporter wrote for a linear-relu
    model, on the torch.export route."""
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval()
    x = torch.randn(2, 4)
    ours, record = _export(model, (x,), tmp_path, aten=True)
    theirs = parity.legacy_proto(model, (x,), operator_export_type=OET.ONNX_ATEN, opset_version=18)
    assert record["route_taken"] == "dynamo"
    assert ([_attrs(n)["operator"] for n in _nodes(ours, ATEN)]
            == [_attrs(n)["operator"] for n in _nodes(theirs, ATEN)] == [b"linear", b"relu"])
    np.testing.assert_allclose(_run_with_aten(ours, x), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_the_decomposition_hook_is_scoped_to_its_export():
    """Outside a fallback session torch's decomposition step is torch's own: an untranslated op
    still fails plainly (the hook never leaks into other exports)."""
    assert torch_internals.can_hook_decomposition()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception, match="No ONNX function found"):
            torch.onnx.export(Untranslated().eval(), (torch.randn(3, 6),), dynamo=True, verbose=False)
