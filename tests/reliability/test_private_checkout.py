"""A fresh clone in a private folder (mode 0700, like a home directory, as ``mktemp -d`` makes)
passes the test that drops root to 'nobody' (issue 23): no test may depend on where the checkout
lives or who may enter it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import ROOT

INNER = ("tests/reliability/test_saving.py"
         "::test_writable_file_in_a_read_only_folder_is_written_in_place")

# pytest in the clone, then which code it ran: the checkout's own modules must not leak in (the
# venv's editable install points at the checkout; `python -c` puts the clone, the cwd, first)
RUN_INNER = """
import json, sys
import pytest
rc = pytest.main(sys.argv[1:])
import compat, rel_helpers
print(json.dumps({"compat": compat.__file__, "root": str(rel_helpers.ROOT)}))
raise SystemExit(rc)
"""


def _git_env(folder: Path) -> dict[str, str]:
    """git's environment: the checkout may belong to another user than the one running the tests
    (a mounted volume); git then refuses it unless it is a safe.directory, and a local clone's
    upload-pack reads that from the global configuration only, not from ``git -c``."""
    config = folder / "gitconfig"
    config.write_text(f"[safe]\n\tdirectory = {ROOT}\n\tdirectory = {ROOT / '.git'}\n")
    return {**os.environ, "GIT_CONFIG_GLOBAL": str(config)}


def _overlay_working_tree(clone: Path, env: dict[str, str]) -> None:
    """The clone gets the checkout's uncommitted state too, so it runs the tests as they are
    here (a clone alone holds only the last commit)."""
    changed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--modified", "--others", "--exclude-standard"],
        check=True, capture_output=True, text=True, timeout=600, env=env,
    ).stdout.split("\0")
    for rel in filter(None, dict.fromkeys(changed)):
        src, dst = ROOT / rel, clone / rel
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
            os.chmod(dst, stat.S_IMODE(os.stat(src).st_mode) & 0o700)  # private, as the clone's own
        elif not src.exists():  # deleted here
            dst.unlink(missing_ok=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_clone_in_a_private_folder_passes_the_privilege_drop_test(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout")
    private = tmp_path / "home"
    private.mkdir()
    os.chmod(private, 0o700)
    clone = private / "torch-onnx-compat"
    # umask 077: the clone's own files are private too, not only the folder above it
    git_env = _git_env(tmp_path)
    clone_cmd = 'umask 077 && exec git clone --quiet --local "$0" "$1"'
    subprocess.run(["sh", "-c", clone_cmd, str(ROOT), str(clone)], check=True,
                   capture_output=True, timeout=600, env=git_env)
    _overlay_working_tree(clone, git_env)
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(clone / "compat" / "api.py").st_mode) & 0o077 == 0

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    proc = subprocess.run(
        [sys.executable, "-c", RUN_INNER, "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--rootdir", str(clone), "--basetemp", str(tmp_path / "inner-tmp"), INNER],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    ran = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(ran["compat"]).is_relative_to(clone), ran
    assert Path(ran["root"]) == clone, ran
    if "1 skipped" in output:
        pytest.skip(f"the test skips in the clone too: {output[-500:]}")
    assert "1 passed" in output, output[-4000:]
