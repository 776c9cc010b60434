"""``compat report --format html`` over ledgers written by real exports, rendered by headless
Chromium: the page's text and the bars its charts draw."""

from __future__ import annotations

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from scale_models import TorchScriptOnly, mlp

import compat
from compat.records import ledger
from compat.tools import report
from compat.tools.parity import compare

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (Debian: apt-get install chromium; "
    ".ci/run installs it where apt is available)")


def _export(model, args, path, **options) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compat.export(model, args, str(path), **options)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three runs of one project, oldest first: the migration moves calls to torch.export."""
    tmp = tmp_path_factory.mktemp("runs")
    paths = [tmp / "run-1.jsonl", tmp / "run-2.jsonl", tmp / "run-3.jsonl"]
    x = torch.randn(2, 4)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_ONNX_COMPAT_CACHE_DIR", str(tmp / "cache"))
        mp.delenv("TORCH_ONNX_COMPAT_ROUTE", raising=False)
        mp.setenv("TORCH_ONNX_COMPAT_LEDGER", str(paths[0]))
        _export(TorchScriptOnly(), (torch.randn(2, 3),), tmp / "dd.onnx")  # fallback
        _export(mlp(), (x,), tmp / "a.onnx", route="legacy", input_names=["x"], dynamic_axes={"x": [0]})
        _export(mlp(), (x,), tmp / "functions.onnx", export_modules_as_functions=True)
        mp.setenv("TORCH_ONNX_COMPAT_LEDGER", str(paths[1]))
        _export(TorchScriptOnly(), (torch.randn(2, 3),), tmp / "dd.onnx")  # remembered fallback
        _export(mlp(), (x,), tmp / "b.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        with pytest.raises(compat.ExportFailed):
            _export(TorchScriptOnly(), (torch.randn(2, 3),), tmp / "never.onnx", route="dynamo")
        mp.setenv("TORCH_ONNX_COMPAT_LEDGER", str(paths[2]))
        _export(mlp(), (x,), tmp / "c.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        _export(mlp(), (x,), tmp / "d.onnx", dynamo=True)
    (last,) = [r for r in ledger.read([paths[2]]) if r.get("warnings")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parity = compare(TorchScriptOnly(), (torch.randn(2, 3),), latency_runs=0).summary()
    ledger.append(paths[2], {**last, "call_site": "train.py:9", "parity": parity})
    return paths


def _html(runs: list[Path], out: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    probe = ("import sys; from compat.__main__ import main; rc = main(sys.argv[1:]); "
             "assert 'torch' not in sys.modules, 'report imported torch'; raise SystemExit(rc)")
    run = subprocess.run([sys.executable, "-c", probe, "report", "--format", "html", "-o", str(out),
                          *map(str, runs)], capture_output=True, text=True, env=env, timeout=600,
                         check=False)
    assert run.returncode == 0, run.stderr
    return out.read_text(encoding="utf-8")


def test_page_is_self_contained(runs: list[Path], tmp_path: Path) -> None:
    page = _html(runs, tmp_path / "report.html")
    assert page.startswith("<!DOCTYPE html>")
    for fetching in ("<script", "<link", "<img", "<iframe", "@import", "url("):
        assert fetching not in page, fetching
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    data = report.build(ledger.read(runs), [str(p) for p in runs])
    assert data["calls"] == 9 and data["by_route"] == {"legacy": 4, "dynamo": 4, "failed": 1}
    (dd,) = [g for g in data["fallbacks"]["by_reason"] if g["reason"] == "torch.export failed (NotImplementedError)"]
    assert dd["calls"] == 2 and dd["model_lines"] and dd["model_lines"][0].startswith("scale_models.py:")
    codes = {t["code"] for t in data["translations"]}
    assert "ONX101" in codes


class _Dom(html.parser.HTMLParser):
    """The rendered page's bars (``<rect data-chart>``) and visible text."""

    def __init__(self) -> None:
        super().__init__()
        self.bars: list[dict[str, str]] = []
        self.links: list[tuple[str, str]] = []
        self.text: list[str] = []
        self._skip = 0
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "rect" and "data-chart" in a:
            self.bars.append(a)
        if tag in ("style", "title"):
            self._skip += 1
        if tag == "a":
            self._href = a.get("href", "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "title"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)
            if self._href is not None and data.strip():
                self.links.append((data.strip(), self._href))
                self._href = None


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=600, check=False)


