"""Real export helpers finish on torch's new exporter after a ledger migration (issue 30).

The forms of transformers 4.27's ``export_pytorch`` and yolov5's ``export_onnx`` that kept their
call on ``compat.export`` (measured by benchmarks/migration_ends_real.py), each on a tiny
real model: the script runs under the shim with a ledger, is migrated with ``--write
--unsafe-fixes --ledger``, the copy runs on plain torch (``compat run --observe``), and
``verify-migration`` must call every model the shim's:

* a trailing dict of keyword inputs out of forward()'s order with ``input_names``;
* ``dynamic_axes`` computed from an OnnxConfig-like mapping where the model fixes an axis;
* ``dynamic_axes`` held in a variable built at run time (``dynamic or None``), an output axis
  named on its own, opset 12, the helper called with and without it.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
import size_one  # tests/helpers
import warm_python  # tests/helpers: commands that import torch, forked warm

from compat.tools.verify_migration import PASSING, to_text, verify
from migration.cli import main as migrate
from migration.core import Options, fix_text
from migration.outcome import classify

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = '''\
import sys
from itertools import chain
from pathlib import Path

import torch
from torch.onnx import export as onnx_export


class Text(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 4)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        return h + 2 * token_type_ids.unsqueeze(-1)


class Image(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, pixel_values):
        return self.conv(pixel_values).flatten(2).transpose(1, 2)


class Mixed(torch.nn.Module):
    """Text and a fixed-size image; three outputs, of which the configs name the first."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 4)
        self.conv = torch.nn.Conv2d(3, 4, 4, stride=4)
        self.pos = torch.nn.Embedding(5, 4)
        self.register_buffer("positions", torch.arange(5)[None], persistent=False)

    def forward(self, input_ids, image):
        t = self.emb(input_ids)
        _, _, height, width = image.shape
        if height != 8 or width != 8:  # CLIP's check of the image size
            raise ValueError("image size")
        p = self.conv(image).flatten(2).transpose(1, 2)
        p = torch.cat([p.new_zeros(p.shape[0], 1, 4), p], 1) + self.pos(self.positions)
        return t.mean(1) + p.mean(1), t + 1, p * 2


def export_pytorch(model, inputs, axes, outputs, output: Path):
    """transformers 4.27's call: the tokenizer's dict, axes from the OnnxConfig."""
    onnx_outputs = list(outputs.keys())
    with torch.no_grad():
        onnx_export(
            model,
            (inputs,),
            f=output.as_posix(),
            input_names=list(axes.keys()),
            output_names=onnx_outputs,
            dynamic_axes=dict(chain(axes.items(), outputs.items())),
            do_constant_folding=True,
            opset_version=14,
        )


def export_onnx(model, im, file, opset, dynamic):
    """yolov5's call: the axes built at run time, output axes named on their own."""
    f = file.with_suffix(".onnx")
    output_names = ["output0"]
    if dynamic:
        dynamic = {"images": {0: "batch", 2: "height", 3: "width"}}
        dynamic["output0"] = {0: "batch", 1: "anchors"}
    torch.onnx.export(
        model,
        im,
        f,
        verbose=False,
        opset_version=opset,
        input_names=["images"],
        output_names=output_names,
        dynamic_axes=dynamic or None)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    torch.manual_seed(0)
    text = {0: "batch", 1: "sequence"}
    ids = torch.randint(0, 20, (2, 5))
    # the tokenizer's order (input_ids, token_type_ids, attention_mask), not forward()'s
    inputs = {"input_ids": ids, "token_type_ids": torch.ones(2, 5, dtype=torch.long),
              "attention_mask": torch.ones(2, 5)}
    axes = {"input_ids": text, "attention_mask": text, "token_type_ids": text}
    export_pytorch(Text().eval(), inputs, axes, {"last_hidden_state": text}, out / "text.onnx")
    export_pytorch(Text().eval(), dict(inputs), axes, {"last_hidden_state": text}, out / "text2.onnx")
    image_axes = {"pixel_values": {0: "batch", 1: "num_channels", 2: "height", 3: "width"}}
    export_pytorch(Image().eval(), {"pixel_values": torch.randn(2, 3, 6, 6)}, image_axes,
                   {"last_hidden_state": {0: "batch", 1: "sequence"}}, out / "image.onnx")
    # its image input has its own name: the fixed axes the ledger shows are keyed by input name
    mixed_axes = {"input_ids": text, "image": {0: "batch", 1: "num_channels", 2: "height", 3: "width"}}
    export_pytorch(Mixed().eval(), {"input_ids": ids, "image": torch.randn(2, 3, 8, 8)},
                   mixed_axes, {"pooled": {0: "batch"}}, out / "mixed.onnx")
    for dynamic in (True, False):
        export_onnx(Image().eval(), torch.randn(1, 3, 8, 8), out / f"yolo-{dynamic}", 12, dynamic)
