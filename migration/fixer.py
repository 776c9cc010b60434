"""Applies planned edits with libcst, so everything the edits do not touch stays byte-identical.

Edit kinds (``Edit.kind``), keyed by the start of the node they target:
on a call: ``to_kw`` (index, name), ``rename`` (old, new), ``set`` (name, code), ``drop`` (name),
``add`` (name, code), ``func`` (code), ``dynamo_export`` (func code), ``arg`` (index, code: a
positional argument replaced); on the statement holding the
call: ``before`` / ``after`` (statement code; ``follow``: right after the call, before the
``after`` ones), ``comment`` (text), ``wrap`` (a context manager's code: the statement becomes
the body of ``with <code>:``, the ``before``/``follow``/``after`` statements stay outside);
``with_unwrap`` (statement code)
on a With; ``importfrom_module`` (module) on an ImportFrom; ``drop_import`` (the bound name) on
an Import or ImportFrom; ``drop_stmt`` on an expression statement (removed with its line);
``import`` (statement) at (0, 0) is not the fixer's: :mod:`migration.splice` inserts those
where ruff's isort puts them (:mod:`migration.import_order`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from . import unused_imports
from .model import Edit, Key

_CALL_ORDER = ("to_kw", "arg", "rename", "set", "drop", "add", "func", "dynamo_export")
_NO_SPACE = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _find(args: list[cst.Arg], name: str) -> int | None:
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == name:
            return i
    return None


def _pw(ws: object) -> cst.ParenthesizedWhitespace | None:
    return ws if isinstance(ws, cst.ParenthesizedWhitespace) else None


def _bare(pw: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
    """``pw``'s line break and indentation without its comments (the layout new keywords copy)."""
    return pw.with_changes(first_line=cst.TrailingWhitespace(newline=pw.first_line.newline),
                           empty_lines=[])


def _merge(first: object, second: object, prefer_first: bool) -> object:
    """The whitespace replacing ``first <removed argument> second``.

    Keeps the line break after ``first`` and the comments that are not the removed argument's:
    own-line comments stay where they are (above it, in front of the following argument or the
    closing parenthesis); its trailing comment goes with it (``_drop``).
    """
    a, b = _pw(first), _pw(second)
    if a is not None and b is not None:
        return a.with_changes(empty_lines=[*a.empty_lines, *b.empty_lines], indent=b.indent,
                              last_line=b.last_line)
    if b is not None:
        return _bare(b).with_changes(empty_lines=list(b.empty_lines))
    if a is not None and (prefer_first or a.first_line.comment or a.empty_lines):
        return a if prefer_first else a.with_changes(last_line=cst.SimpleWhitespace(""))
    return first if prefer_first and first is not None else second


def _drop(args: list[cst.Arg], i: int) -> list[str]:
    """Remove argument ``i``; returns the comments that went with it, which belonged to it: the
    one after it on its line, those inside it and the own-line comments right above it (no
    blank line between). Other comments around it stay."""
    removed = args.pop(i)
    trailing = removed.comma.whitespace_after if isinstance(removed.comma, cst.Comma) \
        else removed.whitespace_after_arg
    kept = comments_of(*_pw(trailing).empty_lines) if _pw(trailing) is not None else []
    gone = list((Counter(comments_of(removed)) - Counter(kept)).elements())
    if i == 0:  # (never the case for an option) the comments above the next one move up
        return gone
    prev = args[i - 1]
    first = prev.comma.whitespace_after if isinstance(prev.comma, cst.Comma) else None
    above = _pw(first)
    if above is not None:  # the own-line comments right above it (no blank line between) too
        lines = list(above.empty_lines)
        while lines and lines[-1].comment is not None:
            gone.append(lines.pop().comment.value)  # type: ignore[union-attr]
        first = above.with_changes(empty_lines=lines)
        prev = prev.with_changes(comma=prev.comma.with_changes(whitespace_after=first))
    if i < len(args):  # an argument follows: the comma before the removed one now leads to it
        ws = _merge(first, removed.comma.whitespace_after, True)
        args[i - 1] = prev.with_changes(comma=prev.comma.with_changes(whitespace_after=ws))
    elif isinstance(removed.comma, cst.Comma):  # removed the last: its trailing comma moves back
        ws = _merge(first, removed.comma.whitespace_after, False)
        args[i - 1] = prev.with_changes(comma=removed.comma.with_changes(whitespace_after=ws))
    else:
        ws = _merge(first, removed.whitespace_after_arg, False)
        args[i - 1] = prev.with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=ws)
    return gone


