"""Route, strictness and the acceptance check: call argument > environment > nearest
pyproject.toml > default.

pyproject form::

    [tool.torch-onnx-compat]
    route = "auto"            # auto | dynamo | legacy
    strict = false
    acceptance_check = true   # check a torch.export-route model against eager torch first
    [tool.torch-onnx-compat.routes]   # per-module rules, fnmatch on module names
    "mypkg.tts.*" = "legacy"

A per-module rule matches the module of the calling code or of the model's class; the longest
matching pattern wins.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compat import files
from compat.errors import CompatValueError
from compat.request import ROUTES

ENV_ROUTE = "TORCH_ONNX_COMPAT_ROUTE"
ENV_STRICT = "TORCH_ONNX_COMPAT_STRICT"
ENV_LEDGER = "TORCH_ONNX_COMPAT_LEDGER"
ENV_CACHE_DIR = "TORCH_ONNX_COMPAT_CACHE_DIR"
ENV_COMPARE = "TORCH_ONNX_COMPAT_COMPARE"
#: ``0``: accept a torch.export-route model without checking it against eager torch and the
#: TorchScript exporter's interface (``compat.routing.acceptance``)
ENV_ACCEPTANCE_CHECK = "TORCH_ONNX_COMPAT_ACCEPTANCE_CHECK"
#: ``1``: legacy-usage warnings and strict-mode errors give the long text (``compat run --explain``)
ENV_EXPLAIN = "TORCH_ONNX_COMPAT_EXPLAIN"
#: ``1``: what torch warns and logs during a route attempt reaches the terminal (``compat run -v``)
ENV_VERBOSE = "TORCH_ONNX_COMPAT_VERBOSE"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class ProjectConfig:
    route: str | None = None
    strict: bool | None = None
    routes: dict[str, str] = field(default_factory=dict)
    acceptance_check: bool | None = None
    path: str | None = None


def env_route() -> str | None:
    value = os.environ.get(ENV_ROUTE)
    if value is None or value.strip() == "":
        return None
    value = value.strip().lower()
    if value not in ROUTES:
        raise CompatValueError(f"{ENV_ROUTE} must be one of {', '.join(ROUTES)}, got {value!r}")
    return value


def env_strict() -> bool | None:
    return _env_bool(ENV_STRICT)


def env_acceptance_check() -> bool | None:
    return _env_bool(ENV_ACCEPTANCE_CHECK)


def _env_bool(name: str) -> bool | None:
    value = os.environ.get(name)
    if value is None:
        return None
    low = value.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise CompatValueError(f"{name} must be 1 or 0, got {value!r}")


def env_compare() -> bool:
    """``TORCH_ONNX_COMPAT_COMPARE`` (set by ``compat run --compare``)."""
    return os.environ.get(ENV_COMPARE, "").strip().lower() in _TRUE


def env_explain() -> bool:
    """``TORCH_ONNX_COMPAT_EXPLAIN`` (set by ``compat run --explain``)."""
    return os.environ.get(ENV_EXPLAIN, "").strip().lower() in _TRUE


def env_verbose() -> bool:
    """``TORCH_ONNX_COMPAT_VERBOSE`` (set by ``compat run -v``)."""
    return os.environ.get(ENV_VERBOSE, "").strip().lower() in _TRUE


def env_ledger() -> str | None:
    return os.environ.get(ENV_LEDGER) or None


@functools.lru_cache(maxsize=256)
def find_pyproject(start: str) -> str | None:
    """The nearest pyproject.toml at or above ``start`` (a folder); looked up once per folder
    and process (its content is re-read when it changes)."""
    return files.find_pyproject(start)


def load_project(start: str) -> ProjectConfig:
    path = find_pyproject(start)
    if path is None:
        return ProjectConfig()
    try:
        mtime = os.stat(path).st_mtime_ns
    except FileNotFoundError:  # removed since it was found: look again
        find_pyproject.cache_clear()
        return load_project(start)
    except OSError as exc:
        raise CompatValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _load_cached(path, mtime)


#: keys of ``[tool.torch-onnx-compat]``; ``migrate`` is the rewriter's table (migration/cli.py)
PROJECT_KEYS = ("route", "strict", "routes", "migrate", "acceptance_check")


def _toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the ``tomli`` dependency of the distribution on Python 3.10
        import tomli as tomllib
    return tomllib


def read_pyproject(path: str) -> dict[str, Any]:
    """The parsed ``path``; CompatValueError naming the file when it is unreadable, not UTF-8
    or not TOML (also used by ``compat.migrate`` for its own table)."""
    tomllib = _toml()
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CompatValueError(f"{path}: not UTF-8 text (byte {exc.start}): {exc.reason}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CompatValueError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise CompatValueError(f"{path}: cannot read: {exc.strerror or exc}") from None


def project_section(data: dict[str, Any], path: str) -> dict[str, Any]:
    """``[tool.torch-onnx-compat]`` of parsed ``data`` ({} when absent), checked to be a table."""
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise CompatValueError(f"{path}: `tool` must be a table, got {type(tool).__name__}")
    section = tool.get("torch-onnx-compat", {})
    if not isinstance(section, dict):
        raise CompatValueError(
            f"{path}: [tool.torch-onnx-compat] must be a table, got {type(section).__name__}")
    return section


@functools.lru_cache(maxsize=64)
def _load_cached(path: str, _mtime: int) -> ProjectConfig:
    section = project_section(read_pyproject(path), path)
    unknown = [key for key in section if key not in PROJECT_KEYS]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, PROJECT_KEYS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(PROJECT_KEYS)})"
        raise CompatValueError(f"{path}: unknown key {key!r} in [tool.torch-onnx-compat]{hint}")
    route = section.get("route")
    if route is not None and route not in ROUTES:
        raise CompatValueError(f"{path}: [tool.torch-onnx-compat] route must be one of {ROUTES}, got {route!r}")
    strict = section.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise CompatValueError(f"{path}: [tool.torch-onnx-compat] strict must be true or false, got {strict!r}")
    acceptance = section.get("acceptance_check")
    if acceptance is not None and not isinstance(acceptance, bool):
        raise CompatValueError(
            f"{path}: [tool.torch-onnx-compat] acceptance_check must be true or false, got {acceptance!r}")
    routes = section.get("routes", {})
    if not isinstance(routes, dict):
        raise CompatValueError(f"{path}: [tool.torch-onnx-compat.routes] must be a table of "
                               f"pattern = route, got {routes!r}")
    for pattern, r in routes.items():
        if r not in ROUTES:
            raise CompatValueError(f"{path}: [tool.torch-onnx-compat.routes] {pattern!r} = {r!r} is not a route")
    return ProjectConfig(route=route, strict=strict, routes=dict(routes), path=path,
                         acceptance_check=acceptance)


def _start_folder(call_site: str) -> str:
    """The calling script's folder, where its project's pyproject is looked up; the working
    folder for code without a file (``<stdin>``, ``exec``)."""
    filename = call_site.rsplit(":", 1)[0]
    if filename and not filename.startswith("<"):
        folder = _script_folder(filename) if os.path.isabs(filename) else _folder_of_file(filename)
        if folder is not None:
            return folder
    return os.getcwd()


@functools.lru_cache(maxsize=256)
def _script_folder(filename: str) -> str | None:
    """``_folder_of_file`` of an absolute path, once per process: each export call looks its
    settings up two or three times, and a stat per lookup was a measurable part of a small
    export's overhead (a script that calls exists while it runs)."""
    return _folder_of_file(filename)


