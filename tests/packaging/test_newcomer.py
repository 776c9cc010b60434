"""A newcomer's first runs (issue 12 items 9, 10, 12): no runtime extra, failures on both
routes, what type checkers and reprs show."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]

# Imports of torch, onnx and onnxscript fail, as in an install without the runtime extra.
BLOCK_RUNTIME = """
import importlib.abc, sys
class _NoRuntime(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "onnx", "onnxscript", "onnxruntime"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoRuntime())
"""


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", BLOCK_RUNTIME + code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_export_without_the_runtime_extra_names_the_extra(tmp_path: Path) -> None:
    code = """
import compat
from compat.errors import CompatError
for get in (lambda: compat.export, lambda: compat.patch,
            lambda: __import__("compat.api").api.export(object(), (), "m.onnx")):
    try:
        get()
    except CompatError as exc:
        assert isinstance(exc, ImportError), type(exc)
        print(exc)
    else:
        raise SystemExit("no error")
"""
    run = run_python(code, tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("compat.export needs torch, onnx, onnxscript, not installed")
    assert lines[1].startswith("compat.patch needs")
    assert all("from your clone of torch-onnx-compat: pip install '.[runtime]'" in line for line in lines)
    assert not any("torch-onnx-compat[runtime]" in line for line in lines)  # not on any index
    assert not (tmp_path / "m.onnx").exists()


def test_compat_run_without_the_runtime_extra(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("print('should not run')\n")
    run = run_python("from compat.__main__ import main; raise SystemExit(main(['run', 's.py']))", tmp_path)
    assert run.returncode == 2
    assert run.stdout == ""
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("python -m compat run: error: python -m compat run needs torch")
    assert "[runtime]" in line


def test_the_rewriter_works_without_the_runtime_extra(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\ntorch.onnx.export(m, x, 'a.onnx', example_outputs=y)\n")
    run = run_python("from migration.cli import main; raise SystemExit(main(['--check', 'a.py']))", tmp_path)
    assert run.returncode == 1, run.stderr
    assert "a.py:2" in run.stdout and "ONX201" in run.stdout


def test_route_causes_are_one_line_without_colours() -> None:
    from compat.errors import ExportFailed, RouteFailed
    from compat.tools.runner import route_cause

    torch_error = RuntimeError(
        "Failed to convert. \x1b[96mThis is step 3/3\x1b[0m of exporting.\n\n## Exception summary\n\n"
        "<class 'torch.onnx._internal.exporter._errors.DispatchError'>: No ONNX function found "
        "for <OpOverload(op='aten.linalg_eig')>.\n⬆️\n<class 'x.ConversionError'>: Error when translating\n")
    failures = {"dynamo": RouteFailed("dynamo", "operator without ONNX translation", torch_error),
                "legacy": RouteFailed("legacy", "TorchScript export failed", ValueError("bad\nsecond line")),
                "other": RouteFailed("other", "no cause")}
    error = ExportFailed(failures)
    assert route_cause(error.failures["dynamo"]) == (
        "operator without ONNX translation: DispatchError: No ONNX function found for "
        "<OpOverload(op='aten.linalg_eig')>.")
    assert route_cause(error.failures["legacy"]) == "TorchScript export failed: ValueError: bad"
    assert route_cause(error.failures["other"]) == "other route failed (no cause)"


@pytest.mark.slow
def test_compat_run_summary_shows_each_routes_cause(tmp_path: Path) -> None:
    """A model neither exporter can translate: the summary (stderr) gives one line per route;
    stdout, where the TorchScript exporter would dump its graph, stays empty."""
    (tmp_path / "s.py").write_text(
        "import torch\n\n\nclass Eig(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.linalg.eigvals(x).real\n\n\n"
        "print('script output')\n"
        "torch.onnx.export(Eig(), (torch.randn(3, 3),), 'm.onnx')\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TORCH_ONNX_COMPAT_CACHE_DIR": "off"}
    run = subprocess.run([sys.executable, "-m", "compat", "run", "s.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 1
    assert run.stdout == "script output\n"
    summary = run.stderr[run.stderr.index("torch-onnx-compat: 1 export call(s), 1 failed"):]
    summary = summary[: summary.index("Traceback")]
    lines = summary.strip().splitlines()
    assert lines[1].endswith("s.py:10  FAILED ExportFailed: every export route failed:")
    assert lines[2].startswith("    dynamo: operator without ONNX translation in aten.linalg_eig.default: "
                               "DispatchError: No ONNX function found for <OpOverload(op='aten.linalg_eig'")
    assert lines[3].startswith("    legacy: ") and "UnsupportedOperatorError" in lines[3]
    assert "aten::linalg_eigvals" in lines[3]
    assert len(lines) == 4 and "\x1b" not in summary
    assert not (tmp_path / "m.onnx").exists()


def test_public_api_is_visible_to_type_checkers() -> None:
    """``compat.export/compare/patch`` are real names for a type checker (TYPE_CHECKING imports)
    and ``export`` declares its own keywords."""
    import ast
    import inspect

    import compat
    from compat import api

    tree = ast.parse((REPO / "compat" / "__init__.py").read_text())
    guarded = [node for node in tree.body if isinstance(node, ast.If)
               and getattr(node.test, "id", "") == "TYPE_CHECKING"]
    names = {a.asname or a.name for node in guarded for imp in node.body
             if isinstance(imp, ast.ImportFrom) for a in imp.names}
    assert set(compat._lazy.PUBLIC) <= names
    params = inspect.signature(compat.export).parameters
    assert params["route"].kind is inspect.Parameter.KEYWORD_ONLY
    hints = typing.get_type_hints(api.export)
    assert hints["route"] == typing.Literal["auto", "dynamo", "legacy"] | None
    assert hints["strict"] == bool | None
    for package in ("compat", "legacy", "dynamo", "migration"):
        assert (REPO / package / "py.typed").is_file()


def test_export_route_keyword_still_routes(tmp_path: Path) -> None:
    import onnxruntime as ort

    import compat

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval()
    f = tmp_path / "m.onnx"
    compat.export(model, (torch.randn(2, 3),), str(f), route="legacy", strict=False,
                  input_names=["x"], dynamic_axes={"x": {0: "b"}})
    assert compat.last_outcome().route == "legacy"
    sess = ort.InferenceSession(str(f), providers=["CPUExecutionProvider"])
    for batch in (2, 6):
        x = torch.randn(batch, 3)
        (got,) = sess.run(None, {"x": x.numpy()})
        torch.testing.assert_close(torch.from_numpy(got), model(x).detach(), rtol=1e-5, atol=1e-6)
    with pytest.raises(compat.CompatError, match="route"):
        compat.export(model, (torch.randn(2, 3),), str(tmp_path / "n.onnx"), route="tflite")


@pytest.mark.slow
def test_short_reprs_and_output_names_flagged(tmp_path: Path) -> None:
    import compat

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval()
    compat.export(model, (torch.randn(2, 3),), str(tmp_path / "m.onnx"), route="legacy",
                  example_outputs=torch.zeros(2, 4))
    outcome = compat.last_outcome()
    text = repr(outcome)
    assert text.startswith("Outcome(route='legacy', output=") and "ONX201" in text
    assert len(text) < 300 and "b'" not in text

    report = compat.compare(model, (torch.randn(2, 3),), input_names=["x"], latency_runs=0,
                            dynamic_axes={"x": {0: "batch"}}, workdir=tmp_path / "cmp")
    assert report.verdict == "equivalent"  # exporters name unnamed outputs freely ...
    names = report.output_names
    assert names["legacy"] != names["dynamo"]  # ... but differently: flagged
    assert report.output_names_differ and report.summary()["output_names_differ"]
    assert "Output names differ between routes" in report.to_markdown()
    text = repr(report)
    assert text.startswith("ParityReport(model='torch.nn.modules.container.Sequential', verdict='equivalent', routes: ")
    assert "dynamo=ok" in text and "legacy=ok" in text and text.endswith(", output names differ)")
    named = compat.compare(model, (torch.randn(2, 3),), input_names=["x"], output_names=["y"],
                           latency_runs=0, dynamic_axes={"x": {0: "batch"}}, workdir=tmp_path / "c2")
    assert named.output_names == {"legacy": ["y"], "dynamo": ["y"]}
    assert not named.output_names_differ and "output names" not in repr(named)
    assert named.verdict == "equivalent"


def test_exports_in_threads_give_stdout_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exporter prints go to stderr during exports; the script's stdout is back afterwards, also
    when exports overlap in several threads."""
    import threading

    import compat

    stdout = sys.stdout
    errors: list[BaseException] = []

    def export(i: int) -> None:
        try:
            model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval()
            compat.export(model, (torch.randn(2, 3),), str(tmp_path / f"m{i}.onnx"), route="legacy")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=export, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sys.stdout is stdout
    print("mine")
    assert capsys.readouterr().out == "mine\n"
    assert all((tmp_path / f"m{i}.onnx").stat().st_size > 0 for i in range(4))
