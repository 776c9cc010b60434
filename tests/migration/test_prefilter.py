"""The byte prefilter: it may let through a file without legacy usage, never skip one with it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from migration.core import Options, check_text, might_need_migration
from migration.sources import process_bytes

FIXTURES = Path(__file__).parent / "fixtures"

# mmcv's ops define their symbolic in files that never name onnx (mmcv/ops/border_align.py)
AUTOGRAD_SYMBOLIC = textwrap.dedent('''
    from torch.autograd import Function


    class BorderAlignFunction(Function):
        @staticmethod
        def symbolic(g, features, boxes, pool_size):
            return g.op("mmcv::MMCVBorderAlign", features, boxes, pool_size_i=pool_size)

        @staticmethod
        def forward(ctx, features, boxes, pool_size):
            return features
''')


def _codes(source: str) -> list[str]:
    return [f.code for f in process_bytes(source.encode(), "m.py", Options()).findings]


def test_an_autograd_symbolic_in_a_file_that_never_names_onnx_is_reported() -> None:
    assert _codes(AUTOGRAD_SYMBOLIC) == ["ONX302"]


@pytest.mark.parametrize("source", [
    "loader = DataLoader(ds, training=True)\n",
    "cfg = dict(fallback=True, export_type='json')\n",
    "model.train(training=True)\n",
])
def test_generic_option_words_alone_do_not_pass(source: str) -> None:
    assert not might_need_migration(source.encode())
    assert check_text(source, "m.py", Options()) == []  # and there was nothing to find


def test_every_fixture_with_findings_passes_the_prefilter() -> None:
    files = [p for p in FIXTURES.rglob("*.py") if p.name != "syntax_error.py"]
    assert len(files) >= 8
    for path in files:
        text = path.read_text(encoding="utf-8")
        if check_text(text, str(path), Options()):
            assert might_need_migration(text.encode()), path
