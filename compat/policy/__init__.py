"""Warnings and config: route and strictness settings, and the legacy-usage warnings at the
user's call line."""
