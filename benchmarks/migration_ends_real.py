"""Does real legacy export code migrate onto torch's new exporter? (issue 30, second "Done when").

Two real export helpers, each run as a new user would migrate it:

* transformers 4.27's ``export_pytorch`` (``tests/hf/fixtures/hf_convert_427.py``) on the 17 tiny
  models of ``tests/hf/fixtures/hf_zoo.py`` (one call site, 17 models);
* yolov5 7.0.14's ``export.py`` ``export_onnx`` (opset 12, named dynamic axes) on yolov5n built
  from its yaml without weights, with ``--dynamic`` and without (two records of the helper) (the wheel from ``benchmarks/results/real-code-wheels``, fetched
  like bench_migrate does). Its image, plotting and hub libraries (cv2, pandas, PIL, ...) are
  stand-ins that import as empty modules when not installed: the export path never calls them.

Workflow per project: the original code runs under the shim (``compat run --ledger OLD``), a copy
is migrated (``compat.migrate --write --unsafe-fixes --ledger OLD``), the migrated copy runs on
plain torch (``compat run --observe --ledger NEW``), then ``verify-migration OLD NEW``.
Printed per project: the export call sites finished on plain torch (with / without a post-step),
pinned to ``dynamo=False``, left on ``compat.export`` (with migrate's reason), and the exported
models verify-migration calls "same". No asserts.

``python benchmarks/migration_ends_real.py [--only hf|yolov5] [--models NAME ...]``
(``make bench-migration-ends``; several minutes on 2 cores, so not a ``bench_*.py`` that
``make bench`` / run_all runs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HF_FIXTURES = ROOT / "tests" / "hf" / "fixtures"
WHEELS = ROOT / "benchmarks" / "results" / "real-code-wheels"
YOLOV5 = "yolov5==7.0.14"
_COUNTS = re.compile(r"Export calls: (\d+) finished, (\d+) finished with a post-step, (\d+) pinned, "
                     r"(\d+) left on the shim")
_PINNED = re.compile(r"^  pinned \((\d+)\): (.*)$", re.MULTILINE)

HF_DRIVER = '''\
"""Export hf_zoo models with the 4.27 export_pytorch: python export_all.py OUTDIR NAME..."""
import sys
from pathlib import Path

import hf_zoo

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for name in sys.argv[2:]:
    hf_zoo.export(name, str(out / f"{name}.onnx"))
'''

#: yolov5's export.run() in short: a Detect head in export mode, dynamic axes, opset 12
YOLO_DRIVER = '''\
"""python drive.py OUT.pt: yolov5n (random init) through yolov5's export_onnx, dynamic and static."""
import os
import sys
from pathlib import Path

import _stand_ins

_stand_ins.install()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from yolov5 import export  # noqa: E402
from yolov5.models.yolo import Detect, DetectionModel  # noqa: E402

out = Path(sys.argv[1])
out.parent.mkdir(parents=True, exist_ok=True)
for dynamic in (True, False):  # export.py --dynamic, and without
    torch.manual_seed(0)
    model = DetectionModel(os.path.join(os.path.dirname(export.__file__), "models", "yolov5n.yaml")).eval()
    for m in model.modules():
        if isinstance(m, Detect):
            m.inplace, m.dynamic, m.export = False, dynamic, True
    im = torch.zeros(1, 3, 64, 64)
    model(im)  # dry run, as export.run does
    export.export_onnx(model, im, out.with_name(f"{out.stem}-{'dynamic' if dynamic else 'static'}.pt"),
                       12, dynamic, False)
'''

STAND_INS = '''\
"""Empty stand-ins for libraries yolov5 imports but its export path never calls."""
import importlib.abc
import importlib.machinery
import sys
import types

NAMES = ("cv2", "pandas", "requests", "PIL", "matplotlib", "seaborn", "psutil", "thop",
         "ultralytics", "torchvision", "scipy", "IPython", "pkg_resources")


class Anything:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return Anything()

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Anything()

    def __iter__(self):
        return iter(())

    def __mro_entries__(self, bases):
        return (object,)

    def __bool__(self):
        return False


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Anything()


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top not in NAMES or importlib.machinery.PathFinder.find_spec(top) is not None:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        return _Module(spec.name)

    def exec_module(self, module):
        module.__path__ = []
        if module.__name__ == "pkg_resources":
            from packaging.version import parse

            module.parse_version = parse


def install():
    sys.meta_path.append(_Finder())
