"""Bounded, seeded fuzzing of the rewriter (issue 13 item 1): hypothesmith generates modules, a
legacy export call goes between their top-level statements (or at their end, followed by
whitespace-only lines and indented comments), and the rewrite must parse, be idempotent, keep
every comment but those of the arguments it drops (marked ``# gone``) and leave every other line as
it was (but the ``TrainingMode`` import, once the fix leaves it unused)."""

import ast
import io
import re
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
    assert not _comments(src) - _comments(out) - Counter({"# gone": 1}), "a comment was lost"
    if fixed:  # a dropped argument's comment goes with it (issue 18.7)
        assert "# gone" not in out
    untouched = (HEADER + before).splitlines() + (after + tail).splitlines()
    if "from torch.onnx import TrainingMode" not in out:  # the fix left it unused (issue 18.7)
        assert fixed and not any(isinstance(n, ast.Name) and n.id == "TrainingMode"
                                 for n in ast.walk(ast.parse(out)))
        untouched.remove("from torch.onnx import TrainingMode")
    assert _in_order(untouched, out.splitlines()), "a line outside the export call changed"
    if fixed:
        assert "example_outputs" not in out


# --- line endings (issue 20 item 3): every line the rewriter writes ends like the file's lines ---

#: calls whose fixes insert lines: a route comment, a TODO comment, an import, a whole rewrite
ENDING_CALLS = (
    "torch.onnx.export(model, (x,), 'm.onnx', dynamic_axes={'x': {0: 'b'}})",
    "torch.onnx.export(model, (x,), 'm.onnx', input_names=['x'], dynamic_axes={'x': {0: 'b'}})",
    ("torch.onnx.export(model, (x,), 'm.onnx',\n"
     "    operator_export_type=torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK)  # aten"),
    "torch.onnx.export(model, x, 'm.onnx', True, False, TrainingMode.EVAL, example_outputs=y)",
    "torch.onnx.export(model, (x,), 'm.onnx', opset_version=11, custom_opsets={'a': 1})",
    "torch.onnx.register_custom_op_symbolic('::relu', sym, 11)\ntorch.onnx.export(model, x, 'm.onnx')",
    "torch.onnx.dynamo_export(model, x).save('m.onnx')",
    "torch.onnx.export(model, (x,), 'm.onnx', training=TrainingMode.TRAINING)",
)
FILLER = ("x = 1", "# a comment", "", "def g():\n    return 2", "if a:\n    pass\nelse:\n    b = 3",
          "class C:\n    '''doc\n    string'''", "y = (1,\n     2)")
_ENDING = re.compile(r"\r\n|\r|\n")


@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(parts=st.lists(st.sampled_from(FILLER), max_size=4), calls=st.lists(
           st.sampled_from(ENDING_CALLS), min_size=1, max_size=3),
       where=st.integers(0, 10_000), newline=st.sampled_from(("\r\n", "\r", "\n")),
       indent=st.booleans(), final=st.booleans(), unsafe=st.booleans())
def test_inserted_lines_end_like_the_files_lines(parts: list[str], calls: list[str], where: int,
                                                 newline: str, indent: bool, final: bool,
                                                 unsafe: bool) -> None:
    """CRLF files get CRLF, CR-only files CR, LF files LF, in every line of the output, with safe
    and unsafe fixes, at module level and inside a block, with and without a final newline."""
    body = "\n".join(calls)
    if indent:
        body = "def export_it():\n" + "".join(f"    {ln}\n" if ln else "\n" for ln in body.split("\n"))
        body = body.rstrip("\n")
    cut = where % (len(parts) + 1)
    lines = [*parts[:cut], body, *parts[cut:]]
    src = (HEADER + "\n".join(lines) + ("\n" if final else "")).replace("\n", newline)
    assume(_compiles(src))

    out, fixed, _, _ = fix_text(src, "endings.py", Options(fix=True, unsafe_fixes=unsafe))

    endings = set(_ENDING.findall(out))
    assert endings <= {newline}, (sorted(endings), out)
    assert out.endswith(newline) == src.endswith(newline), "the final line ending changed"
    assert _compiles(out), out
    if unsafe:
        assert fixed and out != src, "no fix was applied"