def _add(args: list[cst.Arg], name: str, code: str) -> None:
    """Append ``name=code`` in the layout of the call; new keywords get no comments."""
    new = cst.Arg(keyword=cst.Name(name), value=cst.parse_expression(code), equal=_NO_SPACE)
    if not args:
        args.append(new)
        return
    last = args[-1]
    between = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) \
        else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    tmpl = _pw(between.whitespace_after)
    if tmpl is not None:
        between = between.with_changes(whitespace_after=_bare(tmpl))
    if isinstance(last.comma, cst.Comma):  # trailing comma: copy the multi-line layout
        end = _pw(last.comma.whitespace_after)
        if end is not None and tmpl is not None:  # the last argument keeps its own comment
            args[-1] = last.with_changes(comma=last.comma.with_changes(
                whitespace_after=_bare(tmpl).with_changes(first_line=end.first_line)))
            args.append(new.with_changes(comma=last.comma.with_changes(
                whitespace_after=end.with_changes(
                    first_line=cst.TrailingWhitespace(newline=end.first_line.newline)))))
        else:
            args[-1] = last.with_changes(comma=between)
            args.append(new.with_changes(comma=last.comma))
        return
    end = _pw(last.whitespace_after_arg)
    if end is not None:  # a line break (maybe a comment) before the closing parenthesis
        if tmpl is not None:
            comma = between.with_changes(whitespace_after=_bare(tmpl).with_changes(
                first_line=end.first_line))
            after = end.with_changes(first_line=cst.TrailingWhitespace(
                newline=end.first_line.newline))
        else:
            comma, after = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")), end
        args[-1] = last.with_changes(comma=comma, whitespace_after_arg=cst.SimpleWhitespace(""))
        args.append(new.with_changes(whitespace_after_arg=after))
        return
    args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(new)


def _dynamo_export(call: cst.Call, func: str) -> cst.Call:
    """``dynamo_export(m, *a, **kw)`` -> ``export(m, a, kwargs=kw, dynamo=True)``."""
    pos = [a for a in call.args if a.keyword is None and a.star != "**"]
    kws = [a for a in call.args if a.keyword is not None or a.star == "**"]
    model, rest = _code(pos[0].value), pos[1:]
    elems = [("*" if a.star == "*" else "") + _code(a.value) for a in rest]
    tup = f"({elems[0]},)" if len(elems) == 1 else "(" + ", ".join(elems) + ")"
    parts = [model, tup]
    if len(kws) == 1 and kws[0].star == "**":
        parts.append(f"kwargs={_code(kws[0].value)}")
    elif kws:
        items = [f"**{_code(a.value)}" if a.star == "**" else f'"{a.keyword.value}": '
                 f"{_code(a.value)}" for a in kws]
        parts.append("kwargs={" + ", ".join(items) + "}")
    parts.append("dynamo=True")
    return cst.parse_expression(f"{func}({', '.join(parts)})")  # type: ignore[return-value]


def _to_keywords(args: list[cst.Arg], todo: Iterable[tuple[int, str]], gone: list[str]) -> None:
    """Name positional arguments (``(index, name)`` pairs, indices of the original call).

    A positional option also passed as a keyword (a TypeError at run time) is dropped: the
    keyword is what the analysis judged, and a call never gets a keyword twice.
    """
    duplicates = []
    for idx, name in todo:
        if idx < len(args) and args[idx].keyword is None:
            if _find(args, name) is not None:
                duplicates.append(idx)
            else:
                args[idx] = args[idx].with_changes(keyword=cst.Name(name), equal=_NO_SPACE)
    for idx in sorted(duplicates, reverse=True):
        gone += _drop(args, idx)


