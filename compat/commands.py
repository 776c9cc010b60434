"""How this project's commands are invoked: ``python -m compat ...`` in a checkout,
``python -m torch_onnx_compat ...`` when installed from the wheel (hatch_build.py). Hints and
usage lines take them from here, so they work as printed in both."""

from __future__ import annotations

PACKAGE = __package__ or "compat"
RUN = f"python -m {PACKAGE} run"
REPORT = f"python -m {PACKAGE} report"
CATALOG = f"python -m {PACKAGE} catalog"
MIGRATE = f"python -m {PACKAGE}.migrate"
