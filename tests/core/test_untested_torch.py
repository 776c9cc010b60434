"""The declared torch range, the tested range and the warning on a torch outside it agree."""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from compat.errors import UntestedTorchWarning
from compat.installed import runtime_extra, torch_caps

ROOT = Path(__file__).resolve().parents[2]


def _declared_torch() -> SpecifierSet:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (torch_req,) = [r for r in extra["runtime"] if re.match(r"torch\b", r)]
    return SpecifierSet(torch_req.removeprefix("torch"))


def test_runtime_extra_declares_exactly_the_tested_range():
    low, high = (Version(v) for v in torch_caps.TESTED_TORCH)
    spec = _declared_torch()
    assert f"{low}.0" in spec and f"{high}.0" in spec and f"{high.major}.{high.minor}.9" in spec
    assert f"{high.major}.{high.minor + 1}.0" not in spec  # raised after the matrix passes there
    assert f"{low.major}.{low.minor - 1}.9" not in spec


def test_readme_matrix_lists_every_declared_minor():
    text = (ROOT / "README.md").read_text()
    matrix = text.split("## Version matrix", 1)[1].split("\n## ", 1)[0]
    low, high = (Version(v) for v in torch_caps.TESTED_TORCH)
    for minor in range(low.minor, high.minor + 1):
        assert re.search(rf"^\| {low.major}\.{minor}\.\d+ ", matrix, re.M), f"no row for {low.major}.{minor}"


@pytest.mark.parametrize(("version", "says"), [
    ("2.8.0", "below the tested range"),
    ("2.16.0", "newer than the tested range"),
])
def test_a_torch_outside_the_range_is_named(monkeypatch, version, says):
    monkeypatch.setattr(torch_caps, "torch_version", lambda: Version(version))
    reason = torch_caps.untested_torch()
    assert reason is not None and says in reason
    with pytest.warns(UntestedTorchWarning, match=says):
        assert runtime_extra.warn_if_untested_torch()


@pytest.mark.parametrize("version", ["2.9.0", "2.9.1", "2.10.0", "2.12.1", "2.13.0", "2.15.0", "2.15.3"])
def test_a_tested_torch_is_not_warned_about(monkeypatch, version):
    monkeypatch.setattr(torch_caps, "torch_version", lambda: Version(version))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UntestedTorchWarning)
        assert not runtime_extra.warn_if_untested_torch()
