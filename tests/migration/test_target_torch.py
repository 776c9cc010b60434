"""``--target-torch`` (issue 34 item 4): the advice depends on the torch the code will run."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap

import pytest

from compat import torch_apis
from migration.cli import main
from migration.core import Options, check_text, fix_text

H = "import torch\n"
FALLBACK_SRC = """
def go(m, x):
    torch.onnx.export(m, (x,), "m.onnx", dynamo=True, fallback=True)

def off(m, x):
    torch.onnx.export(m, (x,), "o.onnx", dynamo=True, fallback=False)
"""


def fix(src: str, target: tuple[int, int] | None, unsafe: bool = True) -> str:
    src = H + textwrap.dedent(src)
    opts = Options(fix=True, unsafe_fixes=unsafe, target_torch=target)
    out, _, _, _ = fix_text(src, "t.py", opts)
    again, fixed, _, _ = fix_text(out, "t.py", opts)
    assert again == out and not fixed, "second run changed something"
    return out.removeprefix(H)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_fallback_is_kept_for_torch_2_9_and_dropped_for_2_13() -> None:
    """torch 2.9-2.10 take fallback=True (try torch.export, then TorchScript): dropping it there
    would lose the retry. torch 2.11 removed it, so for 2.13 it goes (unsafe fix)."""
    old = fix(FALLBACK_SRC, (2, 9))
    new = fix(FALLBACK_SRC, (2, 13))
    assert 'dynamo=True, fallback=True)' in old
    assert 'torch.onnx.export(m, (x,), "m.onnx", dynamo=True)' in new
    # fallback=False means nothing on any torch: dropped for both
    assert 'torch.onnx.export(m, (x,), "o.onnx", dynamo=True)' in old
    assert 'torch.onnx.export(m, (x,), "o.onnx", dynamo=True)' in new
    assert fix(FALLBACK_SRC, (2, 10)) == old and fix(FALLBACK_SRC, (2, 11)) == new
    # still reported for 2.9, without a fix, saying why by name
    found = [f for f in check_text(H + textwrap.dedent(FALLBACK_SRC), "t.py",
                                   Options(target_torch=(2, 9))) if f.code == "ONX207"]
    assert [f.applicability for f in found] == ["none", "unsafe"]
    assert "kept: torch 2.9 (--target-torch) still takes fallback=" in found[0].message
    assert "removed in torch 2.11" in found[0].message


def test_fix_writing_an_api_the_target_lacks_is_held_back() -> None:
    """dynamic_shapes= and external_data= are in the table from torch 2.9: for an older target
    (the library's Options; the CLI refuses it) the fixes writing them are not applied, and
    each finding says which API and which torch."""
    src = 'torch.onnx.export(m, (x,), "m.onnx", input_names=["x"], dynamic_axes={"x": {0: "n"}})\n'
    assert 'dynamic_shapes=({0: "n"},), dynamo=True, external_data=False' in fix(src, (2, 9),
                                                                               unsafe=False)
    assert fix(src, (2, 8), unsafe=False) == src
    found = {f.code: f for f in check_text(H + src, "t.py", Options(target_torch=(2, 8)))}
    assert all(not f.edits and f.applicability == "none" for f in found.values())
    assert ("fix unavailable for target torch 2.8: torch.onnx.export(dynamic_shapes=) is not "
            "known in torch 2.8 (checked from torch 2.9)") in found["ONX101"].message
    assert "torch.onnx.export(external_data=) is not known in torch 2.8" in found["ONX001"].message


def test_what_the_table_holds_back_within_the_targets() -> None:
    """Within the targets the CLI takes, four facts change advice: fallback= (removed in 2.11),
    a dynamic axis kept dynamic where its example has size 1 (2.10), an aten op's translation
    used whatever its parameter names (2.11) and torch.compiler.is_exporting() being False under
    torch.compile (2.12); every other API a fix writes is in torch 2.9."""
    newest = torch_apis.newest_supported()
    for api in torch_apis.API_TABLE:
        if api.keyword == "fallback":
            assert api.available((2, 10)) and not api.available((2, 11))
        elif api is torch_apis.EXPORTING_ONLY_UNDER_EXPORT:
            assert not api.available((2, 11)) and api.available((2, 12))
        elif api is torch_apis.ATEN_OVERRIDE_ANY_SIGNATURE:
            assert not api.available((2, 10)) and api.available((2, 11))
        elif api is torch_apis.SIZE_ONE_AXIS_DYNAMIC:
            assert not api.available((2, 9)) and api.available((2, 10))
        else:
            assert api.available(torch_apis.MIN_TARGET) and api.available(newest), api.name


ATEN_SYMBOLIC = """import torch


def relu6(g, x):
    return g.op("Clip", x, g.op("Constant", value_t=torch.tensor(0.0)),
                g.op("Constant", value_t=torch.tensor(6.0)))


def main(model, x):
    torch.onnx.register_custom_op_symbolic("::relu", relu6, 11)
    torch.onnx.export(model, (x,), "m.onnx")
"""


@pytest.mark.parametrize("target,decorated", [("2.9", True), ("2.10", True), ("2.11", False),
                                              ("2.13", False)])
def test_aten_translation_matches_every_node_for_targets_before_2_11(
        capsys, tmp_path, monkeypatch, target, decorated) -> None:
    """torch 2.9-2.10 silently use their own translation of an aten op when the custom one's
    parameter names are not the op's argument names (``x`` for aten::relu's ``self``): for
    those targets the generated translation declares none (tests/symbolics exports it)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(ATEN_SYMBOLIC)
    assert cli(capsys, "--write", "--unsafe-fixes", "-q", "--target-torch", target, "a.py")[0] in (0, 1)
    text = (tmp_path / "a_onnx.py").read_text()
    assert "custom_translation_table=a_onnx.translation_table()" in (tmp_path / "a.py").read_text()
    assert ('@matches_every_node("aten::relu")\ndef relu6(x):' in text) is decorated
    assert ("def matches_every_node(" in text) is decorated
    if decorated:  # the helper is defined before the decorator runs: the module imports
        assert text.index("def matches_every_node(") < text.index("@matches_every_node")
        ns: dict = {}
        exec(compile(text, "a_onnx.py", "exec"), ns)  # noqa: S102 - the rewriter's own output
        import inspect

        assert inspect.signature(ns["relu6"]).parameters == {}
        assert ns["relu6"].__name__ == "relu6"


