"""The tools built on ``compat.export``: ``patch``, ``compat run``, ``compat report`` and
``compare`` (parity between routes)."""
