"""transformers 4.27's ``export_pytorch``, unchanged, on transformers-5 models under the shim.

Each model is random-init from a tiny config (no downloads). The written model runs in
onnxruntime and matches eager torch at the example shape and at another size along the dynamic
axes; the shim's result is never worse than plain ``torch.onnx.export`` on the same call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import hf_zoo
import onnx
import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm

import compat

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


def _opset(path: Path) -> int:
    return {i.domain: i.version for i in onnx.load(str(path), load_external_data=False).opset_import}[""]


def _plain(name: str, path: Path) -> tuple[bool, str]:
    """Plain torch 2.13 on the same call (no patch): what a user gets without the shim."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hf_zoo.export(name, str(path))
    except Exception as exc:  # noqa: BLE001 - plain torch failing is a result, not an error
        return False, f"{type(exc).__name__}: {exc}"
    return hf_zoo.parity(name, str(path))


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("name", ["bert", "gpt2", "t5-encoder", "wav2vec2"])
def test_export_pytorch_427_never_worse_than_plain_torch(name, tmp_path, monkeypatch):
    book = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    shim_path = tmp_path / "shim.onnx"
    with warnings.catch_warnings(record=True) as caught, compat.patch():
        warnings.simplefilter("always")
        hf_zoo.export(name, str(shim_path))
    ok, detail = hf_zoo.parity(name, str(shim_path))
    assert ok, detail
    (record,) = _records(book)
    assert record["status"] == "ok" and record["output"] == str(shim_path)
    wanted = hf_zoo.SPECS[name].config().default_onnx_opset
    written = _opset(shim_path)
    codes = [getattr(w.message, "code", "") for w in caught]
    if written != wanted:
        # delivered under the opset policy: said so, in the warning and in the ledger
        assert "ONX002" in codes and "ONX002" in record["warnings"]
        assert record["route_taken"] == "dynamo" and record["opset_written"] == written
    else:
        assert "ONX002" not in codes and record["opset_written"] is None
    assert not any("builds it directly" in str(w.message) for w in caught)

    plain_ok, plain_detail = _plain(name, tmp_path / "plain.onnx")
    if plain_ok:  # never worse: also at least as close to the requested opset
        assert abs(written - wanted) <= abs(_opset(tmp_path / "plain.onnx") - wanted), plain_detail


def test_python_m_compat_run_on_the_unchanged_427_script(tmp_path):
    """The legacy script, run as a user would: ``python -m compat run script.py ...``."""
    book, out = tmp_path / "ledger.jsonl", tmp_path / "gpt2.onnx"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TORCH_ONNX_COMPAT_ROUTE", None)
    proc = warm_python.run(
        [sys.executable, "-m", "compat", "run", "--ledger", str(book),
         str(FIXTURES / "hf_export_script.py"), "gpt2", str(out)],
        check=False, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok, detail = hf_zoo.parity("gpt2", str(out))
    assert ok, detail
    (record,) = _records(book)
    assert record["status"] == "ok" and record["call_site"].endswith("hf_convert_427.py:131")
    assert "FAILED" not in proc.stderr
