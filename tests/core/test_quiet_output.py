"""Quiet by default, complete on demand (issue 22 items 3 and 6, ``run -m``).

A torch 1.x-style call under ``compat run`` prints one line per legacy usage (code, option, the
short fix); torch's own warnings and log lines from a route attempt stay off the terminal unless
``-v``; strict mode ends with one error line; a call's ``dynamo=`` that overrides ``--route`` is
noted in the ledger and printed once per call site; ``-m module`` runs as ``python -m`` would.
"""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest
import warm_python  # tests/helpers: commands that import torch, forked warm
import torch

import compat
from compat import catalog
from compat.policy import notices, route_noise

LEGACY_SCRIPT = textwrap.dedent("""
    import sys
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)
            self.bn = torch.nn.BatchNorm1d(3)

        def forward(self, x):
            return torch.relu(self.bn(self.fc(x)))

    model = Net().eval()
    x = torch.randn(2, 4, requires_grad=True)  # as the tutorials wrote it
    y = model(x)
    torch.onnx.export(model, x, sys.argv[1], example_outputs=y, enable_onnx_checker=True,
                      opset_version=11, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                      training=torch.onnx.TrainingMode.EVAL, do_constant_folding=False)
""")
CALL_LINE = 17
CODES = ["ONX201", "ONX203", "ONX101", "ONX102", "ONX104", "ONX001"]