def test_cli_and_config(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(H + FALLBACK_SRC)
    (tmp_path / "pyproject.toml").write_text('[tool.torch-onnx-compat.migrate]\n'
                                             'target-torch = "2.9"\n')
    rc, out, _ = cli(capsys, "--diff", "--unsafe-fixes", "a.py")
    assert rc == 1 and "-    torch.onnx.export(m, (x,), \"m.onnx\"" not in out
    assert '-    torch.onnx.export(m, (x,), "o.onnx", dynamo=True, fallback=False)' in out
    # the command line wins over the config
    rc, out, _ = cli(capsys, "--diff", "--unsafe-fixes", "--target-torch", "2.13", "a.py")
    assert '+    torch.onnx.export(m, (x,), "m.onnx", dynamo=True)' in out
    # json keeps ruff's fields: the kept fallback= is a finding without a fix
    rc, out, _ = cli(capsys, "--output-format", "json", "--target-torch", "2.9.1", "a.py")
    rows = [r for r in json.loads(out) if r["code"] == "ONX207"]
    assert rc == 1 and [r["fix"] is None for r in rows] == [True, False]


@pytest.mark.parametrize("value,why", [
    ("banana", "not 'banana'"),
    ("2.8", "became the default in torch 2.9"),
    ("3.0", "is the newest supported"),
])
def test_invalid_target_is_a_usage_error(capsys, tmp_path, monkeypatch, value, why) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(H + FALLBACK_SRC)
    rc, out, err = cli(capsys, "--target-torch", value, "a.py")
    assert rc == 2 and not out and "--target-torch" in err and why in err
    newest = torch_apis.newest_supported()
    above = f"{newest[0]}.{newest[1] + 1}"
    rc, _, err = cli(capsys, "--target-torch", above, "a.py")
    assert rc == 2 and f"not '{above}'" in err


def test_config_number_is_refused(capsys, tmp_path, monkeypatch) -> None:
    """TOML reads ``2.10`` as the number 2.1: a string is asked for."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(H + FALLBACK_SRC)
    (tmp_path / "pyproject.toml").write_text('[tool.torch-onnx-compat.migrate]\n'
                                             'target-torch = 2.10\n')
    rc, _, err = cli(capsys, "a.py")
    assert rc == 2 and "target-torch must be a string" in err


def test_default_is_the_installed_torch_read_without_importing_it() -> None:
    """The real installed torch's metadata, and torch stays unimported (the rewriter is fast
    and torch-free)."""
    probe = ("import sys; from compat import torch_apis; "
             "print(torch_apis.installed_torch(), torch_apis.default_target(), "
             "'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split(")", 2)
    version = importlib.metadata.version("torch")  # e.g. 2.13.0+cpu
    major, minor = (int(p) for p in version.split(".")[:2])
    assert out[0].strip() == f"({major}, {minor}"
    expected = max(torch_apis.MIN_TARGET, min((major, minor), torch_apis.newest_supported()))
    assert out[1].strip() == f"({expected[0]}, {expected[1]}"
    assert out[2].strip() == "False"


def test_default_without_torch_is_the_newest_supported(monkeypatch) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert torch_apis.installed_torch() is None
    assert torch_apis.default_target() == torch_apis.newest_supported()


def test_cli_default_follows_the_installed_torch(capsys, tmp_path, monkeypatch) -> None:
    """Without --target-torch the installed torch decides: on 2.11+ fallback= is dropped."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(H + FALLBACK_SRC)
    _, out, _ = cli(capsys, "--diff", "--unsafe-fixes", "a.py")
    dropped = '+    torch.onnx.export(m, (x,), "m.onnx", dynamo=True)' in out
    assert dropped == (not torch_apis.BY_KEYWORD["fallback"].available(
        torch_apis.default_target()))