def _folder_of_file(filename: str) -> str | None:
    return os.path.dirname(os.path.abspath(filename)) if os.path.exists(filename) else None


def resolve_route(
    call_route: str | None, call_site: str, modules: tuple[str, ...] = ()
) -> tuple[str, str]:
    """(route, where it came from): ``call``, ``env``, ``pyproject``, ``pyproject-rule`` or ``default``."""
    if call_route is not None:
        return call_route, "call"
    env = env_route()
    if env is not None:
        return env, "env"
    project = load_project(_start_folder(call_site))
    best: tuple[int, str] | None = None
    for pattern, route in project.routes.items():
        matches = any(fnmatch.fnmatchcase(m, pattern) for m in modules if m)
        if matches and (best is None or len(pattern) > best[0]):
            best = (len(pattern), route)
    if best is not None:
        return best[1], "pyproject-rule"
    if project.route is not None:
        return project.route, "pyproject"
    return "auto", "default"


def resolve_strict(call_strict: bool | None, call_site: str) -> bool:
    return _resolve_bool(call_strict, env_strict, "strict", call_site, default=False)


def resolve_acceptance_check(call_check: bool | None, call_site: str) -> bool:
    """Whether a torch.export-route model is checked before it is accepted (default: yes)."""
    return _resolve_bool(call_check, env_acceptance_check, "acceptance_check", call_site, default=True)


def _resolve_bool(call: bool | None, env: Callable[[], bool | None], key: str, call_site: str,
                  default: bool) -> bool:
    """The call's setting, else the environment's, else the nearest pyproject's, else ``default``."""
    if call is not None:
        return call
    from_env = env()
    if from_env is not None:
        return from_env
    project = getattr(load_project(_start_folder(call_site)), key)
    return default if project is None else bool(project)
