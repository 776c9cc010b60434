"""``python -m compat`` (``torch-onnx-compat`` installed): run | report | catalog | rule | check |
convert-opset | verify-migration."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from compat import commands

COMMANDS = ("run", "report", "catalog", "rule", "check", "convert-opset", "verify-migration")


def usage() -> str:
    """The top-level usage text, with the command name the user typed."""
    return f"""usage: {commands.PREFIX} [--version] {{{','.join(COMMANDS)}}} ...

  run [--route R] [--strict] [--ledger P] [--compare] [--explain] [-v] (script.py | -m module) ARGS...
                      run a script unchanged with torch.onnx patched
  run --observe --ledger P (script.py | -m module) ARGS...
                      run a script on plain torch, recording each export call (no shim)
  report LEDGER... [--format markdown|json|html] [--output PATH]
                      merge export ledgers into a migration report
  catalog [--format text|markdown|json]
                      the legacy usages compat knows (ONX codes)
  rule CODE [--format text|json]
                      one rule: what it finds, why, the fix and its safety, an example
  check MODEL.onnx... [--format text|json]
                      check an ONNX model: opsets, inputs/outputs, external data, onnx checker,
                      strict shape inference, an onnxruntime run
  convert-opset IN.onnx --opset N [-o OUT.onnx]
                      bring a model down to opset N (11..its own) with the torch.export
                      route's down-conversion, checked; names an operator it cannot take down
  verify-migration OLD_LEDGER NEW_LEDGER [--format text|json]
                      compare the models of the original code under the shim (run --ledger) with
                      the migrated code's (run --observe --ledger), call site by call site

Every command takes --version and --help. The rewriter: {commands.MIGRATE} --help
"""


#: ``run``'s own options that take a value: the token after them is not the script
_RUN_VALUE_OPTIONS = ("--route", "--ledger")


def _asks_version(cmd: str, rest: list[str]) -> bool:
    """``--version`` among the command's own options (for ``run``: before the script, whose
    own arguments are never looked at)."""
    if cmd != "run":
        return "--version" in rest
    skip = False
    for token in rest:
        if skip:
            skip = False
        elif token == "--version":
            return True
        elif token == "--" or not token.startswith("-") or (token.startswith("-m") and not token.startswith("--")):
            return False  # the script's or the module's own arguments follow
        elif token in _RUN_VALUE_OPTIONS:
            skip = True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] in ("--version", "-V"):
        print(commands.version())
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd in COMMANDS and _asks_version(cmd, rest):
        print(commands.version())
        return 0
    if cmd == "run":
        from compat.tools.runner import main as run_main

        return run_main(rest)
    if cmd == "report":
        from compat.tools.report import main as report_main

        return report_main(rest)
    if cmd == "check":
        from compat.tools.check import main as check_main

        return check_main(rest)
    if cmd == "convert-opset":
        from compat.tools.convert_opset import main as convert_main

        return convert_main(rest)
    if cmd == "verify-migration":
        from compat.tools.verify_migration import main as verify_main

        return verify_main(rest)
    if cmd == "catalog":
        return _catalog(rest)
    if cmd == "rule":
        return _rule(rest)
    print(f"{commands.PREFIX}: unknown command {cmd!r}\n\n{usage()}", file=sys.stderr)
    return 2


def _catalog(argv: list[str]) -> int:
    from compat import catalog

    p = argparse.ArgumentParser(prog=commands.CATALOG, description="The legacy usages compat knows.")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    commands.add_version(p)
    ns = commands.parse_args(p, argv)
    if isinstance(ns, int):
        return ns
    if ns.format == "json":
        sys.stdout.write(json.dumps(catalog.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(catalog.to_markdown() if ns.format == "markdown" else catalog.to_text())
    return 0


def _rule(argv: list[str]) -> int:
    from compat import catalog

    p = argparse.ArgumentParser(prog=commands.RULE, description="Explain one rule (ONX code).")
    p.add_argument("code", metavar="CODE", help="a rule code, e.g. ONX101")
    p.add_argument("--format", choices=("text", "json"), default="text")
    commands.add_version(p)
    ns = commands.parse_args(p, argv)
    if isinstance(ns, int):
        return ns
    code = ns.code.upper()
    if code not in catalog.BY_CODE:
        near = [c for c in catalog.BY_CODE if c.startswith(code)] if catalog.is_code_prefix(code) else []
        hint = f" (rules starting with {code}: {', '.join(near)})" if near else ""
        print(f"{commands.RULE}: error: unknown rule {ns.code!r}{hint}; every rule: {commands.CATALOG}",
              file=sys.stderr)
        return 2
    if ns.format == "json":
        sys.stdout.write(json.dumps(catalog.to_dict(catalog.get(code)), indent=2) + "\n")
    else:
        sys.stdout.write(catalog.rule_page(code))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