FUNCTION_SRC = """\
import torch


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y * 2.0

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * 2.0 * (1 - y * y)

    @staticmethod
    def symbolic(g, x):
        return g.op("Mul", g.op("Tanh", x), g.op("Constant", value_t=torch.tensor(2.0)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return ScaledTanh.apply(self.fc(x))


def main(path):
    model = Net().eval()
    torch.onnx.export(model, (torch.randn(2, 4),), path, input_names=["x"], output_names=["y"])
"""


def test_function_op_call_sites_need_torch_2_12(capsys, tmp_path, monkeypatch) -> None:
    """An autograd.Function with a symbolic becomes an op chosen by
    torch.compiler.is_exporting(), which torch before 2.12 also makes True under torch.compile
    (the op has no backward): for 2.9-2.11 the Function stays and the export call keeps
    compat.export, saying why; for 2.12+ the op is written, once."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scaled.py").write_text(FUNCTION_SRC)
    for target in ("2.9", "2.11"):
        rc, out, _ = cli(capsys, "--diff", "--target-torch", target, "scaled.py")
        assert "is_exporting() else" not in out and "+    compat.export(model" in out
        assert f"not migrated for target torch {target}" in out and "#176347" in out
    rc, out, _ = cli(capsys, "--diff", "--target-torch", "2.12", "scaled.py")
    assert "torch.compiler.is_exporting() else ScaledTanh.apply" in out
    assert "compat.export" not in out
    rc, out, _ = cli(capsys, "--fix", "--target-torch", "2.13", "scaled.py")
    assert rc == 1 and "Fixed 1 finding(s)" in out  # ONX302 stays: informational, no fix
    assert cli(capsys, "--diff", "--target-torch", "2.13", "scaled.py")[1] == ""


@pytest.mark.slow
def test_function_op_migrated_for_2_12_trains_under_torch_compile(capsys, tmp_path,
                                                                  monkeypatch) -> None:
    """What the 2.12+ advice relies on, on the installed torch (2.13): a torch.compile'd model
    with the migrated call site takes Function.apply, so its backward runs (on torch 2.9.1 and
    2.11.0 the same code fails: "no autograd formula was registered" for the op)."""
    if torch_apis.installed_torch() < (2, 12):
        pytest.skip("the installed torch predates torch.compiler.is_exporting's fix")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scaled.py").write_text(FUNCTION_SRC)
    cli(capsys, "--fix", "--target-torch", "2.13", "scaled.py")
    assert "is_exporting() else" in (tmp_path / "scaled.py").read_text()
    probe = ("import torch, scaled as m\n"
             "torch.manual_seed(0); net = m.Net(); x = torch.randn(2, 4)\n"
             "y = torch.compile(net, backend='eager')(x); y.sum().backward()\n"
             "g = net.fc.weight.grad.clone(); net.zero_grad(); net(x).sum().backward()\n"
             "print(torch.allclose(y, torch.tanh(net.fc(x)) * 2), "
             "torch.allclose(g, net.fc.weight.grad))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.stdout.split() == ["True", "True"], done.stderr[-2000:]


SIZE_ONE_SRC = """
torch.onnx.export(m, (x,), "m.onnx", input_names=["image"], output_names=["logits"],
                  dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
"""


def _tiled_ledger(tiled: bool) -> dict:
    """Ledger evidence for SIZE_ONE_SRC's call as the shim records it (dynamo/options.py)."""
    from compat.catalog import SIZE_ONE_TILED
    from migration.ledger import LedgerIndex

    action = ("translated to dynamic_shapes (Dim.AUTO per axis; an axis the model fixes is "
              "exported static and noted); dim_params named ['batch']")
    if tiled:
        action += f"; {SIZE_ONE_TILED} 2 for capture on ['image[0] (batch)']"
    index = LedgerIndex()
    index.add({"call_site": "/ci/repo/t.py:3", "status": "ok", "route_taken": "dynamo",
               "route_requested": "auto", "model": "Net",
               "translations": [{"option": "dynamic_axes", "code": "ONX101", "action": action}]},
              "/")
    return index.evidence("/x/repo/t.py")


@pytest.mark.parametrize("target", [(2, 9), (2, 10), (2, 13)])
def test_size_one_example_keeps_the_shim_where_the_target_exports_the_axis_static(target) -> None:
    """torch 2.9's exporter specializes a dynamic axis whose example has size 1 (the shim tiles
    the example first): where the ledger shows the shim tiled one, a call migrated for 2.9 stays
    on compat.export naming why; for 2.10 and later it moves to plain torch."""
    src = H + textwrap.dedent(SIZE_ONE_SRC)
    opts = Options(fix=True, unsafe_fixes=True, target_torch=target)
    out, _, _, _ = fix_text(src, "t.py", opts, _tiled_ledger(tiled=True))
    if target == (2, 9):
        assert "compat.export(m, (x,)" in out and "dynamic_axes=" in out
        assert ("the shim tiled the size-1 example of image[0] (batch) to keep the axis "
                "dynamic; torch.onnx.export(dynamo=True) keeping a dynamic axis whose example "
                "has size 1 needs torch >= 2.10, not 2.9") in " ".join(
                    line.removeprefix("#").strip(" :") for line in out.splitlines())
    else:
        assert "dynamic_shapes=" in out and "dynamo=True" in out and "compat.export" not in out
    # a ledger showing no size-1 example: plain torch for every target, with no caveat
    untiled, _, _, _ = fix_text(src, "t.py", opts, _tiled_ledger(tiled=False))
    assert "dynamic_shapes=" in untiled and "compat.export" not in untiled
    found = check_text(src, "t.py", Options(target_torch=target), _tiled_ledger(tiled=False))
    assert not any("size 1" in f.message for f in found)


def test_size_one_caveat_without_a_ledger() -> None:
    """Without a ledger the example sizes are unknown: for torch 2.9 the dynamic_axes fix says
    what that torch asks of the examples; for 2.10 it says nothing more."""
    src = H + textwrap.dedent(SIZE_ONE_SRC)
    old, new = (next(f for f in check_text(src, "t.py", Options(target_torch=t))
                     if f.code == "ONX101") for t in ((2, 9), (2, 10)))
    assert old.applicability == new.applicability == "safe"
    assert ("torch 2.9 (--target-torch) exports a dynamic axis static where its example has "
            "size 1: give examples of size >= 2 there") in old.message
    assert "size 1" not in new.message
