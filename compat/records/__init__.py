"""Saving and records: the atomic save to ``f``, the JSONL ledger, the logs of failed attempts."""
