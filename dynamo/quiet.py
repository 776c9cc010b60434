"""Which model line stopped torch.export, and what to do about it.

``describe_block`` digs the model source line that blocked capture out of torch's exception
(the user frame torch names, else the innermost model frame of a traceback) and adds the fix.
What torch printed meanwhile is kept off the terminal by ``compat.routing.capture.Capture``, what
it warned and logged by ``compat.policy.route_noise.Held`` (which also decides what a model
source file is).
"""

from __future__ import annotations

import os
import re
import traceback

from compat.policy.route_noise import is_model_source as _is_model_source

#: torch's "The following call raised this error:" stack and its graph-comment form
_USER_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in [^\n]+\n\s+(?P<code>[^\n]+)')
_GRAPH_FRAME = re.compile(r"# File: (?P<file>[^\n]+?):(?P<line>\d+) in [^,\n]+, code: (?P<code>[^\n]+)")

#: what to do about each blocking class
FIXES = {
    "data-dependent control flow": "rewrite the branch with torch.cond, or state what it relies on "
                                   "with torch._check(...) before it",
    "dynamic shape constraints violated": "mark only the axes the model really keeps dynamic",
}


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return out


def blocking_line(exc: BaseException) -> tuple[str, int, str] | None:
    """(file, line, source) of the model line where capture stopped, from torch's exception: the
    user frame torch names in its message, else the innermost model frame of a traceback."""
    chain = _chain(exc)
    for err in reversed(chain):
        for pattern in (_USER_FRAME, _GRAPH_FRAME):
            found = [m for m in pattern.finditer(str(err)) if _is_model_source(m["file"])]
            if found:
                m = found[-1]
                return m["file"], int(m["line"]), m["code"].strip()
    for err in reversed(chain):
        frames = [f for f in traceback.extract_tb(err.__traceback__) if _is_model_source(f.filename)]
        if frames:
            f = frames[-1]
            return f.filename, f.lineno or 0, (f.line or "").strip()
    return None


#: the operator torch or onnxscript names where a conversion, translation or graph pass failed
_OPERATOR_PATTERNS = (
    # an FX node torch was executing or translating: "... call_function[target=torch.ops.aten.view.default](..."
    (re.compile(r"call_function\[target=torch\.ops\.(?P<op>[\w.]+)\]"), "{op}"),
    # "No ONNX function found for <OpOverload(op='aten.foo', overload='default')>"
    (re.compile(r"<OpOverload\(op='(?P<op>[\w.]+)', overload='(?P<overload>\w+)'\)>"), "{op}.{overload}"),
    # an ONNX node an onnx_ir/onnxscript pass failed on: "for node 'node_split' (::SplitToSequence)"
    (re.compile(r"for node '(?P<node>[^']+)' \((?P<domain>[\w.]*)::(?P<op>\w+)\)"), "{op} node {node}"),
)


def failing_operator(exc: BaseException) -> str | None:
    """The operator a conversion, translation or ONNX graph pass failed on (``aten.view.default``,
    ``SplitToSequence node node_split``), from torch's exception chain, innermost first."""
    for err in reversed(_chain(exc)):
        text = str(err)
        for pattern, form in _OPERATOR_PATTERNS:
            found = pattern.search(text)
            if found:
                return form.format(**found.groupdict())
    return None


def describe_block(reason: str, exc: BaseException) -> str | None:
    """Where capture stopped and what to do: ``c.py:7 `if x.mean() > 0` (fix ...)``; None when
    torch's exception names no model line."""
    where = blocking_line(exc)
    if where is None:
        return None
    filename, line, code = where
    text = f"{os.path.basename(filename)}:{line}" + (f" `{code}`" if code else "")
    fix = FIXES.get(reason)
    return f"{text} ({fix})" if fix else text