def _apply_call(call: cst.Call, edits: Sequence[Edit], gone: list[str], shift: int = 0
                ) -> cst.Call:
    """``call`` with ``edits`` applied; the comments of dropped arguments are added to ``gone``,
    and with a new callee continuation lines move ``shift`` columns (see ``_Fixer._shift``)."""
    args = list(call.args)
    func = None
    for kind in _CALL_ORDER:
        if kind == "to_kw":
            _to_keywords(args, [e.args for e in edits if e.kind == kind], gone)
            continue
        for e in (e for e in edits if e.kind == kind):
            if kind == "rename":
                i = _find(args, e.args[0])
                if i is not None and _find(args, e.args[1]) is None:
                    args[i] = args[i].with_changes(keyword=cst.Name(e.args[1]))
            elif kind == "arg":  # the positional argument at index args[0] becomes args[1]
                if e.args[0] < len(args) and args[e.args[0]].keyword is None:
                    args[e.args[0]] = args[e.args[0]].with_changes(
                        value=cst.parse_expression(e.args[1]))
            elif kind == "set":
                i = _find(args, e.args[0])
                if i is not None:
                    args[i] = args[i].with_changes(value=cst.parse_expression(e.args[1]))
            elif kind == "drop":
                i = _find(args, e.args[0])
                if i is not None:
                    gone += _drop(args, i)
            elif kind == "add":  # a keyword that is already there gets the new value
                i = _find(args, e.args[0])
                if i is None:
                    _add(args, e.args[0], e.args[1])
                else:
                    args[i] = args[i].with_changes(value=cst.parse_expression(e.args[1]))
            elif kind == "func":
                func = cst.parse_expression(e.args[0])
            elif kind == "dynamo_export":
                return _dynamo_export(call, e.args[0])
    if func is not None and shift:
        args = [a.visit(_Shift(shift)) for a in args]  # type: ignore[misc]
    call = call.with_changes(args=args)
    return call.with_changes(func=func) if func is not None else call


class _Shift(cst.CSTTransformer):
    """Moves every continuation line (and own-line comment) of the visited arguments ``delta``
    columns: arguments aligned under a callee's open parenthesis follow a callee of another
    length (``torch.onnx.export(`` -> ``compat.export(``)."""

    def __init__(self, delta: int) -> None:
        super().__init__()
        self.delta = delta

    def _moved(self, ws: cst.SimpleWhitespace) -> cst.SimpleWhitespace:
        if self.delta > 0:
            return cst.SimpleWhitespace(ws.value + " " * self.delta)
        cut = -self.delta
        return cst.SimpleWhitespace(ws.value[cut:]) if ws.value[-cut:] == " " * cut else ws

    def leave_ParenthesizedWhitespace(self, original: cst.ParenthesizedWhitespace,
                                      updated: cst.ParenthesizedWhitespace
                                      ) -> cst.ParenthesizedWhitespace:
        lines = [e.with_changes(whitespace=self._moved(e.whitespace)) if e.comment else e
                 for e in updated.empty_lines]
        return updated.with_changes(last_line=self._moved(updated.last_line), empty_lines=lines)


def _comment_lines(texts: Iterable[str]) -> list[cst.EmptyLine]:
    return [cst.EmptyLine(comment=cst.Comment(t)) for t in texts]


class _CommentCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def visit_Comment(self, node: cst.Comment) -> None:
        self.found.append(node.value)


def comments_of(*nodes: cst.CSTNode) -> list[str]:
    """Every comment inside ``nodes``, in order."""
    collector = _CommentCollector()
    for node in nodes:
        node.visit(collector)
    return collector.found


def _lost(before: cst.CSTNode, after: cst.CSTNode) -> list[str]:
    """Comments of ``before`` that ``after`` no longer has (e.g. inside a replaced value)."""
    missing = Counter(comments_of(before)) - Counter(comments_of(after))
    out = []
    for c in comments_of(before):
        if missing[c] > 0:
            missing[c] -= 1
            out.append(c)
    return out