def run(args: list[str], cwd, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_ONNX_COMPAT_", "PYTHONWARNINGS"))}
    env.update(env_extra or {})
    return warm_python.run([sys.executable, "-m", "compat", "run", *args], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=600)


@pytest.fixture
def legacy_script(tmp_path):
    script = tmp_path / "old_export.py"
    script.write_text(LEGACY_SCRIPT)
    return script


def _torch_noise(err: str) -> list[str]:
    """Lines of torch's own logging format, or warnings shown from outside the script."""
    return [ln for ln in err.splitlines()
            if re.match(r"[WIE]\d{4} ", ln) or (re.search(r"\.py:\d+: \w*Warning:", ln)
                                                and "LegacyExportWarning" not in ln)]


def test_one_line_per_usage_and_no_torch_noise(legacy_script, tmp_path):
    book = tmp_path / "l.jsonl"
    out = run(["--compare", "--ledger", str(book), str(legacy_script), str(tmp_path / "m.onnx")], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stderr.splitlines()
    ours = [ln for ln in lines if "LegacyExportWarning" in ln]
    prefix = f"{legacy_script}:{CALL_LINE}: LegacyExportWarning: "
    assert [ln[len(prefix):].split()[0] for ln in ours] == CODES
    for ln, code in zip(ours, CODES):
        assert ln.startswith(prefix + code) and catalog.SHORT_FIXES[code] in ln
    # no source line under each warning, nothing of torch's, no warning from compat's modules
    assert not any(ln.lstrip().startswith("torch.onnx.export(") for ln in lines)
    assert _torch_noise(out.stderr) == [], out.stderr
    assert "torchvision is not installed" not in out.stderr
    assert "rule CODE" in out.stderr  # where the long texts are
    (record,) = [json.loads(line) for line in book.read_text().splitlines()]
    assert record["status"] == "ok" and record["warnings"] == CODES
    assert record["notes"] == []


def test_verbose_shows_what_torch_says(legacy_script, tmp_path):
    out = run(["-v", "-q", str(legacy_script), str(tmp_path / "m.onnx")], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    if importlib.util.find_spec("torchvision") is None:
        assert "torchvision is not installed" in out.stderr  # torch's registry log lines
    assert "torch-onnx-compat:" not in out.stderr  # -q: no summary


def test_strict_mode_ends_with_one_error_line(legacy_script, tmp_path):
    target = tmp_path / "m.onnx"
    out = run(["--strict", str(legacy_script), str(target)], tmp_path)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    last = out.stderr.rstrip("\n").splitlines()[-1]
    assert last.startswith(f"python -m compat run: error: {legacy_script}:{CALL_LINE}: "
                           "legacy torch.onnx usage (strict mode): ONX201 example_outputs=, ")
    assert all(code in last for code in CODES) and "--explain" in last
    assert not target.exists()


def test_strict_error_is_one_line_for_library_use(small_net, tmp_path, monkeypatch):
    with pytest.raises(compat.CompatError) as err:
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "m.onnx", strict=True,
                      do_constant_folding=False, example_outputs=None, training=torch.onnx.TrainingMode.EVAL)
    assert str(err.value) == ("legacy torch.onnx usage (strict mode): ONX104 do_constant_folding=, "
                              "ONX102 training=")
    monkeypatch.setenv("TORCH_ONNX_COMPAT_EXPLAIN", "1")
    with pytest.raises(compat.CompatError) as err:
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "m.onnx", strict=True,
                      do_constant_folding=False)
    # the real file, never a literal PATH; a compat.export call names no migrate command
    assert str(err.value).splitlines()[1].strip() == catalog.get("ONX104").message(
        __file__, applicability="none")
    monkeypatch.setenv("TORCH_ONNX_COMPAT_STRICT", "1")
    with pytest.raises(compat.CompatError) as err, compat.patch():
        torch.onnx.export(small_net, (torch.randn(2, 4),), str(tmp_path / "m.onnx"),
                          do_constant_folding=False)
    line = str(err.value).splitlines()[1].strip()
    assert line.endswith(f"--fix --select ONX001,ONX104 {__file__}") and "PATH" not in line


def test_run_module_with_a_route_note_once_per_site(tmp_path):
    (tmp_path / "exporter.py").write_text(textwrap.dedent("""
        import json, sys
        import torch
        print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__}))
        m = torch.nn.Linear(2, 2).eval()
        for i in range(2):
            torch.onnx.export(m, (torch.randn(1, 2),), f"a{i}.onnx", dynamo=False)
        torch.onnx.export(m, (torch.randn(1, 2),), "b.onnx", dynamo=True)  # agrees: no note
        sys.exit(int(sys.argv[-1]))
    """))
    book = tmp_path / "l.jsonl"
    # everything after the module is its own, --route included
    out = run(["--route", "dynamo", "--ledger", str(book), "-m", "exporter", "--route", "4"], tmp_path)
    assert out.returncode == 4, out.stderr[-3000:]
    info = json.loads(out.stdout.splitlines()[0])
    plain = warm_python.run([sys.executable, "-m", "exporter", "--route", "4"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert info == json.loads(plain.stdout.splitlines()[0])
    assert info["argv"] == [str(tmp_path / "exporter.py"), "--route", "4"]
    assert info["path0"] == str(tmp_path) and info["name"] == "__main__"

    note = ("call's dynamo=False overrides route=dynamo from TORCH_ONNX_COMPAT_ROUTE "
            "(compat run --route sets it)")
    printed = [ln for ln in out.stderr.splitlines() if "overrides" in ln]
    assert printed == [f"{tmp_path / 'exporter.py'}:7: torch-onnx-compat: {note}"]
    records = [json.loads(line) for line in book.read_text().splitlines()]
    assert [r["notes"] for r in records] == [[note], [note], []]
    assert [r["route_taken"] for r in records] == ["legacy", "legacy", "dynamo"]


def test_run_without_a_script_or_module_is_a_usage_error(tmp_path):
    out = run([], tmp_path)
    assert out.returncode == 2 and "script (or -m module)" in out.stderr
    assert out.stderr.startswith("usage: python -m compat run")
    out = run(["-m", "no_such_module_here"], tmp_path)
    assert out.returncode == 1 and "No module named 'no_such_module_here'" in out.stderr


def test_call_route_overriding_the_environment_is_noted(small_net, tmp_path, monkeypatch):
    book = tmp_path / "l.jsonl"
    monkeypatch.setenv("TORCH_ONNX_COMPAT_LEDGER", str(book))
    monkeypatch.setenv("TORCH_ONNX_COMPAT_ROUTE", "legacy")
    heard: list[tuple[str, str]] = []
    notices.set_note_listener(lambda site, note: heard.append((site, note)))
    try:
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "a.onnx", route="dynamo")
        compat.export(small_net, (torch.randn(2, 4),), tmp_path / "b.onnx", route="legacy")
    finally:
        notices.set_note_listener(None)
    first, second = [json.loads(line) for line in book.read_text().splitlines()]
    note = ("call's route='dynamo' overrides route=legacy from TORCH_ONNX_COMPAT_ROUTE "
            "(compat run --route sets it)")
    assert first["notes"][0] == note and first["route_taken"] == "dynamo"
    assert second["notes"] == []
    assert [n for _, n in heard] == [note]


def test_held_noise_keeps_torchs_warnings_and_logs_only(tmp_path):
    """What ``Held`` keeps back: torch's log records and warnings from outside the model source
    on the exporting thread; compat's own warnings, the model's and other threads' pass."""
    model_file = tmp_path / "model.py"
    model_file.write_text("x = 1\n")
    other_thread: list[str] = []

    def elsewhere() -> None:
        warnings.warn_explicit("from another thread", FutureWarning, torch.__file__, 2)
        other_thread.append("done")

    original_call_handlers = logging.Logger.__dict__["callHandlers"]
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with route_noise.Held() as held:
            logging.getLogger("torch.onnx._internal.test").warning("torchvision is not installed")
            warnings.warn_explicit("internal deprecation", FutureWarning, torch.__file__, 1)
            warnings.warn_explicit("copyreg said so", FutureWarning, os.__file__, 1)
            warnings.warn_explicit("the model's own", UserWarning, str(model_file), 1)
            warnings.warn_explicit(compat.LegacyExportWarning("ONX101 x"), compat.LegacyExportWarning,
                                   str(model_file), 1)
            thread = threading.Thread(target=elsewhere)
            thread.start()
            thread.join()
    assert sorted(str(w.message) for w in shown) == ["ONX101 x", "from another thread", "the model's own"]
    assert len(held.lines) == 3 and "torchvision is not installed" in held.lines[0]
    assert "internal deprecation" in held.lines[1] and "copyreg said so" in held.lines[2]

    class Failure:
        log = "== exception ==\nboom"

    failure = Failure()
    held.add_to_log(failure)
    assert failure.log.startswith("== exception ==\nboom\n== torch's warnings and log lines ==")
    assert "internal deprecation" in failure.log
    # nothing of it stays installed
    assert logging.Logger.__dict__["callHandlers"] is original_call_handlers
    assert all(not h.filters for h in logging.getLogger("torch").handlers)


def test_held_logs_reach_loggers_made_during_the_attempt_and_only_this_threads():
    """An export imports torch modules whose loggers and handlers appear while ``Held`` is
    active: their records are held too; another thread's records, a record no handler would take
    and torch's structured trace records (data ``draft_export`` reads through a handler it adds
    during the attempt) are not; nested holds give each record to the innermost; afterwards
    nothing of it stays."""
    seen, traced = io.StringIO(), io.StringIO()
    trace_log = logging.getLogger(route_noise.STRUCTURED_TRACE_LOGGER)
    handler, reader = logging.StreamHandler(seen), logging.StreamHandler(traced)
    late = logging.getLogger("torch.onnx._internal.made_during_the_attempt")
    original_call_handlers = logging.Logger.__dict__["callHandlers"]
    try:
        with route_noise.Held() as outer:
            handler.setLevel(logging.WARNING)
            late.addHandler(handler)
            late.propagate = False
            late.warning("made during the attempt")
            late.info("below every handler's level")
            trace_log.addHandler(reader)
            trace_log.warning("a structured trace record")
            with route_noise.Held() as inner:
                late.warning("inside the inner attempt")
            thread = threading.Thread(target=lambda: late.warning("another thread's"))
            thread.start()
            thread.join()
        late.warning("after the attempt")
    finally:
        late.removeHandler(handler)
        trace_log.removeHandler(reader)
        late.propagate = True
    assert outer.lines == ["WARNING torch.onnx._internal.made_during_the_attempt: made during the attempt"]
    assert inner.lines == ["WARNING torch.onnx._internal.made_during_the_attempt: inside the inner attempt"]
    assert seen.getvalue().splitlines() == ["another thread's", "after the attempt"]
    assert traced.getvalue() == "a structured trace record\n"
    assert logging.Logger.__dict__["callHandlers"] is original_call_handlers


def test_shown_notices_stay_bounded(monkeypatch):
    """A long process with many call sites and varying texts keeps a bounded memory of what it
    showed; a site still shows a warning once."""
    monkeypatch.setattr(notices, "_registries", notices.OrderedDict())
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        for i in range(notices.MAX_SITES + 50):
            site = notices.CallSite(f"/jobs/job{i}.py", 3, f"job{i}", {})
            for j in range(3):
                notices.emit(notices.make_warning("ONX101", f"note {j}"), site)
        hot = notices.CallSite("/jobs/hot.py", 9, "hot", {})
        for j in range(notices.MAX_PER_SITE * 2):
            notices.emit(notices.make_warning("ONX101", f"varying {j}"), hot)
        notices.emit(notices.make_warning("ONX104"), hot)
        notices.emit(notices.make_warning("ONX104"), hot)
    assert len(notices._registries) <= notices.MAX_SITES
    assert all(len(reg) <= notices.MAX_PER_SITE + 1 for _, reg in notices._registries.values())
    assert sum("ONX104" in str(w.message) for w in shown) == 1
    assert len(shown) == (notices.MAX_SITES + 50) * 3 + notices.MAX_PER_SITE * 2 + 1


def test_every_catalog_entry_has_a_short_fix():
    codes = {entry.code for entry in catalog.ENTRIES}
    assert set(catalog.SHORT_FIXES) == codes
    for code in codes:
        line = catalog.get(code).short_message()
        assert line.startswith(code + " ") and "\n" not in line and len(line) < 140, line


def test_a_capture_starts_empty_after_one_that_held_output_and_captures_nest():
    """Capture keeps its emptied scratch files for the thread's next capture: what one capture
    held (at the descriptor level too) is never part of the next, and a capture inside another
    gets files of its own."""
    from compat.routing.capture import Capture

    with Capture() as first:
        os.write(1, b"first on fd 1, a longer line than the next\n")
        print("first via print")
    with Capture() as outer:
        os.write(1, b"outer\n")
        with Capture() as inner:
            os.write(1, b"inner\n")
            os.write(2, b"inner err\n")
        os.write(2, b"outer err\n")
    with Capture() as last:
        os.write(1, b"last\n")
    assert first.stdout == "first on fd 1, a longer line than the next\nfirst via print\n"
    assert (outer.stdout, outer.stderr) == ("outer\n", "outer err\n")
    assert (inner.stdout, inner.stderr) == ("inner\n", "inner err\n")
    assert (last.stdout, last.stderr) == ("last\n", "")


def test_a_capture_flushes_the_scripts_stream_once_and_never_closes_it(monkeypatch):
    """The script's stream is flushed once, before the redirect (its pending output must not land
    in the capture); this thread's routed writes are in memory, so nothing is flushed after, also
    not when the router is freed. A ``close()`` of the routed ``sys.stdout`` closes nothing."""
    import gc

    from compat.routing.capture import Capture

    class Counting(io.StringIO):
        flushes = 0

        def flush(self):
            self.flushes += 1
            super().flush()

    script = Counting()
    monkeypatch.setattr(sys, "stdout", script)
    with Capture() as capture:
        routed = sys.stdout
        assert routed is not script
        routed.close()
        assert routed.closed is False
        print("still captured")
    del routed
    gc.collect()
    assert sys.stdout is script
    assert capture.stdout == "still captured\n"
    assert script.flushes == 1
    assert not script.closed
