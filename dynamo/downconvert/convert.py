"""The down-conversion pass: every default-domain node of the main graph, its subgraphs and the
model's functions, rewritten to the target opset by its adapter or relabelled."""

from __future__ import annotations

from collections import Counter

import onnx_ir as ir
import onnx_ir.passes.common as common_passes

from . import registry, schemas
from .base import NoForm, Outputs, Rewrite

ONNX_DOMAINS = ("", "ai.onnx")


class Unreachable(Exception):
    """Some nodes have no form at the target; ``gaps`` says which and why."""

    def __init__(self, gaps: list[NoForm]) -> None:
        super().__init__("; ".join(str(g) for g in gaps))
        self.gaps = gaps


def onnx_opset(imports: dict[str, int]) -> int | None:
    return imports.get("", imports.get("ai.onnx"))


def convert_in_place(model: ir.Model, target: int) -> Counter[str]:
    """Bring ``model`` to opset ``target`` in place; returns counts of ``rewritten`` and
    ``relabelled`` nodes. Raises ``Unreachable`` (the model is then half-converted: work on a copy)."""
    stats: Counter[str] = Counter()
    gaps: dict[tuple[str, str], NoForm] = {}
    for graph_like in (model.graph, *model.functions.values()):
        source = onnx_opset(graph_like.opset_imports)
        if source is None or source <= target:
            continue
        nodes = list(graph_like.all_nodes())
        for node in nodes:  # in the source form; a version (torchlib's) would read as converted
            if node.domain in ONNX_DOMAINS:
                node.version = None
        for node in nodes:
            _visit(node, source, target, stats, gaps)
    if gaps:
        raise Unreachable(list(gaps.values()))
    for graph_like in (model.graph, *model.functions.values()):
        imports = graph_like.opset_imports
        if onnx_opset(imports) is not None:
            imports.pop("ai.onnx", None)
            imports[""] = target
        for node in graph_like.all_nodes():
            if node.domain in ONNX_DOMAINS:
                node.version = None
    common_passes.RemoveUnusedNodesPass()(model)
    common_passes.NameFixPass()(model)
    return stats


def _visit(node: ir.Node, source: int, target: int, stats: Counter[str],
           gaps: dict[tuple[str, str], NoForm]) -> None:
    if node.domain not in ONNX_DOMAINS or node.version == target:  # written in the target form
        return
    op = node.op_type
    old, new = schemas.schema(op, target), schemas.schema(op, source)
    unchanged = old is not None and new is not None and old.since_version == new.since_version
    if new is None or (unchanged and op not in registry.every_target()):
        return
    try:
        adapter = registry.adapters().get(op)
        if adapter is None:
            if not schemas.type_only(op, source, target):
                raise NoForm(op, target, schemas.lowest_relabel(op, source, target), "no down-conversion adapter")
            schemas.check_types(node, source, target)
            stats["relabelled"] += 1
            return
        rw = Rewrite(node, target, source)
        outs = adapter(rw)
        if outs is None:  # the node is its own target form
            if not unchanged:
                schemas.check_types(node, source, target)
                stats["relabelled"] += 1
            return
        for made in rw.nodes:  # nodes written in the target form: their types must fit it too
            if made.version == target:
                schemas.check_types(made, source, target)
    except NoForm as gap:
        gaps.setdefault((op, gap.why), gap)
        return
    _replace(node, rw, outs)
    stats["rewritten"] += 1
    for made in rw.nodes:
        _visit(made, source, target, stats, gaps)


def fit_pool_sizes(model: ir.Model) -> int:
    """At the model's own opset (no conversion), give each ceil_mode pool whose torch output size
    the opset's shape rule contradicts the pads the down-conversion gives it (``pool.py``), so
    strict shape inference agrees with the size torch declared. Returns the nodes rewritten."""
    from .pool import ADAPTERS, DROPS_PADDING_WINDOWS

    rewritten = 0
    for graph_like in (model.graph, *model.functions.values()):
        opset = onnx_opset(graph_like.opset_imports)
        if opset is None or opset >= DROPS_PADDING_WINDOWS:
            continue
        for node in list(graph_like.all_nodes()):
            if node.domain not in ONNX_DOMAINS or node.op_type not in ADAPTERS:
                continue
            rw = Rewrite(node, opset, opset)
            outs = ADAPTERS[node.op_type](rw)
            if outs is None:
                continue
            _replace(node, rw, outs)
            rewritten += 1
    return rewritten


def _replace(node: ir.Node, rw: Rewrite, outs: Outputs) -> None:
    """``node`` replaced by the nodes ``rw`` built, its outputs by ``outs``."""
    for made in rw.nodes:
        made.metadata_props.update(node.metadata_props)  # keeps e.g. the torch source location
    ir.convenience.replace_nodes_and_values(
        node.graph, node, [node], rw.nodes, list(node.outputs), list(outs))
