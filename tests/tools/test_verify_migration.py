"""``compat run --observe`` (plain torch, recorded) and ``compat verify-migration OLD NEW``
(issue 18.8): real exports, real onnxruntime runs."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import textwrap
from pathlib import Path

import onnx
import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm

from compat.tools import verify_migration
from compat.tools.verify_migration import Site, pair_sites

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "helpers" / "run_scripts.py"

MODEL = '''\
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.wide = torch.nn.Linear(4, 1024)  # 16 KB of weights: plain torch moves them out

    def forward(self, a, b):
        return self.fc(a) * 2.0 - self.fc(b) * 0.5 + self.wide(a).mean(-1, keepdim=True)


torch.manual_seed(0)
model = Net().eval()
a, b = torch.randn(2, 4), torch.randn(2, 4)
'''

#: the original: legacy options, run under the shim
OLD = MODEL + '''
torch.onnx.export(model, (a, b), sys.argv[1], input_names=["a", "b"], output_names=["y"],
                  dynamic_axes={"a": {0: "batch"}, "b": {0: "batch"}, "y": {0: "batch"}})
'''
#: a faithful migration (string dims keep the names; one file, as the shim wrote it)
GOOD = MODEL + '''
# compat.migrate: a comment line the rewriter inserted moves the call down
torch.onnx.export(model, (a, b), sys.argv[1], input_names=["a", "b"], output_names=["y"],
                  dynamic_shapes={"a": {0: "batch"}, "b": {0: "batch"}}, dynamo=True,
                  external_data=False)
'''
#: a broken one: names bound to the wrong graph inputs, dims renamed, weights moved out
BAD = MODEL + '''
torch.onnx.export(model, (a, b), sys.argv[1], input_names=["b", "a"], output_names=["y"],
                  dynamic_shapes={"a": {0: torch.export.Dim.AUTO}, "b": {0: torch.export.Dim.AUTO}},
                  dynamo=True)
'''


def _compat(*args, cwd, timeout=600):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return warm_python.run([sys.executable, "-W", "ignore", "-m", "compat", *args], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The original under the shim; the good and the bad migration observed (one interpreter)."""
    base = tmp_path_factory.mktemp("verify")
    trees = {}
    for name, text in (("old", OLD), ("good", GOOD), ("bad", BAD)):
        tree = base / name
        tree.mkdir()
        (tree / "pyproject.toml").write_text(f"[project]\nname = '{name}'\nversion = '0'\n")
        (tree / "export.py").write_text(text)
        trees[name] = tree
    shim = _compat("run", "-q", "--ledger", str(base / "old.jsonl"), "export.py",
                   str(base / "old.onnx"), cwd=trees["old"])
    assert shim.returncode == 0, shim.stderr[-3000:]
    spec = [{"script": str(trees[n] / "export.py"), "argv": [str(base / f"{n}.onnx")],
             "ledger": str(base / f"{n}.jsonl")} for n in ("good", "bad")]
    (base / "spec.json").write_text(json.dumps(spec))
    observed = _compat("run", "-q", "--observe", "--ledger", str(base / "other.jsonl"), str(DRIVER),
                       str(base / "spec.json"), cwd=base)
    assert observed.returncode == 0, observed.stderr[-3000:]
    return base


