"""LegacyExportWarning: at the user's line, once per call site by default, errors in strict mode."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm
import torch

import compat
from compat import catalog
from compat.errors import StrictModeError


def test_warning_points_at_user_line_and_carries_code(small_net, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy", do_constant_folding=True)  # noqa: E501
        line = sys._getframe().f_lineno - 1
    ours = [w for w in caught if issubclass(w.category, compat.LegacyExportWarning)]
    assert [w.message.code for w in ours] == ["ONX104"]
    assert ours[0].filename == __file__ and ours[0].lineno == line
    # by default one line: the code, the option, the short fix from the catalog
    text = str(ours[0].message)
    assert text == "ONX104 do_constant_folding=: " + catalog.SHORT_FIXES["ONX104"]
    assert "\n" not in text and "optimize=" in text
    assert issubclass(compat.LegacyExportWarning, DeprecationWarning)


def test_explain_gives_the_long_text(small_net, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_ONNX_COMPAT_EXPLAIN", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy", do_constant_folding=True)  # noqa: E501
    (ours,) = [w for w in caught if issubclass(w.category, compat.LegacyExportWarning)]
    text = str(ours.message)
    # a compat.export call: the rewriter leaves it alone, so no migrate command is printed
    assert text.startswith(catalog.get("ONX104").message(__file__, applicability="none"))
    assert "--fix" not in text and catalog.NO_FIX in text
    assert text.endswith("[do_constant_folding=]")


def test_explained_hint_selects_what_the_call_needs(small_net, tmp_path, monkeypatch):
    """Under the patch, the long text's command selects ONX001 (no dynamo=) and ONX206 only
    for a call that passes options positionally."""
    monkeypatch.setenv("TORCH_ONNX_COMPAT_EXPLAIN", "1")
    x = torch.randn(2, 4)
    with warnings.catch_warnings(record=True) as caught, compat.patch():
        warnings.simplefilter("always")
        torch.onnx.export(small_net, (x,), str(tmp_path / "a.onnx"), do_constant_folding=False)
        torch.onnx.export(small_net, (x,), str(tmp_path / "b.onnx"), True, False)
    texts = [str(w.message) for w in caught if issubclass(w.category, compat.LegacyExportWarning)]
    keyword = next(t for t in texts if t.startswith("ONX104"))
    assert f"python -m compat.migrate --fix --select ONX001,ONX104 {__file__}" in keyword
    positional = next(t for t in texts if t.startswith("ONX206"))
    assert f"--fix --select ONX001,ONX206 {__file__}" in positional


def test_default_filter_shows_each_site_once(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import torch, compat
        m = torch.nn.Linear(2, 2).eval()
        for i in range(3):
            compat.export(m, (torch.randn(1, 2),), f"a{i}.onnx", route="legacy", example_outputs=None, do_constant_folding=True)
        compat.export(m, (torch.randn(1, 2),), "b.onnx", route="legacy", do_constant_folding=True)
    """))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    out = warm_python.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if "LegacyExportWarning" in ln]
    assert sum("ONX104" in ln and "job.py:5" in ln for ln in lines) == 1  # 3 calls, one site
    assert sum("ONX104" in ln and "job.py:6" in ln for ln in lines) == 1
    # example_outputs=None is the old default: not a usage worth a warning
    assert not any("ONX201" in ln for ln in lines)


def test_strict_argument_raises_before_export(small_net, tmp_path):
    target = tmp_path / "m.onnx"
    with pytest.raises(StrictModeError, match="ONX104") as err:
        compat.export(small_net, (torch.randn(2, 4),), target, strict=True, do_constant_folding=False)
    assert err.value.code == "ONX104" and isinstance(err.value, TypeError)
    assert not target.exists()


def test_strict_env(small_net, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_ONNX_COMPAT_STRICT", "1")
    with pytest.raises(StrictModeError, match="ONX201"):
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "m.onnx", example_outputs=torch.zeros(1))
    # a modern call passes strict mode
    compat.export(small_net, (torch.randn(2, 4),), tmp_path / "m.onnx", route="legacy")
    assert (tmp_path / "m.onnx").exists()


def test_once_per_site_survives_filter_changes_during_export(tmp_path):
    """Exports on the torch.export route change the warning filters inside torch; compat's
    warnings must still show once per call site."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import warnings, torch, compat
        m = torch.nn.Linear(2, 2).eval()
        for i in range(3):
            compat.export(m, (torch.randn(2, 2),), f"a{i}.onnx", route="dynamo", do_constant_folding=True)
            with warnings.catch_warnings():  # what torch's exporter does internally
                warnings.simplefilter("ignore", UserWarning)
    """))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    out = warm_python.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert sum("ONX104" in ln and "job.py:5" in ln for ln in out.stderr.splitlines()) == 1


def test_patched_legacy_apis_obey_strict_mode_and_reach_the_ledger(small_net, tmp_path, monkeypatch):
    import json

    book = tmp_path / "l.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    with compat.patch():
        with pytest.warns(compat.LegacyExportWarning, match="ONX404"):
            with torch.onnx.select_model_mode_for_export(small_net, torch.onnx.TrainingMode.EVAL):
                pass
        with pytest.warns(compat.LegacyExportWarning):
            torch.onnx.utils.export(small_net, (torch.randn(2, 4),), str(tmp_path / "u.onnx"), dynamo=False)
        rec = json.loads(book.read_text().splitlines()[-1])
        assert {"ONX403", "ONX404"} <= set(rec["warnings"])
        monkeypatch.setenv("TORCH_ONNX_COMPAT_STRICT", "1")
        with pytest.raises(StrictModeError, match="ONX404"):
            with torch.onnx.select_model_mode_for_export(small_net, torch.onnx.TrainingMode.EVAL):
                pass
        with pytest.raises(StrictModeError, match="ONX403"):
            torch.onnx.utils.export(small_net, (torch.randn(2, 4),), str(tmp_path / "v.onnx"), dynamo=False)
        with pytest.raises(StrictModeError, match="ONX401"):
            torch.onnx.dynamo_export(small_net, torch.randn(2, 4))
    assert not (tmp_path / "v.onnx").exists()


def test_standard_filters_decide_at_each_site(small_net, tmp_path):
    """The warning filters decide, as for any warning: "error" raises before any work, "always"
    shows every call of one site, "ignore" shows nothing."""
    x = torch.randn(2, 4)
    target = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=compat.LegacyExportWarning)
        with pytest.raises(compat.LegacyExportWarning, match="ONX104"):
            compat.export(small_net, (x,), target, route="legacy", do_constant_folding=True)
    assert not target.exists()
    for action, shown in (("always", 2), ("ignore", 0)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter(action)
            for _ in range(2):
                compat.export(small_net, (x,), target, route="legacy", do_constant_folding=True)
        codes = [w.message.code for w in caught if issubclass(w.category, compat.LegacyExportWarning)]
        assert codes == ["ONX104"] * shown, action
