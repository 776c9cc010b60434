"""What every ledger record of one call site says about the model the shim wrote there.

A call site may export many models (one script, one helper function serving its callers): the
rewriter decides on all of its records, and a form that fails for one of them is not chosen.
Read from the verdict ``migration.ledger`` builds (its ``records``; a verdict without them, as
tests pass, is one record).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from compat.catalog import INPUT_BINDING, NOT_PARAMETERS, NOT_PARAMETERS_OLD, SIZE_ONE_TILED

from .ledger import ROUTES, after_deferral, shim_only

#: how ``keeps_shim`` says the shim bound ``input_names`` in forward()'s order
BINDING = "the shim attached input_names to forward()'s parameters in their order"

#: the torch.export route's note on an axis the model fixes (dynamo/dynamic_shapes.py)
_FIXED = re.compile(r"axis (?P<input>.+?)\[(?P<axis>\d+)\] \('(?P<name>.*?)'\) is fixed by the model")
#: the down-conversion note on ``opset_version`` (compat/routing/dispatch.py)
_CONVERTED = re.compile(r"^(?P<opset>\d+): built at (?P<built>\d+), converted to \d+ by compat's "
                        r"down-conversion \((?P<rewritten>\d+) nodes rewritten, "
                        r"(?P<relabelled>\d+) relabelled\)")
_DIM_NAMES = re.compile(r"dim_params named \[(?P<names>[^\]]*)\]")
_TILED = re.compile(re.escape(SIZE_ONE_TILED)
                    + r" \d+ for capture on (?P<axes>\[(?:'[^']*'(?:, )?)*\])")
_LIST_FORM = re.compile(r"_dynamic_axes_\d+$")


@dataclass(frozen=True)
class Site:
    """The records of one call site."""

    records: tuple[dict, ...]

    @property
    def ok(self) -> list[dict]:
        """The records of exports that succeeded on a route, but a TorchScript export after a
        deferred draft capture of a model the torch.export route exported too (``compat run
        --route dynamo``): it says nothing of what the torch.export route does."""
        done = [r for r in self.records
                if r.get("status", "ok") == "ok" and r.get("route_taken") in ROUTES]
        on_dynamo = {r.get("model") for r in done if r["route_taken"] == "dynamo"}
        return [r for r in done if not (r["route_taken"] == "legacy" and r.get("model") in on_dynamo
                                        and after_deferral(r))]

    @property
    def routes(self) -> set[str]:
        return {r["route_taken"] for r in self.ok}

    @property
    def models(self) -> list[str]:
        """The model classes exported here (as recorded), in first-seen order."""
        return list(dict.fromkeys(str(r.get("model") or "?") for r in self.ok))

    def _translations(self, option: str) -> list[dict]:
        return [t for r in self.ok if r.get("route_taken") == "dynamo"
                for t in r.get("translations") or () if isinstance(t, dict)
                and t.get("option") == option and isinstance(t.get("action"), str)]

    def keeps_shim(self) -> list[str]:
        """Why no plain-torch form serves every record (empty: one may), each with the models it
        concerns: what only the shim did (transformers' cache registration, an opset no route
        reached, input names bound in forward()'s order where plain torch binds another), or
        routes that differ by model."""
        found: dict[str, list[str]] = {}
        for record in self.ok:
            if record.get("route_taken") != "dynamo":
                continue
            why = list(shim_only(record))
            if any(t.get("option") == "input_names" and isinstance(t.get("action"), str)
                   and t["action"].startswith(INPUT_BINDING)
                   for t in record.get("translations") or () if isinstance(t, dict)):
                why.append(f"{BINDING}, plain torch names the graph inputs in the call's")
            for reason in why:
                found.setdefault(reason, []).append(str(record.get("model") or "?"))
        out = [f"{reason} ({', '.join(dict.fromkeys(models))})" for reason, models in found.items()]
        if len(self.routes) > 1:
            by_route = {route: [str(r.get("model")) for r in self.ok if r["route_taken"] == route]
                        for route in ROUTES}
            out.append("the shim exported " + " and ".join(
                f"{', '.join(dict.fromkeys(m))} on the {_ROUTE_NAMES[route]} route"
                for route, m in by_route.items()) + ": no one plain route serves both")
        return out

    def baked(self) -> list[dict]:
        """The data-dependent branches the shim's draft capture baked (``{file, line, source}``
        of each, over the records)."""
        out: list[dict] = []
        for r in self.ok:
            for b in r.get("baked") or ():
                if isinstance(b, dict) and b not in out:
                    out.append(b)
        return out

    def no_aten_node(self) -> bool:
        """Every dynamo record shows ATen fallback writing no ATen node: plain torch (which has
        no fallback) writes the same model without the option."""
        dynamo = [r for r in self.ok if r.get("route_taken") == "dynamo"]
        return bool(dynamo) and len(dynamo) == len(self.ok) and all(
            any(t.get("option") == "operator_export_type" and "no ATen node" in str(t.get("action"))
                for t in r.get("translations") or ()) for r in dynamo)

    def converted_down(self, changing_nodes: bool = False) -> list[int]:
        """The opsets the shim built at the torch.export route's and converted down to itself;
        with ``changing_nodes`` only those whose conversion rewrote or relabelled a node (where
        torch's own converter may fail and leave the model at the opset it built)."""
        found = []
        for t in self._translations("opset_version"):
            m = _CONVERTED.match(t["action"])
            if m and int(m.group("opset")) < int(m.group("built")) and not (
                    changing_nodes and m.group("rewritten") == m.group("relabelled") == "0"):
                found.append(int(m.group("opset")))
        return sorted(set(found))

    def fixed_axes(self) -> set[tuple[str, int]]:
        """``(input name, axis)`` of the legacy dynamic axes the model fixes (the shim exported
        them static)."""
        return {(m.group("input"), int(m.group("axis")))
                for t in self._translations("dynamic_axes") for m in _FIXED.finditer(t["action"])}

    def dim_names(self) -> set[str]:
        """The dim_params the shim wrote for the legacy dynamic axes."""
        out: set[str] = set()
        for t in self._translations("dynamic_axes"):
            m = _DIM_NAMES.search(t["action"])
            if m:
                out |= {n.strip().strip("'\"") for n in m.group("names").split(",") if n.strip()}
        return out

    def size_one_axes(self) -> list[str]:
        """The dynamic axes whose size-1 example the shim tiled before capture
        (``image[0] (batch)``), over the records, in first-seen order."""
        out: list[str] = []
        for t in self._translations("dynamic_axes"):
            m = _TILED.search(t["action"])
            if m:
                out += ast.literal_eval(m.group("axes"))
        return list(dict.fromkeys(out))

    def names_by_parameter(self) -> bool:
        """Whether every record's dynamic axes were keyed by forward() parameters holding one
        tensor, with ``{axis: name}`` dicts (names a ``dynamic_shapes`` keyed by the same keys
        keeps)."""
        return not any(NOT_PARAMETERS in t["action"] or NOT_PARAMETERS_OLD in t["action"]
                       for t in self._translations("dynamic_axes")) \
            and not any(_LIST_FORM.search(n) for n in self.dim_names())

    def unnamed_outputs(self) -> dict[str, list[str]] | None:
        """``{model class: names}`` of the graph outputs the call's ``output_names`` left
        unnamed, as the shim's exports named them (records written before the ledger kept
        them say nothing). Records of one class with more outputs and fewer (GPT-2 with and
        without its cache) give the longer list: torch names the outputs a model has and leaves
        the rest of ``output_names`` unused. None when records of one class disagree on a name."""
        out: dict[str, list[str]] = {}
        for r in self.ok:
            names = r.get("unnamed_outputs")
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                names = []
            model = str(r.get("model") or "?")
            known = out.setdefault(model, names)
            short, long = sorted((known, names), key=len)
            if long[:len(short)] != short:
                return None
            out[model] = long
        return {model: names for model, names in out.items() if names}

    def written_to_files(self) -> bool:
        """Every record wrote its model to a path (not a file object, not ``f=None``)."""
        outputs = [r.get("output") for r in self.ok]
        return bool(outputs) and all(isinstance(o, str) and not o.startswith("<") for o in outputs)


_ROUTE_NAMES = {"dynamo": "torch.export", "legacy": "TorchScript"}


def site(verdict: dict | None) -> Site | None:
    """The records behind a ledger verdict (None: no ledger evidence for the call)."""
    if not verdict:
        return None
    records = verdict.get("records")
    if not isinstance(records, list):
        records = [verdict]
    return Site(tuple(r for r in records if isinstance(r, dict)))
