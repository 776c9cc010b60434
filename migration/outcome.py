"""Where the export calls of (migrated) code stand: how many finished on plain torch's new
exporter, finished with a post-step (``compat.convert_opset`` / ``compat.name_dims`` right after
the call), are pinned to ``dynamo=False`` (with the reason the rewriter's comment gives), or are
left on the shim (``compat.export``). Read from the text, as the user reads it (issue 30.8)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable

FINISHED, POST_STEP, PINNED, SHIM = ("finished", "finished with a post-step", "pinned",
                                     "left on the shim")
ORDER = (FINISHED, POST_STEP, PINNED, SHIM)
_STEPS = ("convert_opset", "name_dims")
_REASON = re.compile(r"compat\.migrate\)?:\s*dynamo=False (?:because )?(.*)")


def _name(func: ast.expr) -> str:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _step(stmt: ast.stmt | None) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
        and _name(stmt.value.func).rsplit(".", 1)[-1] in _STEPS


def pin_comment(lines: list[str], lineno: int) -> str:
    """The reason of the rewriter's ``dynamo=False`` comment right above line ``lineno``."""
    block: list[str] = []
    for line in reversed(lines[:lineno - 1]):
        if not line.strip().startswith("#"):
            break
        block.insert(0, line.strip().lstrip("#").strip())
    found = _REASON.search("# " + " ".join(block))
    return found.group(1) if found else ""


def classify(text: str) -> list[tuple[str, str]]:
    """(state, pin reason or "") of each export call of ``text`` (a module's source)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    lines = text.splitlines()
    out = []
    # ``from torch.onnx import export as onnx_export`` (transformers' export_pytorch): a plain
    # name that calls torch's exporter
    aliases = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               and n.module in ("torch.onnx", "torch.onnx.utils") for a in n.names
               if a.name == "export"}
    for block in ast.walk(tree):
        if not isinstance(block, (ast.stmt, ast.Module)):
            continue  # an expression's ``body`` (IfExp, Lambda) holds no statements
        body = [s for f in ("body", "orelse", "finalbody") for s in getattr(block, f, [])
                if isinstance(s, ast.stmt)]
        for i, stmt in enumerate(body):
            if isinstance(getattr(stmt, "body", None), list):  # compound: its blocks are walked
                continue
            for node in ast.walk(stmt):
                if not isinstance(node, ast.Call) or (isinstance(node.func, ast.Name)
                                                      and node.func.id not in aliases):
                    continue
                name = "onnx.export" if isinstance(node.func, ast.Name) else _name(node.func)
                if name.endswith(("onnx.export", "onnx.utils.export")):
                    dynamo = next((k.value for k in node.keywords if k.arg == "dynamo"), None)
                    if isinstance(dynamo, ast.Constant) and dynamo.value is False:
                        out.append((PINNED, pin_comment(lines, stmt.lineno)))
                    else:
                        nxt = body[i + 1] if i + 1 < len(body) else None
                        out.append((POST_STEP if _step(nxt) else FINISHED, ""))
                elif name.split(".")[-1] == "export" and name.split(".")[0] in (
                        "compat", "torch_onnx_compat"):
                    out.append((SHIM, ""))
    return out


def summary(texts: Iterable[str]) -> str:
    """One line of counts over the modules ``texts`` ("" when they hold no export call)."""
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for text in texts:
        found = classify(text)
        counts.update(state for state, _ in found)
        reasons.update(why or "no reason written" for state, why in found if state == PINNED)
    if not counts:
        return ""
    line = "Export calls: " + ", ".join(f"{counts[s]} {s}" for s in ORDER) + "."
    return "\n".join([line, *(f"  pinned ({n}): {why}" for why, n in reasons.most_common())])
