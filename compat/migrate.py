"""``python -m compat.migrate``: the static rewriter (see ``migration/``; never imports torch)."""

from migration.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