def test_faithful_migration_verifies(runs, capsys):
    rc = verify_migration.main([str(runs / "old.jsonl"), str(runs / "good.jsonl")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "1 export(s): 1 same" in out and "export.py:20 -> 21" in out  # lines moved, matched


def test_every_difference_is_named(runs, capsys):
    rc = verify_migration.main([str(runs / "old.jsonl"), str(runs / "bad.jsonl")])
    out = capsys.readouterr().out
    assert rc == 1
    assert "DIFFERS" in out
    assert "input names by graph position: ['a', 'b'] -> ['b', 'a']" in out
    assert "input 'a' dims: [batch, 4] -> [s" in out and "[batch, 4] -> [batch" not in out
    assert "layout: single file -> external data (2 tensor(s) in <f>.data)" in out  # weight, bias
    # the same random feeds by name: the swapped binding changes the numbers, at every size
    assert "at the recorded shapes: output 0 max abs difference" in out
    assert "at batch=3: output 0 max abs difference" in out
    rc = verify_migration.main([str(runs / "old.jsonl"), str(runs / "bad.jsonl"), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["ok"] is False and data["summary"] == {"differs": 1}
    (row,) = data["rows"]
    assert row["old"] == "export.py:20" and row["new"] == "export.py:20" and row["model"] == "Net"


def test_the_command_is_listed_and_runs(runs):
    proc = _compat("verify-migration", str(runs / "old.jsonl"), str(runs / "bad.jsonl"), cwd=runs)
    assert proc.returncode == 1 and "DIFFERS" in proc.stdout
    assert "verify-migration OLD_LEDGER NEW_LEDGER" in _compat("--help", cwd=runs).stdout
    assert _compat("verify-migration", "nope.jsonl", str(runs / "bad.jsonl"), cwd=runs).returncode == 2


def test_an_overwritten_output_cannot_be_compared(runs, tmp_path, capsys):
    rec = json.loads((runs / "old.jsonl").read_text())
    copy = tmp_path / "old.onnx"
    copy.write_bytes(Path(rec["output"]).read_bytes() + b"\0")  # changed since the record
    rec["output"] = str(copy)
    rec["output_files"]["model"]["path"] = str(copy)
    # a later export of the same run wrote that file (a script that edits its own file is no
    # overwrite: tests/tools/test_verify_migration_explains.py)
    later = {**rec, "call_site": rec["call_site"].rsplit(":", 1)[0] + ":99"}
    ledger = tmp_path / "old.jsonl"
    ledger.write_text(json.dumps(rec) + "\n" + json.dumps(later) + "\n")
    assert verify_migration.main([str(ledger), str(runs / "good.jsonl")]) == 1
    out = capsys.readouterr().out
    assert "CANNOT COMPARE" in out and "old run's output was overwritten by a later export" in out
    assert str(copy) in out


def test_calls_seen_in_one_run_only_fail(runs, tmp_path, capsys):
    rec = json.loads((runs / "good.jsonl").read_text())
    ledger = tmp_path / "new.jsonl"
    ledger.write_text(json.dumps(rec) + "\n" + json.dumps(rec) + "\n")  # the call made twice
    assert verify_migration.main([str(runs / "old.jsonl"), str(ledger)]) == 1
    out = capsys.readouterr().out
    assert "1 same, 1 only in the new run" in out
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert verify_migration.main([str(empty), str(empty)]) == 1  # nothing compared, nothing proven


def test_observed_records_are_plain_torchs_call(runs):
    rec = json.loads((runs / "bad.jsonl").read_text())
    assert rec["mode"] == "observe" and rec["route_taken"] == "dynamo" and rec["warnings"] == []
    assert rec["options"]["input_names"] == ["b", "a"] and rec["options"]["dynamo"] is True
    assert "Dim" in rec["options"]["dynamic_shapes"]["a"]["0"]
    assert rec["call_site_rel"] == "export.py:20" and rec["example_inputs"] == [
        {"shape": [2, 4], "dtype": "float32"}, {"shape": [2, 4], "dtype": "float32"}]
    files = rec["output_files"]
    model = Path(files["model"]["path"])
    assert files["model"]["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    (data,) = files["data"]  # plain torch's default on the torch.export route: <f>.data
    assert data["path"] == str(model) + ".data"


def test_observe_leaves_torch_as_it_is(tmp_path):
    """The pass-through: torch's signature, torch's own registration function, no warning of
    ours, the TorchScript-route model byte for byte what plain python writes; a call torch
    rejects raises as it does and is recorded as failed; f=None keeps a snapshot."""
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent('''\
        import inspect, sys, warnings
        import torch

        warnings.simplefilter("always")
        print(inspect.signature(torch.onnx.export) == inspect.signature(torch.onnx.utils.__dict__.get("export", torch.onnx.export)) or True,
              torch.onnx.register_custom_op_symbolic.__module__, "dynamo" in inspect.signature(torch.onnx.export).parameters)
        torch.manual_seed(0)
        m = torch.nn.Linear(4, 3).eval()
        x = torch.randn(2, 4)
        torch.onnx.export(m, (x,), sys.argv[1], input_names=["x"], opset_version=13, dynamo=False)
        try:
            torch.onnx.export(m, (x,), sys.argv[1] + ".2", True)
        except TypeError as exc:
            print("TypeError", exc)
        program = torch.onnx.export(m, (x,), dynamo=True)
        print("program", type(program).__name__)
    '''))
    observed = _compat("run", "--observe", "--ledger", str(tmp_path / "L.jsonl"), str(script),
                       str(tmp_path / "o.onnx"), cwd=tmp_path)
    plain = warm_python.run([sys.executable, "-W", "ignore", str(script), str(tmp_path / "p.onnx")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert observed.returncode == plain.returncode == 0, observed.stderr[-3000:]
    assert observed.stdout == plain.stdout
    assert "torch.onnx" in observed.stdout.splitlines()[0]  # not replaced by the shim
    assert "LegacyExportWarning" not in observed.stderr
    legacy, failed, program = [json.loads(x) for x in (tmp_path / "L.jsonl").read_text().splitlines()]
    assert (legacy["route_taken"], legacy["status"]) == ("legacy", "ok")
    assert legacy["options"] == {"input_names": ["x"], "opset_version": 13, "dynamo": False}
    a, b = onnx.load(str(tmp_path / "o.onnx")), onnx.load(str(tmp_path / "p.onnx"))
    assert a.SerializeToString() == b.SerializeToString()
    from compat.tools import report

    (site,) = report.build([legacy])["legacy_call_sites"]
    assert site["reasons"] == ["plain torch, dynamo=False as called (run --observe)"]
    assert failed["status"] == "failed" and failed["error"].startswith("TypeError: export() takes")
    assert program["output"] is None and Path(program["output_snapshot"]).is_file()
    assert program["output_files"]["model"]["path"] == program["output_snapshot"]
    assert "3 torch.onnx.export call(s) observed" in observed.stderr


def test_observe_usage_errors(tmp_path):
    (tmp_path / "s.py").write_text("")
    proc = _compat("run", "--observe", "--route", "legacy", "--ledger", "L", "s.py", cwd=tmp_path)
    assert proc.returncode == 2 and "--observe runs plain torch: --route does not apply" in proc.stderr
    proc = _compat("run", "--observe", "s.py", cwd=tmp_path)
    assert proc.returncode == 2 and "give --ledger PATH" in proc.stderr
    proc = _compat("run", "--observe", "--ledger", str(tmp_path / "no" / "L"), "s.py", cwd=tmp_path)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def _site(tmp_path, name, text, lines):
    path = tmp_path / name
    path.write_text(text)
    return {n: Site("a.py", n, str(path), [{}]) for n in lines}


def test_sites_are_paired_by_the_line_mapping_then_by_order(tmp_path):
    old_text = "x = 1\nexport(a)\ny = 2\nexport(b)\n"
    new_text = "x = 1\n# inserted\nexport(a, dynamo=True)\ny = 2\n# inserted\nexport(b, dynamo=True)\n"
    old = _site(tmp_path, "old.py", old_text, [2, 4])
    new = _site(tmp_path, "new.py", new_text, [3, 6])
    assert [(a.line, b.line) for a, b in pair_sites(old, new)] == [(2, 3), (4, 6)]
    # migrated in place (one path, the old text gone): the order of the calls in the file
    same = {n: Site("a.py", n, str(tmp_path / "new.py"), [{}]) for n in (3, 6)}
    again = {n: Site("a.py", n, str(tmp_path / "new.py"), [{}]) for n in (2, 4)}
    assert [(a.line, b.line) for a, b in pair_sites(again, same)] == [(2, 3), (4, 6)]
    # one call more in the new run: it has no partner
    more = {n: Site("a.py", n, str(tmp_path / "gone.py"), [{}]) for n in (3, 6, 9)}
    pairs = [(a and a.line, b and b.line) for a, b in pair_sites(again, more)]
    assert pairs == [(2, 3), (4, 6), (None, 9)]


class _TextImage:
    """forward(input_ids, pixel_values, attention_mask), called with a dict in the tokenizer's
    order (input_ids, attention_mask, pixel_values), as CLIP's OnnxConfig does."""

    @staticmethod
    def export(path: Path) -> list[dict]:
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(10, 4)
                self.conv = torch.nn.Conv2d(3, 4, 4)

            def forward(self, input_ids, pixel_values, attention_mask):
                text = (self.emb(input_ids) * attention_mask.unsqueeze(-1)).mean(1)
                return text + self.conv(pixel_values).flatten(1)

        inputs = {"input_ids": torch.randint(0, 10, (2, 8)), "attention_mask": torch.ones(2, 8),
                  "pixel_values": torch.randn(2, 3, 4, 4)}
        ordered = {k: inputs[k] for k in ("input_ids", "pixel_values", "attention_mask")}
        torch.onnx.export(Net().eval(), (ordered,), str(path), input_names=list(ordered),
                          dynamic_shapes={"input_ids": {0: "batch", 1: "sequence"},
                                          "pixel_values": {0: "batch"},
                                          "attention_mask": {0: "batch", 1: "sequence"}},
                          dynamo=True, external_data=False)
        return [{"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
                for t in inputs.values()]  # as the ledger records them: the dict's order


def test_recorded_shapes_of_a_dict_out_of_forward_order_feed_the_right_inputs(tmp_path):
    """The ledger records a dict's tensors in the dict's order; the graph takes them in
    forward()'s: each graph input gets the recorded tensor of its rank and dims, so both models
    run at the recorded shapes (CLIP's shim model "did not run" there: attention_mask got 2x2)."""
    path = tmp_path / "m.onnx"
    examples = _TextImage.export(path)
    differences, notes, ran = verify_migration.compare_model_files(str(path), str(path), examples)
    assert ran and not differences, (differences, notes)
    assert not any("does not run" in n or "do not match" in n for n in notes), notes
