"""No ONX1xx option is silently dropped: each value is translated (recorded) or routed away (reason)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from compat import catalog
from compat.errors import RouteFailed
from compat.request import ExportRequest
from dynamo import capabilities, options


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(3, 2)

    def forward(self, x):
        return self.l(x)


#: every value worth distinguishing, per legacy option (defaults included: passing one explicitly
#: is still a legacy usage that must be accounted for)
VALUES: dict[str, list[Any]] = {
    "dynamic_axes": [{"x": {0: "batch"}}, {"x": [0]}, {"x": {0: "batch"}, "nothing": {0: "n"}}],
    "training": ["EVAL", "PRESERVE", "TRAINING"],
    "operator_export_type": ["ONNX", "ONNX_ATEN", "ONNX_ATEN_FALLBACK", "ONNX_FALLTHROUGH"],
    "do_constant_folding": [True, False],
    "custom_opsets": [{"custom_domain": 2}],
    "export_modules_as_functions": [False, True, {nn.Linear}],
    "autograd_inlining": [True, False],
}

ONX1 = [e for e in catalog.select(["ONX1"])]
CODE_OPTIONS = {code: opt for opt, code in catalog.OPTION_CODES.items()}


def test_every_onx1_entry_is_walked():
    assert {e.code for e in ONX1} == {catalog.OPTION_CODES[o] for o in VALUES}


@pytest.mark.parametrize("code, option, value", [
    (e.code, CODE_OPTIONS[e.code], v) for e in ONX1 for v in VALUES[CODE_OPTIONS[e.code]]
])
def test_option_is_translated_or_routed_with_reason(code, option, value):
    req = ExportRequest(model=Tiny(), args=(torch.randn(2, 3),), input_names=("x",), output_names=("y",),
                        given=frozenset({option}), **{option: value})
    reasons = [reason for c, reason in capabilities.legacy_only_reasons(req) if c == code]
    if reasons:
        assert reasons[0].strip()
        with pytest.raises(RouteFailed, match=code):
            options.plan(req)
        return
    recorded = [t for t in options.plan(req).translations if t.code == code and t.option == option]
    assert recorded, f"{option}={value!r} neither translated nor routed to the TorchScript exporter"
    assert recorded[0].action.strip()
    assert set(recorded[0].to_dict()) == {"code", "option", "action"}