class _Fixer(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, edits: Iterable[Edit]) -> None:
        super().__init__()
        self.by_key: dict[Key, list[Edit]] = defaultdict(list)
        for e in edits:
            if e.kind != "import" and e not in self.by_key[e.key]:
                self.by_key[e.key].append(e)
        self.frames: list[dict[str, list[str]]] = []
        # trailing comments of an unwrapped ``with`` block, by the statement they now follow
        self.footers: dict[int, list[cst.EmptyLine]] = {}
        self.dropped: list[str] = []  # comments of dropped arguments, which went with them
        self.indent = "    "  # the module's own indent (``wrap`` indents a statement by it)

    def _edits(self, node: cst.CSTNode) -> list[Edit]:
        pos = self.get_metadata(PositionProvider, node).start
        return self.by_key.get((pos.line, pos.column), [])

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self.frames.append({"before": [], "follow": [], "after": [], "comment": [],
                                "kept": [], "wrap": []})
        return super().on_visit(node)

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
        result = super().on_leave(original, updated)
        if not isinstance(original, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return result
        frame = self.frames.pop()
        stmts: list[cst.CSTNode] = (
            list(result.nodes) if isinstance(result, cst.FlattenSentinel) else [result]
        )
        if not any(frame.values()) or not stmts:
            return result
        lead = list(original.leading_lines)
        if frame["wrap"]:
            stmts = [self._wrapped(stmts, frame["wrap"][0])]
        before = [cst.parse_statement(c) for c in frame["before"]]
        after = [cst.parse_statement(c) for c in frame["follow"] + frame["after"]]
        out = before + stmts
        first = out[0]
        out[0] = first.with_changes(leading_lines=lead + _comment_lines(frame["comment"])
                                    + _comment_lines(frame["kept"]))
        if before:  # the original statement's own leading lines moved to the first one
            idx = len(before)
            out[idx] = out[idx].with_changes(leading_lines=[])
        return cst.FlattenSentinel(out + after)

    def _wrapped(self, stmts: list[cst.CSTNode], manager: str) -> cst.With:
        """``with manager:`` holding ``stmts``, their continuation lines moved one indent in."""
        step = len(self.indent) if self.indent.strip(" ") == "" else 0
        body = [s.visit(_Shift(step)) if step else s for s in stmts]  # type: ignore[misc]
        body[0] = body[0].with_changes(leading_lines=[])
        return cst.With(items=[cst.WithItem(item=cst.parse_expression(manager))],
                        body=cst.IndentedBlock(body=body))  # type: ignore[arg-type]

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        edits = self._edits(original)
        if not edits:
            return updated
        frame = self.frames[-1] if self.frames else None
        if frame is not None:
            for e in edits:
                if e.kind in frame and e.args[0] not in frame[e.kind]:
                    frame[e.kind].append(e.args[0])
        gone: list[str] = []
        new = _apply_call(updated, edits, gone, self._shift(original, edits))
        self.dropped += gone
        lost = list((Counter(_lost(updated, new)) - Counter(gone)).elements())
        if lost:
            if frame is None:
                raise ValueError("comments of an edited call have no statement to go to")
            frame["kept"].extend(lost)
        return new

    def _shift(self, original: cst.Call, edits: Sequence[Edit]) -> int:
        """How far the continuation lines move with a new callee: its change of length when the
        arguments are aligned under the open parenthesis (the first one on a later line starts
        right after it), else 0 (hanging indents stay)."""
        func = next((e.args[0] for e in edits if e.kind == "func"), None)
        if func is None or isinstance(original.whitespace_before_args, cst.ParenthesizedWhitespace):
            return 0
        where = self.get_metadata(PositionProvider, original.func)
        paren = where.end.column + len(_code(original.whitespace_after_func))
        for arg in original.args:
            start = self.get_metadata(PositionProvider, arg).start
            if start.line > where.end.line:
                if start.column != paren + 1:
                    return 0
                return len(_code(cst.parse_expression(func))) - len(_code(original.func))
        return 0

    def leave_With(self, original: cst.With, updated: cst.With):
        edits = [e for e in self._edits(original) if e.kind == "with_unwrap"]
        if not edits:
            return updated
        body = updated.body
        # every comment stays: the with line's own goes to the mode statement (or above the
        # block), those inside the with header above it, the block's trailing ones after it
        parts = [updated.lpar, *updated.items, updated.rpar, updated.whitespace_after_with,
                 updated.whitespace_before_colon]
        header = comments_of(*(p for p in parts if isinstance(p, cst.CSTNode)))
        if isinstance(body, cst.IndentedBlock):
            stmts = list(body.body)
            line_comment = body.header.comment.value if body.header.comment else None
            footer = list(body.footer)
        else:  # ``with ...: a(); b()  # c`` keeps its statements on one line with the comment
            stmts = [cst.SimpleStatementLine(body=list(body.body),
                                             trailing_whitespace=body.trailing_whitespace)]
            line_comment, footer = None, []
        pre = [cst.parse_statement(edits[0].args[0])] if edits[0].args[0] else []
        if pre and line_comment is not None:
            pre[0] = pre[0].with_changes(trailing_whitespace=cst.TrailingWhitespace(
                whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(line_comment)))
        elif line_comment is not None:
            header.append(line_comment)
        out = pre + stmts
        out[0] = out[0].with_changes(leading_lines=list(original.leading_lines)
                                     + _comment_lines(header) + list(out[0].leading_lines))
        if footer:
            self.footers[id(out[-1])] = footer
        return cst.FlattenSentinel(out)

    def _place_footers(self, body: Sequence[cst.CSTNode], footer: Sequence[cst.EmptyLine]
                       ) -> tuple[list[cst.CSTNode], list[cst.EmptyLine]]:
        """Moves pending ``with`` block footers in front of the next statement (or to the
        container's footer when the block was last)."""
        stmts, tail = list(body), list(footer)
        for i, stmt in enumerate(stmts):
            lines = self.footers.pop(id(stmt), None)
            if lines is None:
                continue
            if i + 1 < len(stmts):
                nxt = stmts[i + 1]
                stmts[i + 1] = nxt.with_changes(leading_lines=[*lines, *nxt.leading_lines])
            else:
                tail = [*lines, *tail]
        return stmts, tail

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock
                            ) -> cst.IndentedBlock:
        if not self.footers:
            return updated
        body, footer = self._place_footers(updated.body, updated.footer)
        return updated.with_changes(body=body, footer=footer)

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom):
        for e in self._edits(original):
            if e.kind == "importfrom_module":
                updated = updated.with_changes(module=cst.parse_expression(e.args[0]))
        return self.leave_Import(original, updated)  # type: ignore[arg-type]

    def leave_Expr(self, original: cst.Expr, updated: cst.Expr):
        if any(e.kind == "drop_stmt" for e in self._edits(original)):
            return cst.RemoveFromParent()
        return updated

    def leave_Import(self, original: cst.Import, updated: cst.Import):
        unused = {e.args[0] for e in self._edits(original) if e.kind == "drop_import"}
        return unused_imports.without(updated, unused) if unused else updated

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        if self.footers:
            body, footer = self._place_footers(updated.body, updated.footer)
            updated = updated.with_changes(body=body, footer=footer)
        return updated