'''


#: the line of export_pytorch's call (verify-migration labels rows by the original's lines)
HF_LINE = next(i for i, line in enumerate(SCRIPT.splitlines(), 1) if "onnx_export(" in line)


def _run(tree: Path, ledger: Path, out: Path, observe: bool) -> None:
    out.mkdir(parents=True)
    done = warm_python.run(
        [sys.executable, "-W", "ignore", "-m", "compat", "run", "-q",
         *(["--observe"] if observe else []), "--ledger", str(ledger), "export.py", str(out)],
        cwd=tree, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=600,
        check=False)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> tuple[Path, Path, str]:
    """(the shim's ledger, the observed ledger of the migrated copy, the migrated text)."""
    base = tmp_path_factory.mktemp("helpers")
    old = base / "old"
    old.mkdir()
    (old / "export.py").write_text(SCRIPT, encoding="utf-8")
    (old / "pyproject.toml").write_text("[project]\nname = 'helpers'\nversion = '0'\n")
    _run(old, base / "old.jsonl", base / "out-old", observe=False)
    mig = base / "mig"
    shutil.copytree(old, mig)
    assert migrate(["--write", "--unsafe-fixes", "-q", "--ledger", str(base / "old.jsonl"),
                    str(mig / "export.py")]) in (0, 1)
    text = (mig / "export.py").read_text(encoding="utf-8")
    _run(mig, base / "new.jsonl", base / "out-new", observe=True)
    return base / "old.jsonl", base / "new.jsonl", text


def _rows(migrated, model: str) -> list:
    old, new, _ = migrated
    return [r for r in verify(str(old), str(new)) if r.model == model]


@pytest.mark.slow
def test_both_helpers_leave_the_shim(migrated):
    """Both leave the shim; for torch 2.9 yolov5's (its example has batch 1) stays, saying why."""
    old, _, text = migrated
    if size_one.kept_on_the_shim(old):
        assert text.count("compat.export(") == 1 and size_one.says_why(text), text
        states = sorted(state for state, _ in classify(text))
        assert states == ["finished with a post-step", "left on the shim"], text
        return
    assert not re.search(r"\bcompat\.export\b", text), text
    assert text.count("dynamo=True") == 2, text
    assert [state for state, _ in classify(text)] == ["finished with a post-step"] * 2, text


@pytest.mark.slow
def test_keyword_dict_out_of_forward_order_names_the_shims_inputs(migrated):
    """input_names follow forward()'s order on the shim; the migrated call orders the dict so."""
    _, _, text = migrated
    assert "inspect.signature(model.forward)" in text, text
    rows = _rows(migrated, "Text")
    assert len(rows) == 2 and all(r.verdict in PASSING for r in rows), to_text(rows, "old", "new")


@pytest.mark.slow
def test_computed_axes_the_model_fixes_export_static(migrated):
    """Image fixes num_channels: left out of dynamic_shapes (static, as the shim exported it;
    Dim.AUTO kept it dynamic). Its output axis 1 (height * width) is named "sequence" by the
    OnnxConfig's outputs: a compat.name_dims step names it so, as the shim did."""
    _, _, text = migrated
    assert '("pixel_values", 1)' in text, text
    assert "compat.name_dims(output.as_posix(), {name: axes for name, axes in outputs.items() " \
           "if name in onnx_outputs})" in text, text
    rows = [r for r in _rows(migrated, "Image") if r.old and r.old.endswith(f":{HF_LINE}")]
    assert rows and all(r.verdict in PASSING for r in rows), to_text(rows, "old", "new")


@pytest.mark.slow
def test_axes_built_at_run_time_become_dynamic_shapes_and_named_dims(migrated):
    """yolov5's form: dynamic_shapes and compat.name_dims read the variable at run time, and
    compat.convert_opset brings the file to 12; with and without dynamic axes (for torch 2.9 its
    batch-1 example keeps it on compat.export, and the models are the shim's)."""
    old, _, text = migrated
    rows = [r for r in _rows(migrated, "Image") if r.old and not r.old.endswith(f":{HF_LINE}")]
    if size_one.kept_on_the_shim(old):
        assert len(rows) == 2 and all(r.verdict in PASSING for r in rows), to_text(rows, "old", "new")
        return
    assert "dynamic_axes=" not in text.split("def export_onnx", 1)[1].split("if __name__")[0], text
    assert "compat.name_dims(f, {name: axes for name, axes in (dynamic or None or {}).items() " \
           "if name in output_names})" in text, text
    assert len(rows) == 2 and all(r.verdict in PASSING for r in rows), to_text(rows, "old", "new")


@pytest.mark.slow
def test_outputs_output_names_leaves_unnamed_keep_the_shims_names(migrated):
    """Mixed returns three outputs and output_names names one: torch names the others after
    graph nodes, and the shim's capture (Dim.AUTO on the image axes the model fixes, which
    leaves shape nodes) numbers them otherwise than the migrated call's. The migrated call
    names them as the shim's exports did, looked up by the model's class."""
    _, _, text = migrated
    rows = _rows(migrated, "Mixed")
    assert len(rows) == 1 and all(r.verdict in PASSING for r in rows), to_text(rows, "old", "new")
    assert "output_names=[*onnx_outputs, *unnamed_output_names.get(type(model).__name__, [])]" \
        in text, text


CACHE_CALL = '''\
import torch


