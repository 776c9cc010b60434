"""A legacy symbolic's source becomes an onnxscript translation (migration/symbolic_translate.py)
that torch's own exporter takes in ``custom_translation_table``: the model has the TorchScript
exporter's custom nodes, attributes and custom opsets, and the same values in onnxruntime."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import symbolics_helpers as H
import torch
import translations as T
import vision_style_ops as V

from compat import torch_apis

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
    mod, text, tr = T.translated_module(source, name, key, str(tmp_path), opset=opset)
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


@pytest.mark.parametrize("target", [(2, 9), (2, 10), (2, 11), torch_apis.newest_supported()])
def test_aten_override_is_applied_on_the_installed_torch_and_by_name_for_the_target(
        tmp_path, target):
    """torch 2.9-2.10 use an aten op's custom translation only when its parameter names are the
    op's argument names (``relu_as_max(x)``, not ``self``) and silently take torchlib's
    otherwise; 2.11 takes it whatever they are (``torch_apis.ATEN_OVERRIDE_ANY_SIGNATURE``).
    A translation written for a target before 2.11 is ``@matches_every_node`` and applied on
    every torch; one written for a later target is applied on the torches that fact holds for
    (checked here on the installed torch, so the table stays true in the matrix)."""
    x = torch.randn(3, 5)
    mod, text, tr = T.translated_module(RELU_AS_MAX, "relu_as_max", "aten::relu",
                                        str(tmp_path), opset=9, target=target)
    assert tr.ok, tr.blockers
    api = torch_apis.ATEN_OVERRIDE_ANY_SIGNATURE
    assert ('@matches_every_node("aten::relu")\ndef relu_as_max(x):' in text) == (not api.available(target))
    ops = [n.op_type for n in T.export_translated(Relu().eval(), (x,), mod.translation_table())
           .graph.node]
    applied = "@matches_every_node" in text or api.available(torch_apis.installed_torch())
    assert ("Max" in ops, "Relu" in ops) == (applied, not applied), (ops, text)


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


# ---------------------------------------------------------------- constructs of real symbolics

WRAPPED = '''
from torch.onnx.symbolic_helper import parse_args


@parse_args("v", "i", "f", "s")
def _scaled_pair(g, x, dim, alpha, mode):
    x.setDebugName("pair_input")
    domain = "mylib"
    name = "Pair"
    return g.op(f"{domain}::{name}", x, alpha_f=alpha, mode_s=mode, outputs=2)


def scaled_pair(*args):
    return _scaled_pair(*args)
'''


@pytest.mark.needs_torchscript
def test_args_wrapper_forwards_to_its_symbolic_with_an_op_name_known_before_export(tmp_path):
    """mmdeploy's ``def f(*args): return sym(*args)``; the op name an f-string of names bound
    once to literals; ``setDebugName`` (a value's name only) dropped."""
    new, _old, text = _check(tmp_path, WRAPPED, "scaled_pair", "h32test::pair", "h32test::pair",
                             Pair().eval(), (torch.randn(2, 3),), 11, values=False,
                             custom_opsets={"mylib": 1})
    assert "def scaled_pair(*args):\n    return _scaled_pair(*args)" in text
    assert "setDebugName" not in text
    assert [n[:2] for n in H.custom_nodes(new)] == [("mylib", "Pair")]


KINDS = '''
import torch
from torch.onnx import symbolic_helper as sym_help
from torch.onnx.symbolic_helper import parse_args


@parse_args("v", "i", "v", "s")
def scaled_pair(g, x, dim, alpha, mode):
    if not sym_help._is_value(alpha):
        alpha = g.op("Constant", value_t=torch.tensor([alpha], dtype=torch.float))
    last = x.type().dim() - 1
    return g.op("mylib::Pair", x, alpha, axis_i=last, sizes_i=x.type().sizes(),
                outputs=2 if mode == "sum" else 1)
'''


@pytest.mark.needs_torchscript
def test_value_kind_test_shape_reads_and_a_python_valued_output_count(tmp_path):
    """``_is_value(a)`` is asked at trace time (a Python number there, a graph constant in
    TorchScript: both end as the same Constant input); ``.type().dim()`` / ``.sizes()`` read
    the traced value's shape; ``outputs=`` an expression of Python values."""
    new, old, text = _check(tmp_path, KINDS, "scaled_pair", "h32test::pair", "h32test::pair",
                            Pair().eval(), (torch.randn(2, 3),), 11, values=False,
                            custom_opsets={"mylib": 1})
    assert "if not isinstance(alpha, ir.Value):" in text
    assert "last = len(x.shape) - 1" in text and "sizes=list(x.shape)" in text
    assert 'mylib_Pair_n = custom_op("mylib", "Pair", outputs=None' in text
    assert H.custom_nodes(new)[0][2]["sizes"] == H.custom_nodes(old)[0][2]["sizes"]


class RoIAlignHead(torch.nn.Module):
    def forward(self, x, rois):
        return V.roi_align(x, rois, 0.5, 3, 3, 2, False)


@pytest.mark.needs_torchscript
def test_torchvision_shaped_roi_align_opset11_keeps_its_coordinates(tmp_path):
    """torchvision's opset-11 RoiAlign: ``TensorProtoDataType.INT64`` becomes ``ir.DataType``,
    ``opset11.squeeze(g, x, 1)`` one Squeeze, and the opset-18 RoiAlign says the
    ``output_half_pixel`` an opset-11 RoiAlign meant; same onnxruntime values."""
    source = Path(V.__file__).read_text(encoding="utf-8")
    x, rois = torch.randn(2, 4, 16, 16), _rois()
    mod, text, tr = T.translated_module(source, "roi_align_opset11", "tvfix::roi_align",
                                        str(tmp_path), opset=11)
    assert tr.ok, tr.blockers
    model = RoIAlignHead().eval()
    torch.onnx.register_custom_op_symbolic("tvfix::roi_align", V.roi_align_opset11, 11)
    try:
        old = H.export_legacy(model, (x, rois), tmp_path, opset_version=11)
    finally:
        torch.onnx.unregister_custom_op_symbolic("tvfix::roi_align", 11)
    new = T.export_translated(model, (x, rois), mod.translation_table())
    assert not T.compare(new, old, (x, rois), True), T.compare(new, old, (x, rois), True)
    assert "to=ir.DataType.INT64" in text
    assert "coordinate_transformation_mode='output_half_pixel'" in text


def test_a_none_output_is_a_blocker_naming_its_line(tmp_path):
    source = Path(V.__file__).read_text(encoding="utf-8")
    _, _, tr = T.translated_module(source, "roi_pool_symbolic", "tvfix::roi_pool", str(tmp_path))
    line = next(i for i, t in enumerate(source.splitlines(), 1) if "return roi_pool, None" in t)
    assert [str(b) for b in tr.blockers] == [
        (f"line {line}: returns None for an output: torch's exporter needs a value for each "
         "output of the op")]


def _rois(n: int = 5, batch: int = 2, size: float = 14.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(n)
    xy = torch.rand(n, 2, generator=g) * size * 0.6
    wh = torch.rand(n, 2, generator=g) * size * 0.4 + 0.3
    idx = torch.randint(0, batch, (n, 1), generator=g).float()
    return torch.cat([idx, xy, xy + wh], dim=1)


AFFINE = '''
import torch
from torch.onnx.symbolic_helper import _get_tensor_rank, _unimplemented, _unsqueeze_helper
from torch.onnx.symbolic_opset9 import softmax


def affine(g, x, weight):
    rank = _get_tensor_rank(x)
    if rank is None:
        return _unimplemented("affine", "unknown rank")
    if weight is None or weight.node().mustBeNone():
        weight = g.op("Constant", value_t=torch.tensor([2.0]).type(
            "torch." + x.type().scalarType() + "Tensor"))
    floor = g.op("Constant", value_t=torch.tensor(torch.finfo(x.type().dtype()).min))
    y = g.op("Max", g.op("Mul", x, _unsqueeze_helper(g, weight, list(range(1, rank)))), floor)
    return softmax(g, y, 1)
'''


@torch.library.custom_op("h32test::affine", mutates_args=())
def _affine(x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    return torch.softmax(x * (2.0 if weight is None else weight), 1)


@_affine.register_fake
def _(x, weight):
    return torch.empty_like(x)


class Affine(torch.nn.Module):
    def forward(self, x):
        return torch.ops.h32test.affine(x, None)


@pytest.mark.needs_torchscript
def test_type_reads_none_input_unsqueeze_helper_and_softmax(tmp_path):
    """mmdeploy's group-norm idioms: ``x.type().scalarType()`` / ``.dtype()`` read the traced
    value's type, ``w.node().mustBeNone()`` an absent optional input, ``_unsqueeze_helper``
    one Unsqueeze, ``return _unimplemented(...)`` a raise; torch's softmax one Softmax."""
    _new, _old, text = _check(tmp_path, AFFINE, "affine", "h32test::affine", "h32test::affine",
                              Affine().eval(), (torch.randn(2, 3),), 11)
    assert "raise NotImplementedError('affine, unknown rank')" in text
    assert "if weight is None:" in text
    assert "scalar_type(x)" in text and "torch.finfo(torch_dtype(x))" in text
    assert "op.Softmax(y, axis=1)" in text


OWN_NAME = '''
SCALE = 2.0


def scaled(g, x):
    return g.op("Mul", x, g.op("Constant", value_t=torch.tensor(SCALE)))
'''


def test_names_of_the_own_module_are_imported_in_a_package_and_block_in_a_script():
    from migration import symbolic_translate

    tree = ast.parse(OWN_NAME)
    func = T.find_def(OWN_NAME, "scaled")
    script = symbolic_translate.translate(func, "scaled")
    assert [str(b) for b in script.blockers] == ["line 6: reads SCALE, a name of its module"]
    own = symbolic_translate.OwnModule.of(tree, "model", level=1)
    tr = symbolic_translate.translate(func, "scaled", module=own)
    assert tr.ok and tr.code.startswith("def scaled(x):\n    from .model import SCALE\n")


def test_own_module_only_inside_a_package(tmp_path):
    from migration import symbolic_plan

    tree = ast.parse(OWN_NAME)
    (tmp_path / "model.py").write_text(OWN_NAME)
    assert symbolic_plan._own_module(tree, str(tmp_path / "model.py")) is None
    (tmp_path / "__init__.py").write_text("")
    own = symbolic_plan._own_module(tree, str(tmp_path / "model.py"))
    assert (own.name, own.level, "SCALE" in own.names) == ("model", 1, True)
