"""Bounded, seeded fuzzing of the rewriter (issue 13 item 1): hypothesmith generates modules, a
legacy export call goes between their top-level statements (or at their end, followed by
whitespace-only lines and indented comments), and the rewrite must parse, be idempotent, keep
every comment and leave every other line as it was."""

import ast
import io
import tokenize
import warnings
from collections import Counter

import pytest

hypothesis = pytest.importorskip("hypothesis")
hypothesmith = pytest.importorskip("hypothesmith")

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from migration.core import Options, fix_text

HEADER = "import torch\nfrom torch.onnx import TrainingMode\n"
CALLS = (
    ("torch.onnx.export(model, (x,), 'm.onnx', example_outputs=y, enable_onnx_checker=True,"
     " training=TrainingMode.EVAL)  # the export"),
    "torch.onnx.export(model, x, 'm.onnx', True, False, TrainingMode.EVAL)",
    ("torch.onnx.export(  # opens\n    model, (x,), 'm.onnx',\n    example_outputs=y,  # gone\n"
     "    training=TrainingMode.EVAL,\n)"),
)
TAILS = ("", "    \n    # indented after a blank\n", "\n  \n        # deeper\n    # back\n",
         "# flush\n    \n")
OPTS = Options(fix=True, unsafe_fixes=True)


def _comments(text: str) -> Counter:
    return Counter(t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
                   if t.type == tokenize.COMMENT)


def _compiles(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "fuzz.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _in_order(needles: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(h == n for h in it) for n in needles)


@settings(max_examples=200, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(module=hypothesmith.from_grammar(auto_target=False), where=st.integers(0, 10_000),
       call=st.sampled_from(CALLS), tail=st.sampled_from(TAILS))
def test_rewrite_keeps_everything_it_does_not_edit(module: str, where: int, call: str,
                                                   tail: str) -> None:
    assume(_compiles(module) and "\r" not in module and "\x0c" not in module)
    if module and not module.endswith("\n"):
        module += "\n"
    body = ast.parse(module).body
    lines = module.splitlines(keepends=True) if module else []
    # between two top-level statements, or at the end
    cuts = sorted({0, len(lines)} | {s.end_lineno for s in body if s.end_lineno})
    cut = cuts[where % len(cuts)]
    before, after = "".join(lines[:cut]), "".join(lines[cut:])
    src = HEADER + before + call + "\n" + after + tail
    assume(_compiles(src))

    out, fixed, _, _ = fix_text(src, "fuzz.py", OPTS)

    assert _compiles(out), out
    again, refixed, _, _ = fix_text(out, "fuzz.py", OPTS)
    assert again == out and not refixed, "a second run changed something"
    assert not _comments(src) - _comments(out), "a comment was lost"
    untouched = (HEADER + before).splitlines() + (after + tail).splitlines()
    assert _in_order(untouched, out.splitlines()), "a line outside the export call changed"
    if fixed:
        assert "example_outputs" not in out