@needs_chromium
def test_rendered_page_text_and_bars(runs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    _html(runs, out)
    run = _chromium("--dump-dom", out.as_uri(), profile=tmp_path / "profile")
    assert run.returncode == 0 and "<svg" in run.stdout, run.stderr[-2000:]
    dom = _Dom()
    dom.feed(run.stdout)
    text = " ".join(" ".join(dom.text).split())
    assert "torch.onnx export migration report" in text
    assert "9 export call(s) from 3 ledger(s)" in text
    for heading in ("Route shares", "Progress across runs", "Fallbacks to the TorchScript route, by cause",
                    "Call sites still on the TorchScript route", "Warnings and translations per code",
                    "Branches and values baked at the example's values", "Parity of the two routes",
                    "Failed exports"):
        assert heading in text, heading
    assert "torch.export failed (NotImplementedError)" in text and "one-route-only" in text

    def bars(chart: str) -> dict[str, int]:
        return {b["data-label"]: int(b["data-value"]) for b in dom.bars if b["data-chart"] == chart}

    assert bars("routes") == {"torch.export (dynamo)": 4, "TorchScript (legacy)": 4, "failed (failed)": 1}
    assert bars("fallbacks") == {"torch.export failed (NotImplementedError)": 2,
                                 "option only the TorchScript exporter honours (ONX106)": 1}
    assert bars("parity") == {"one-route-only": 1}
    assert bars("warnings")["ONX101 `dynamic_axes=`"] == 4
    progress = [(b["data-run"], b["data-label"], int(b["data-value"]))
                for b in dom.bars if b["data-chart"] == "progress"]
    assert progress == [("run-1.jsonl", "legacy", 3), ("run-2.jsonl", "dynamo", 1),
                        ("run-2.jsonl", "legacy", 1), ("run-2.jsonl", "failed", 1),
                        ("run-3.jsonl", "dynamo", 3)]
    # the TorchScript call sites are links whose text is file:line
    site_links = [(t, h) for t, h in dom.links if t.startswith(__file__ + ":")]
    assert site_links and all(h.startswith("file://") and "#L" in h for _, h in site_links)
    assert all(t.rsplit(":", 1)[1].isdigit() for t, _ in site_links)


@needs_chromium
def test_screenshot_renders(runs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    _html(runs, out)
    png = tmp_path / "shot.png"
    run = _chromium(f"--screenshot={png}", "--window-size=1100,900", "--hide-scrollbars", out.as_uri(),
                    profile=tmp_path / "profile")
    assert run.returncode == 0, run.stderr[-2000:]
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000  # a page with charts, not a blank one


_MEASURE = """<script>
for (const t of document.querySelectorAll('svg text')) {
  const box = t.getBBox(), svg = t.ownerSVGElement.getBoundingClientRect();
  t.setAttribute('data-left', box.x.toFixed(1));
  t.setAttribute('data-right', (box.x + box.width).toFixed(1));
}
for (const c of document.querySelectorAll('code, td')) {
  const s = getComputedStyle(c);
  c.setAttribute('data-break', s.wordBreak + ' ' + s.overflowWrap);
}
</script>"""


@needs_chromium
def test_rendered_progress_by_date_labels_whole_no_mid_word_breaks(runs: list[Path], tmp_path: Path) -> None:
    dated = []
    for day, path in zip(("2026-10-01", "2026-10-08", "2026-10-15"), runs):
        copy = tmp_path / path.name
        recs = list(ledger.read([path]))
        if path == runs[0]:  # a call that also registered a custom symbolic: the longest label
            recs.append({**recs[-1], "call_site": "symbolics.py:3", "warnings": ["ONX301"]})
        copy.write_text("".join(json.dumps({**r, "recorded_at": f"{day}T03:00:00+00:00"}) + "\n" for r in recs))
        dated.append(copy)
    out = tmp_path / "report.html"
    _html(dated[::-1], out)  # newest first on the command line
    page = out.read_text(encoding="utf-8")
    assert "oldest first by the date of its records" in page and "in the order given" not in page
    measured = tmp_path / "measured.html"
    measured.write_text(page.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    run = _chromium("--dump-dom", measured.as_uri(), profile=tmp_path / "profile")
    assert run.returncode == 0 and "data-left" in run.stdout, run.stderr[-2000:]
    dom = _Dom()
    dom.feed(run.stdout)
    progress = [(b["data-run"], b["data-label"]) for b in dom.bars if b["data-chart"] == "progress"]
    assert [r for r, _ in progress][0] == "run-1.jsonl" and [r for r, _ in progress][-1] == "run-3.jsonl"
    burn = [(b["data-label"], int(b["data-value"])) for b in dom.bars if b["data-chart"] == "burn-down"]
    assert [label for label, _ in burn] == ["2026-10-01 03:00 run-1.jsonl", "2026-10-08 03:00 run-2.jsonl",
                                            "2026-10-15 03:00 run-3.jsonl"]
    states = {(b["data-run"], b["data-label"]): int(b["data-value"]) for b in dom.bars
              if b["data-chart"] == "call-sites"}
    assert states and all(s in ("finished", "finished_post_step", "pinned", "on_shim") for _, s in states)
    # every chart label starts inside the chart (an ONX code is never clipped to "NX301")
    lefts = [float(v) for v in re.findall(r'data-left="(-?[\d.]+)"', run.stdout)]
    assert lefts and min(lefts) >= 0
    # the labels of the warnings chart start with their whole code
    labels = re.findall(r'<text[^>]*data-left="[^"]*"[^>]*>(ONX\d{3}[^<]*)<title>', run.stdout)
    assert any(t.startswith("ONX301 ") for t in labels)
    # table cells and code wrap between words (long paths anywhere), never break-all mid-word
    breaks = set(re.findall(r'data-break="([^"]+)"', run.stdout))
    assert breaks and not any(b.startswith("break-all") for b in breaks)
