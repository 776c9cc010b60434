"""Where each call site of a ledger stands, the one reading the report and ``verify-migration``
share: post-step records merged into their call's, then each call site's state.

A post-step the migration writes right after a call (``compat.convert_opset(f, N, out=f)``,
``compat.name_dims``) records the call site again with the file as the step left it
(``post_step``, ``compat.tools.observe``): that record stands for the call, in place of the
call's own. A call site is then

* ``finished``: its last call exported on torch.export with no legacy usage (plain torch, as
  ``compat run --observe`` records the migrated code, or the shim called without legacy options);
* ``finished_post_step``: so, with a post-step after it;
* ``pinned``: its last call asked for the TorchScript route (``dynamo=False``; ``route="legacy"``);
* ``on_shim``: the rest (legacy options the shim translated, a fallback, a failure).

Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

FINISHED, POST_STEP, PINNED, ON_SHIM = "finished", "finished_post_step", "pinned", "on_shim"
STATES = (FINISHED, POST_STEP, PINNED, ON_SHIM)
OBSERVE = "observe"  # compat.tools.observe.MODE: plain torch, recorded


def model_path(rec: Mapping[str, Any]) -> str | None:
    """The model file a record's call wrote (None: none known)."""
    files = rec.get("output_files")
    model = files.get("model") if isinstance(files, Mapping) else None
    if isinstance(model, Mapping) and isinstance(model.get("path"), str):
        return model["path"]
    out = rec.get("output_snapshot") or rec.get("output")
    return out if isinstance(out, str) else None


def merge_post_steps(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` in order, each post-step record in place of the record of its call (the last
    one of the same call site, which wrote the same model file)."""
    out: list[dict[str, Any]] = []
    last: dict[Any, int] = {}
    for rec in records:
        site = rec.get("call_site")
        i = last.get(site)
        if rec.get("post_step") and i is not None and model_path(out[i]) == model_path(rec):
            out[i] = rec
            continue
        last[site] = len(out)
        out.append(rec)
    return out


def state(rec: Mapping[str, Any], legacy_usages: Callable[[Mapping[str, Any]], Iterable[str]]
          ) -> str:
    """The state of the call site whose last (merged) record is ``rec``; ``legacy_usages`` gives
    the record's legacy usage codes."""
    observed = rec.get("mode") == OBSERVE
    if rec.get("route_requested") == "legacy" or (observed and rec.get("route_taken") == "legacy"):
        return PINNED
    if rec.get("status", "ok") == "ok" and rec.get("route_taken") == "dynamo" \
            and not any(True for _ in legacy_usages(rec)):
        return POST_STEP if rec.get("post_step") else FINISHED
    return ON_SHIM


def last_by_site(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last merged record of each call site."""
    last: dict[str, dict[str, Any]] = {}
    for rec in merge_post_steps(records):
        last[str(rec.get("call_site") or "<unknown>")] = rec
    return last
