"""``python -m compat``: run | report | catalog."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

USAGE = f"""usage: python -m {__package__} {{run,report,catalog}} ...

  run [--route R] [--strict] [--ledger P] [--compare] script.py ARGS...
                      run a script unchanged with torch.onnx patched
  report LEDGER... [--format markdown|json]
                      merge export ledgers into a migration report
  catalog [--format text|markdown]
                      the legacy usages compat knows (ONX codes)
"""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "run":
        from compat.tools.runner import main as run_main

        return run_main(rest)
    if cmd == "report":
        from compat.tools.report import main as report_main

        return report_main(rest)
    if cmd == "catalog":
        return _catalog(rest)
    print(f"python -m {__package__}: unknown command {cmd!r}\n\n{USAGE}", file=sys.stderr)
    return 2


def _catalog(argv: list[str]) -> int:
    from compat import catalog

    p = argparse.ArgumentParser(prog=f"python -m {__package__} catalog")
    p.add_argument("--format", choices=("text", "markdown"), default="text")
    ns = p.parse_args(argv)
    sys.stdout.write(catalog.to_markdown() if ns.format == "markdown" else catalog.to_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
