"""Places a torch.export-route capture baked at the example's values (``Outcome.baked``).

Like the TorchScript tracer's TracerWarnings, each is a branch or value of the model that the
exported graph no longer computes: the call gets one ONX003 warning at its line naming them, the
ledger record lists them (``baked``), ``compat report`` shows them.
"""

from __future__ import annotations

import os
from typing import Any

from compat.policy import notices
from compat.request import Outcome

CODE = "ONX003"
#: places named in the warning itself (the ledger has them all)
SHOWN = 3


def where(place: dict[str, Any]) -> str:
    """``models.py:7 `if x.mean() > 0:``` (or the guard when no model frame was found)."""
    if not place.get("file"):
        return f"`{place.get('guard', '?')}`"
    text = f"{os.path.basename(str(place['file']))}:{place.get('line')}"
    return f"{text} `{place['source']}`" if place.get("source") else text


def warn(outcome: Outcome, site: notices.CallSite) -> list[str]:
    """One ONX003 warning at the call site when ``outcome`` baked anything; its code, or []."""
    places = list(outcome.baked)
    if not places:
        return []
    shown = "; ".join(where(p) for p in places[:SHOWN])
    more = f"; {len(places) - SHOWN} more" if len(places) > SHOWN else ""
    noun = "branch" if len(places) == 1 else f"{len(places)} branches"
    subject = f"{noun} baked at the example's values ({shown}{more})"
    notices.emit(notices.make_warning(CODE, "the ledger's `baked` lists each place",
                                      site.filename, subject), site)
    return [CODE]