def _final_newline(text: str) -> str:
    for end in ("\r\n", "\n", "\r"):
        if text.endswith(end):
            return end
    return ""


def apply_edits(text: str, edits: Iterable[Edit], newline: str | None = None,
                dropped: list[str] | None = None) -> str:
    """``text`` with ``edits`` applied (libcst round trip; untouched code is unchanged).

    ``newline`` is the file's line ending, for inserted lines (a one-line snippet shows none).
    The comments of dropped arguments, which went with them, are added to ``dropped``.
    The final line ending is set aside: libcst 1.9 loses a final ``\\r``.
    """
    end = _final_newline(text)
    body = text[:len(text) - len(end)]
    config = cst.PartialParserConfig(default_newline=newline) if newline else None
    module = cst.parse_module(body, config) if config else cst.parse_module(body)
    if newline and module.default_newline != newline:
        # libcst 1.x ignores the config's newline for a one-line piece (nothing to detect)
        module = module.with_changes(default_newline=newline)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    fixer = _Fixer(edits)
    fixer.indent = module.default_indent
    result = wrapper.visit(fixer)
    if not result.body and not result.header and not result.footer:
        return ""  # every statement went (an unused import): libcst would write a blank line
    out = result.code + end
    if dropped is not None:
        dropped += fixer.dropped
    return out
