"""Where the real symbolics' source comes from: pinned wheels, downloaded and read, not installed.

``requirements-symbolic-sources.txt`` pins the wheels (mmcv-lite, mmdeploy). ``fetch()`` runs
``pip download --no-deps`` into the cache folder (``TORCH_ONNX_COMPAT_SYMBOLIC_SOURCES``, else
``.venv/symbolic-sources``) and unpacks the Python files. ``load(module)`` imports one module of
them (``mmcv.ops.roi_align``) as it is written, without its package's ``__init__`` (which
pulls in mmengine, cv2, compiled extensions): the few framework names those modules import are
small stand-ins here (``_stand_ins``), the symbolics themselves run unchanged.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements-symbolic-sources.txt"
#: the top-level package each pinned distribution carries
PACKAGES = {"mmcv-lite": "mmcv", "mmdeploy": "mmdeploy"}


class SourceMissing(RuntimeError):
    """A pinned wheel is not downloaded (and could not be): cases from it are skipped."""


def cache_dir() -> Path:
    env = os.environ.get("TORCH_ONNX_COMPAT_SYMBOLIC_SOURCES")
    return Path(env) if env else ROOT / ".venv" / "symbolic-sources"


def pins() -> dict[str, str]:
    out = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[name.strip()] = version.strip()
    return out


def _tree(dist: str) -> Path:
    return cache_dir() / f"{dist}-{pins()[dist]}"


def fetch(download: bool = True) -> dict[str, str]:
    """Download and unpack each pinned wheel not there yet; {dist: why missing} for failures."""
    missing = {}
    for dist, version in pins().items():
        tree = _tree(dist)
        if (tree / ".complete").exists():
            continue
        if not download:
            missing[dist] = f"{dist}=={version} not downloaded (make symbolic-sources)"
            continue
        wheels = cache_dir() / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels),
             f"{dist}=={version}"], capture_output=True, text=True, timeout=600, check=False)
        stem = dist.replace("-", "_") + f"-{version}-"
        wheel = next((w for w in wheels.glob("*.whl") if w.name.startswith(stem)), None)
        if wheel is None:
            missing[dist] = f"pip download {dist}=={version} failed: {proc.stderr.strip()[-300:]}"
            continue
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist()
                       if m.startswith(PACKAGES[dist] + "/") and m.endswith(".py")]
            zf.extractall(tree, members)
        (tree / ".complete").write_text(wheel.name)
    return missing


def available(dist: str) -> bool:
    return (_tree(dist) / ".complete").exists()


def load(module: str) -> types.ModuleType:
    """Import ``module`` (e.g. ``mmdeploy.pytorch.symbolics.gelu``) from the unpacked wheel."""
    top = module.split(".", 1)[0]
    dist = next(d for d, p in PACKAGES.items() if p == top)
    if not available(dist):
        raise SourceMissing(f"{dist}=={pins()[dist]} is not downloaded (make symbolic-sources)")
    from . import _stand_ins

    _stand_ins.install(top, _tree(dist) / top)
    parts = module.split(".")
    for k in range(2, len(parts)):  # packages on the way: their path, not their __init__
        name = ".".join(parts[:k])
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = [str(_tree(dist).joinpath(*parts[:k]))]
            sys.modules[name] = pkg
            setattr(sys.modules[".".join(parts[:k - 1])], parts[k - 1], pkg)
    return importlib.import_module(module)


if __name__ == "__main__":  # make symbolic-sources
    failed = fetch()
    for why in failed.values():
        print(f"symbolic sources: {why}", file=sys.stderr)
    print(f"symbolic sources in {cache_dir()}: {', '.join(d for d in pins() if available(d)) or 'none'}")
