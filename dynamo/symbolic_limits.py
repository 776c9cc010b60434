"""What our graph context cannot run: the error a symbolic raises there, and its reason classes.

A module of its own so the graph and its values both raise it without importing each other.
"""

from __future__ import annotations


class LegacyOnly(Exception):
    """A construct our graph context cannot run on the torch.export route."""

    def __init__(self, reason: str, construct: str, symbolic: str = "?") -> None:
        self.reason = reason
        self.construct = construct
        self.symbolic = symbolic
        super().__init__(self._text())

    def _text(self) -> str:
        return (f"symbolic {self.symbolic} uses {self.construct}, which the torch.export route "
                "cannot run; use the TorchScript route (dynamo=False) where torch still has it, "
                "or give the op a custom_translation_table entry")

    def named(self, symbolic: str) -> LegacyOnly:
        self.symbolic = symbolic
        self.args = (self._text(),)
        return self


# reason classes (short and stable: the ledger groups by them)
REASON_ATEN = "legacy symbolic uses ATen fallback"
REASON_BLOCKS = "legacy symbolic builds blocks"
REASON_RAW_GRAPH = "legacy symbolic uses raw _C.Graph methods"
REASON_UNSUPPORTED = "legacy symbolic emits an unsupported construct"
REASON_FAILED = "legacy symbolic failed in the graph context"
