"""Run several export scripts in one interpreter (torch imported once), each with its own ledger.

``python -m compat run [--observe] --ledger DEFAULT run_scripts.py SPEC.json``: SPEC is a JSON
list of ``{"script", "argv", "ledger"}``; each script runs as ``python script ARGV...`` would run
it as ``__main__`` (its folder first on ``sys.path``), its exports recorded in its own ledger
(``TORCH_ONNX_COMPAT_LEDGER``, which the shim and the observer read at each call). A script that
fails is reported on stderr and the next one runs. Exit status: the number of failed scripts.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)
    failed = 0
    for item in spec:
        script = item["script"]
        os.environ["TORCH_ONNX_COMPAT_LEDGER"] = item["ledger"]
        sys.argv = [script, *item["argv"]]
        sys.path.insert(0, os.path.dirname(script))
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                failed += 1
                print(f"run_scripts: {script} exited with {exc.code}", file=sys.stderr)
        except Exception:  # noqa: BLE001 - reported, and the next script runs
            failed += 1
            print(f"run_scripts: {script} failed:\n{traceback.format_exc()}", file=sys.stderr)
        finally:
            sys.path.remove(os.path.dirname(script))
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
