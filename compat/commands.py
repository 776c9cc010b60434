"""How this project's commands are invoked, as the user typed them: the console scripts
(``torch-onnx-compat ...``, ``torch-onnx-migrate``) when the process was started through one,
else ``python -m compat ...`` in a checkout or ``python -m torch_onnx_compat ...`` when installed
from the wheel (hatch_build.py). Hints and usage lines take them from here, so they work as
printed."""

from __future__ import annotations

import argparse
import os
import sys

PACKAGE = __package__ or "compat"
#: the console scripts pyproject.toml declares
SCRIPT = "torch-onnx-compat"
MIGRATE_SCRIPT = "torch-onnx-migrate"


def _started_as() -> str:
    """The name of the program this process was started as (``torch-onnx-compat``, ...)."""
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""


def _prefix() -> str:
    name = _started_as()
    if name in (SCRIPT, MIGRATE_SCRIPT):
        return SCRIPT
    # ``python -m torch_onnx_compat`` of an editable install runs the checkout's ``compat``
    folder = os.path.basename(os.path.dirname(sys.argv[0])) if name else ""
    if name in ("__main__.py", "migrate.py") and folder in ("compat", "torch_onnx_compat"):
        return f"python -m {folder}"
    return f"python -m {PACKAGE}"


#: what the user types before a subcommand: ``torch-onnx-compat`` or ``python -m compat``
PREFIX = _prefix()
RUN = f"{PREFIX} run"
REPORT = f"{PREFIX} report"
CATALOG = f"{PREFIX} catalog"
RULE = f"{PREFIX} rule"
CHECK = f"{PREFIX} check"
CONVERT_OPSET = f"{PREFIX} convert-opset"
VERIFY_MIGRATION = f"{PREFIX} verify-migration"
MIGRATE = MIGRATE_SCRIPT if PREFIX == SCRIPT else f"{PREFIX}.migrate"


def version() -> str:
    """``torch-onnx-compat 0.1.0`` (the distribution's name and version)."""
    from compat import __version__

    return f"torch-onnx-compat {__version__}"


def add_version(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` a ``--version`` option that prints ``version()``."""
    parser.add_argument("--version", action="version", version=version())


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace | int:
    """``parser``'s namespace for ``argv`` (``sys.argv[1:]`` when None), or the exit status of a
    parse that ended (0 for ``--help``/``--version``, 2 for a usage error)."""
    try:
        return parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
