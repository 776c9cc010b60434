"""``compat report`` counts call sites as ``verify-migration`` reads them (issue 30, counts): a
record of plain torch (``compat run --observe``) that exported on torch.export is finished, one
followed by a post-step's record (``compat.convert_opset``) is finished with a post-step, a
``dynamo=False`` call is pinned with the reason its comment gives, and ``compat.export`` with
legacy options is left on the shim. One function merges the post-step records for both."""

from __future__ import annotations

import json

from compat.records.call_states import merge_post_steps
from compat.tools.report import to_markdown
from compat.tools.report_model import build_report, call_site_states, pinned_reasons

SOURCE = '''import torch
import torch_onnx_compat as compat

torch.onnx.export(m, (x,), "a.onnx", dynamo=True)
torch.onnx.export(m, (x,), "b.onnx", opset_version=18, dynamo=True)
compat.convert_opset("b.onnx", 13, out="b.onnx")
# compat.migrate: dynamo=False because export_modules_as_functions=True is honoured only by the
#   TorchScript exporter
torch.onnx.export(m, (x,), "c.onnx", export_modules_as_functions=True, dynamo=False)
compat.export(m, (x,), "d.onnx", custom_opsets={"my": 2})
'''


def _records(tmp_path):
    src = tmp_path / "export.py"
    src.write_text(SOURCE)
    site = f"{src}:{{}}"

    def observed(line, out, **kw):
        return {"call_site": site.format(line), "mode": "observe", "route_requested": None,
                "route_taken": kw.pop("route", "dynamo"), "status": "ok", "warnings": [],
                "output": str(tmp_path / out), **kw}

    return [
        observed(4, "a.onnx"),
        observed(5, "b.onnx"),
        observed(5, "b.onnx", post_step="convert_opset(opset=13)"),
        observed(9, "c.onnx", route="legacy"),
        {"call_site": site.format(10), "route_requested": "auto", "route_taken": "dynamo",
         "status": "ok", "warnings": ["ONX105"], "output": str(tmp_path / "d.onnx")},
    ]


def test_observed_post_step_pinned_and_shim_call_sites_are_counted_apart(tmp_path):
    records = _records(tmp_path)
    assert call_site_states(records) == {"finished": 1, "finished_post_step": 1, "pinned": 1,
                                         "on_shim": 1}
    assert pinned_reasons(records) == {
        "export_modules_as_functions=True is honoured only by the TorchScript exporter": 1}


def test_the_post_step_record_stands_for_its_call():
    call = {"call_site": "/p/x.py:5", "output": "/p/b.onnx", "status": "ok"}
    step = {**call, "post_step": "convert_opset(opset=13)"}
    other = {"call_site": "/p/x.py:5", "output": "/p/other.onnx", "post_step": "name_dims"}
    assert merge_post_steps([call, step]) == [step]
    assert merge_post_steps([call, other]) == [call, other]  # another file: not its call's


def test_compat_report_shows_the_counts_and_the_pin_reason(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text("".join(json.dumps(r) + "\n" for r in _records(tmp_path)))
    text = to_markdown(build_report([str(ledger)]))
    assert ("Call sites: 1 finished, 1 finished with a post-step, 1 pinned, 1 left on the shim."
            in text), text
    assert "- pinned (1): export_modules_as_functions=True is honoured only by the TorchScript " \
        "exporter" in text