def export(model, inputs, path):
    torch.onnx.export(model, (inputs,), path, input_names=["input_ids"], opset_version=18)
'''


def test_the_shims_cache_registration_becomes_transformers_own_call():
    """A record showing the shim registered transformers' cache classes: the migrated call
    registers them itself (transformers' public function) instead of staying on the shim."""
    action = ("transformers DynamicCache flattened into graph outputs (registered as pytree nodes "
              "for this export by transformers.exporters.exporter_dynamo."
              "register_cache_pytrees_for_model, as transformers' own exporter does)")
    records = [{"route_taken": "dynamo", "status": "ok", "model": m, "output": f"/o/{m}.onnx",
                "translations": [{"code": "ONX001", "option": "outputs", "action": action}]}
               for m in ("GPT2Model", "LlamaModel")]
    out, _, _, _ = fix_text(CACHE_CALL, "t.py", Options(fix=True),
                            {5: {**records[0], "records": records}})
    assert "compat.export" not in out, out
    assert "from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model" \
        in out, out
    assert re.search(r"\n    register_cache_pytrees_for_model\(model\)\n    torch\.onnx\.export\(",
                     out), out
    assert "dynamo=True" in out


def test_an_export_imported_under_another_name_is_counted():
    """``from torch.onnx import export as onnx_export`` (transformers' export_pytorch): the
    migrate summary counts its calls."""
    text = ("from torch.onnx import export as onnx_export\n"
            "onnx_export(m, (x,), 'a.onnx', dynamo=True)\n"
            "onnx_export(m, (x,), 'b.onnx', dynamo=False)\n")
    assert [s for s, _ in classify(text)] == ["finished", "pinned"]


BINDING_CALL = '''\
import torch


def export(model, inputs, path):
    torch.onnx.export(model, (inputs,), path, input_names=["input_ids", "mask"], opset_version=18)
'''


@pytest.mark.parametrize("records, on_the_shim", [(1, True), (2, False)])
def test_a_helper_reorders_its_keyword_dict_only_with_enough_records(records, on_the_shim):
    """One record of a helper's call is too few to write the step for every caller: the call
    stays on compat.export (as before the step existed), not on plain torch unchanged."""
    rec = {"route_taken": "dynamo", "status": "ok", "model": "BertModel", "output": "/o/a.onnx",
           "translations": [{"code": "ONX001", "option": "input_names",
                             "action": "input_names bound in forward() parameter order (...)"}]}
    out, _, _, _ = fix_text(BINDING_CALL, "t.py", Options(fix=True),
                            {5: {**rec, "records": [rec] * records}})
    assert ("compat.export(" in out) is on_the_shim, out
    assert ("inspect.signature(model.forward)" in out) is not on_the_shim, out


NAMED_CALL = '''\
import torch

model = torch.nn.Linear(2, 2)
torch.onnx.export(model, (torch.ones(1, 2),), "m.onnx", output_names=["y"], opset_version=18)
'''


def _named_records(*unnamed: list[str]) -> dict:
    records = [{"route_taken": "dynamo", "status": "ok", "model": "Net", "output": "/o/m.onnx",
                "unnamed_outputs": names} for names in unnamed]
    return {4: {**records[0], "records": records}}


def test_a_literal_output_names_gets_the_shims_names_for_the_rest():
    out, _, _, _ = fix_text(NAMED_CALL, "t.py", Options(fix=True), _named_records(["add_3", "mul_7"]))
    assert 'output_names=["y", "add_3", "mul_7"]' in out, out
    assert "dynamo=True" in out and "compat.export" not in out, out


def test_records_of_one_class_naming_outputs_otherwise_keep_the_shim():
    out, _, _, _ = fix_text(NAMED_CALL, "t.py", Options(fix=True),
                            _named_records(["add_3", "mul_1"], ["add_4"]))
    assert "compat.export(" in out and "of one model class named the outputs" in out, out


def test_records_of_one_class_with_fewer_outputs_take_the_longer_names():
    """GPT-2 with its cache returns more outputs than without: the longer list serves both
    (torch leaves the names past a model's outputs unused)."""
    out, _, _, _ = fix_text(NAMED_CALL, "t.py", Options(fix=True),
                            _named_records([], ["present_0", "present_1"]))
    assert 'output_names=["y", "present_0", "present_1"]' in out, out