'''


def _python(args: list[str], cwd: Path, log: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as fh:
        subprocess.run([sys.executable, "-W", "ignore", *args], cwd=cwd, env=env, stdout=fh,
                       stderr=subprocess.STDOUT, check=False)
    return time.perf_counter() - start


def _migrate(tree: Path, ledger: Path, targets: list[str], log: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "compat.migrate", "--write", "--unsafe-fixes",
                           "--ledger", str(ledger), *targets], cwd=tree, env=env,
                          capture_output=True, text=True, check=False)
    log.write_text(done.stdout + done.stderr, encoding="utf-8")
    m = _COUNTS.search(done.stdout + done.stderr)
    if not m:
        return {"error": (done.stdout + done.stderr)[-500:]}
    why = "; ".join(f"{n}: {text}" for n, text in _PINNED.findall(done.stdout + done.stderr))
    return {"finished": int(m[1]), "post_step": int(m[2]), "pinned": int(m[3]),
            "pinned_why": why, "left_on_shim": int(m[4])}


def _shim_reasons(text: str) -> list[str]:
    """The comments migrate wrote above calls it left on compat.export."""
    out, current = [], None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("# compat.migrate: compat.export because"):
            current = s.removeprefix("# compat.migrate: ")
            out.append(current)
        elif current is not None and s.startswith("#  "):
            out[-1] += " " + s.lstrip("# ")
        else:
            current = None
    return out


def run_project(name: str, old: Path, argv: list[str], targets: list[str], work: Path) -> dict:
    """The workflow on the tree ``old`` (a copy is migrated); ``argv`` runs its driver, with
    ``{out}`` the output folder."""
    from compat.tools.verify_migration import PASSING, summary, verify

    (old / "pyproject.toml").write_text(f"[project]\nname = '{name}'\nversion = '0'\n")
    ledger_old, ledger_new = work / f"{name}-old.jsonl", work / f"{name}-new.jsonl"
    fill = [a.replace("{out}", str(work / f"{name}-out-old")) for a in argv]
    t_old = _python(["-m", "compat", "run", "-q", "--ledger", str(ledger_old), *fill], old,
                    work / f"{name}-old.log")
    mig = work / f"{name}-mig"
    shutil.copytree(old, mig)
    counts = _migrate(mig, ledger_old, targets, work / f"{name}-migrate.log")
    fill = [a.replace("{out}", str(work / f"{name}-out-new")) for a in argv]
    t_new = _python(["-m", "compat", "run", "-q", "--observe", "--ledger", str(ledger_new), *fill],
                    mig, work / f"{name}-new.log")
    rows = verify(str(ledger_old), str(ledger_new)) if ledger_old.is_file() else []
    text = "".join((mig / t).read_text(encoding="utf-8") for t in targets)
    return {"project": name, **counts, "shim_reasons": _shim_reasons(text),
            "models": len(rows), "same": sum(r.verdict in PASSING for r in rows),
            "verdicts": summary(rows),
            "differing": [f"{r.model}: {r.verdict}: {'; '.join(r.differences)[:300]}"
                          for r in rows if r.verdict not in PASSING],
            "seconds_shim": round(t_old, 1), "seconds_migrated": round(t_new, 1)}


def hf(work: Path, models: list[str]) -> dict:
    old = work / "hf-old"
    old.mkdir()
    for f in ("hf_convert_427.py", "hf_zoo.py"):
        shutil.copy(HF_FIXTURES / f, old / f)
    (old / "export_all.py").write_text(HF_DRIVER, encoding="utf-8")
    return run_project("hf", old, ["export_all.py", "{out}", *models], ["hf_convert_427.py"], work)


def _yolov5_wheel() -> Path | None:
    found = sorted(WHEELS.glob("yolov5-*.whl"))
    if not found:
        WHEELS.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d",
                        str(WHEELS), YOLOV5], capture_output=True, check=False)
        found = sorted(WHEELS.glob("yolov5-*.whl"))
    return found[0] if found else None


def yolov5(work: Path) -> dict | None:
    wheel = _yolov5_wheel()
    if wheel is None:
        return None
    old = work / "yolov5-old"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(old, [m for m in zf.namelist() if m.startswith("yolov5/")])
    (old / "_stand_ins.py").write_text(STAND_INS, encoding="utf-8")
    (old / "drive.py").write_text(YOLO_DRIVER, encoding="utf-8")
    return run_project("yolov5", old, ["drive.py", "{out}/yolov5n.pt"], ["yolov5/export.py"], work)


def _print(result: dict) -> None:
    if "error" in result:
        print(f"{result['project']}: migrate failed: {result['error']}")
        return
    sites = result["finished"] + result["post_step"] + result["pinned"] + result["left_on_shim"]
    print(f"{result['project']}: export call sites {sites}: finished {result['finished']}, "
          f"finished with a post-step {result['post_step']}, pinned {result['pinned']}"
          f"{' (' + result['pinned_why'] + ')' if result['pinned_why'] else ''}, "
          f"left on the shim {result['left_on_shim']}")
    print(f"  verify-migration: {result['same']}/{result['models']} models same "
          f"{result['verdicts']} (shim run {result['seconds_shim']} s, migrated run "
          f"{result['seconds_migrated']} s)")
    for why in result["shim_reasons"]:
        print(f"  left on the shim: {why}")
    for d in result["differing"]:
        print(f"  not same: {d}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("hf", "yolov5"))
    parser.add_argument("--models", nargs="+", help="hf_zoo models (default: all 17)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (printed)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HF_FIXTURES))
    import hf_zoo

    work = Path(tempfile.mkdtemp(prefix="migration-ends-"))
    results = []
    try:
        if args.only in (None, "hf"):
            results.append(hf(work, args.models or list(hf_zoo.SPECS)))
            _print(results[-1])
        if args.only in (None, "yolov5"):
            found = yolov5(work)
            if found is None:
                print(f"yolov5: skipped ({YOLOV5} wheel not available)")
            else:
                results.append(found)
                _print(found)
    finally:
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
