"""A legacy symbolic's source becomes an onnxscript translation (migration/symbolic_translate.py)
that torch's own exporter takes in ``custom_translation_table``: the model has the TorchScript
exporter's custom nodes, attributes and custom opsets, and the same values in onnxruntime."""

from __future__ import annotations

import pytest
import symbolics_helpers as H
import torch
import translations as T

RELU_AS_MAX = '''
import torch

def relu_as_max(g, x):
    return g.op("Max", x, g.op("Constant", value_t=torch.tensor(0.0)))
'''

GELU_FAST = '''
import torch

def gelu_fast(g, x, approximate="none"):
    scale = g.op("Constant", value_t=torch.tensor(1.702))
    return g.op("Mul", x, g.op("Sigmoid", g.op("Mul", x, scale)))
'''

CONTRIB_GELU = '''
def gelu(g, self, approximate="none"):
    return g.op("com.microsoft::Gelu", self).setType(self.type())
'''

MS_GELU = '''
def gelu(g, self, approximate="none"):
    return g.op("com.microsoft::Gelu", self)
'''

PARSE_ARGS = '''
from torch.onnx import symbolic_helper
from torch.onnx.symbolic_helper import parse_args

@parse_args("v", "i", "f", "s")
def scaled_pair(g, x, dim, alpha, mode):
    y = g.op("Unsqueeze", x, axes_i=[dim])
    beta = symbolic_helper._maybe_get_scalar(alpha)
    a, b = g.op("mylib::Pair", y, alpha_f=beta, mode_s=mode, size_i=2, outputs=2)
    return a, g.op("Squeeze", b, axes_i=[dim])
'''

BRANCH = '''
def branchy(g, x):
    if x:
        return g.op("Relu", x)
    return g.at("relu", x)
'''


class Relu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 3


class Gelu(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x) + 1


def _check(tmp_path, source, name, reg, key, model, args, opset, values=True, **options):
    mod, text, tr = T.translated_module(source, name, key, str(tmp_path))
    assert tr.ok, tr.blockers
    ns = T.load_source(source, name)
    torch.onnx.register_custom_op_symbolic(reg, ns[name], opset)
    try:
        old = H.export_legacy(model, args, tmp_path, opset_version=opset, **options)
    finally:
        torch.onnx.unregister_custom_op_symbolic(reg, opset)
    new = T.export_translated(model, args, mod.translation_table())
    assert not T.compare(new, old, args, values), (T.compare(new, old, args, values), text)
    return new, old, text


@pytest.mark.needs_torchscript
def test_relu_override_is_translated_and_matches_torchscript(tmp_path):
    x = torch.randn(3, 5)
    new, _, text = _check(tmp_path, RELU_AS_MAX, "relu_as_max", "::relu",
                          "aten::relu", Relu().eval(), (x,), 9)
    assert "op.Max(x, op.Constant(value=ir.tensor(torch.tensor(0.0))))" in text
    assert "Max" in [n.op_type for n in new.graph.node]


@pytest.mark.needs_torchscript
def test_aten_override_keeps_its_python_default(tmp_path):
    _check(tmp_path, GELU_FAST, "gelu_fast", "aten::gelu", "aten::gelu",
           Gelu().eval(), (torch.randn(2, 4),), 11)


@pytest.mark.needs_torchscript
def test_custom_domain_op_keeps_domain_and_runs_in_onnxruntime(tmp_path):
    new, _old, text = _check(tmp_path, MS_GELU, "gelu", "::gelu", "aten::gelu",
                            Gelu().eval(), (torch.randn(2, 4),), 14)
    assert 'com_microsoft_Gelu = custom_op("com.microsoft", "Gelu")' in text
    assert H.opset_imports(new)["com.microsoft"] == 1


@pytest.mark.needs_torchscript
def test_settype_on_the_node_is_dropped(tmp_path):
    """onnxruntime's contrib symbolics end in ``.setType(self.type())``: the new exporter types
    outputs from the captured graph, so the translation keeps the node alone."""
    _, _, text = _check(tmp_path, CONTRIB_GELU, "gelu", "::gelu", "aten::gelu", Gelu().eval(),
                        (torch.randn(2, 4),), 14)
    assert "return com_microsoft_Gelu(self)" in text and "setType" not in text


@torch.library.custom_op("h32test::pair", mutates_args=())
def _pair(x: torch.Tensor, dim: int, alpha: float, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    return x * alpha, x + alpha


@_pair.register_fake
def _(x, dim, alpha, mode):
    return torch.empty_like(x), torch.empty_like(x)


class Pair(torch.nn.Module):
    def forward(self, x):
        a, b = torch.ops.h32test.pair(x, 1, 0.5, "sum")
        return a, b


@pytest.mark.needs_torchscript
def test_parse_args_attributes_custom_domain_outputs_and_axes_inputs(tmp_path):
    x = torch.randn(2, 3)
    new, _old, text = _check(tmp_path, PARSE_ARGS, "scaled_pair", "h32test::pair",
                            "h32test::pair", Pair().eval(), (x,), 11,
                            values=False, custom_opsets={"mylib": 1})
    assert "def scaled_pair(x, dim, alpha, mode):" in text
    assert "op.Unsqueeze(x, op.Constant(value_ints=[dim]))" in text
    assert 'mylib_Pair_2 = custom_op("mylib", "Pair", outputs=2, attributes=' in text
    assert [n[1] for n in H.custom_nodes(new)] == ["Pair"]


def test_branch_on_a_graph_value_and_g_at_are_blockers_naming_their_lines(tmp_path):
    _, _, tr = T.translated_module(BRANCH, "branchy", "aten::relu",
                                   str(tmp_path))
    reasons = [str(b) for b in tr.blockers]
    assert any(r.startswith("line 3: Python branching on a graph value (x)") for r in reasons)
    assert any(r.startswith("line 5: g.at(...)") for r in reasons)
