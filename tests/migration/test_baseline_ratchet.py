"""The baseline ratchet (``--baseline FILE``, then ``--check --baseline FILE``) and pins with an
expiry date (``--pin-expires``): a large codebase migrates gradually, and new legacy usages or
pins left past their date fail the check."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from migration.cli import main

OLD = ('import torch\n\n\ndef go(model, x):\n'
       '    torch.onnx.export(model, (x,), "m.onnx", dynamic_axes={"x": [0]}, input_names=["x"])\n')
NEW_CALL = '    torch.onnx.export(model, (x,), "n.onnx", training=torch.onnx.TrainingMode.TRAINING)\n'


def run(capsys, *argv):
    rc = main(["--no-progress", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_check_fails_only_on_usages_not_in_the_baseline(tmp_path: Path, capsys) -> None:
    src, base = tmp_path / "a.py", tmp_path / "compat-baseline.json"
    src.write_text(OLD)
    rc, out, _ = run(capsys, "--baseline", str(base), str(src))
    assert rc == 0 and "Recorded 2 legacy usage(s)" in out
    assert {u["code"] for u in json.loads(base.read_text())["usages"]} == {"ONX001", "ONX101"}
    rc, out, _ = run(capsys, "--check", "--baseline", str(base), str(src))
    assert rc == 0, out
    assert "No new legacy usages" in out and "2 baselined usage(s) remain (0 fixed since" in out
    # edits above the old call move it; a moved usage is not new
    src.write_text("# a header\n" + OLD + NEW_CALL)
    rc, out, _ = run(capsys, "--check", "--baseline", str(base), str(src))
    assert rc == 1
    found = [line for line in out.splitlines() if line.startswith(str(src))]
    assert found and all(":7:" in line for line in found)  # only the new call's line
    assert {line.split()[1] for line in found} == {"ONX001", "ONX102"}
    assert "Found 2 new legacy usage(s) not in the baseline" in out and "2 baselined usage(s) remain" in out
    # json stays machine-readable: only the new findings
    rc, out, _ = run(capsys, "--check", "--baseline", str(base), "--output-format", "json", str(src))
    assert rc == 1 and {f["code"] for f in json.loads(out)} == {"ONX001", "ONX102"}


def test_baseline_read_from_config_and_fixed_usages_counted(tmp_path: Path, capsys, monkeypatch) -> None:
    src, base = tmp_path / "a.py", tmp_path / "base.json"
    src.write_text(OLD + NEW_CALL)
    assert run(capsys, "--baseline", str(base), str(src))[0] == 0
    (tmp_path / "pyproject.toml").write_text('[tool.torch-onnx-compat.migrate]\nbaseline = "base.json"\n')
    monkeypatch.chdir(tmp_path)
    src.write_text(OLD)  # the training= call was migrated away
    rc, out, _ = run(capsys, "--check", "a.py")
    assert rc == 0 and "2 baselined usage(s) remain (2 fixed since" in out


def test_unreadable_baseline_is_a_usage_error(tmp_path: Path, capsys) -> None:
    src, base = tmp_path / "a.py", tmp_path / "base.json"
    src.write_text(OLD)
    base.write_text("[]")
    rc, _, err = run(capsys, "--check", "--baseline", str(base), str(src))
    assert rc == 2 and "is not a compat.migrate baseline" in err
    rc, _, err = run(capsys, "--check", "--baseline", str(tmp_path / "missing.json"), str(src))
    assert rc == 2 and "cannot read the baseline" in err


def test_pins_carry_an_expiry_date_and_check_fails_after_it(tmp_path: Path, capsys) -> None:
    src = tmp_path / "a.py"
    src.write_text(OLD + NEW_CALL)
    tomorrow = datetime.date.today() + datetime.timedelta(days=1)
    assert run(capsys, "--fix", "--pin-expires", tomorrow.isoformat(), str(src))[0] == 0
    text = src.read_text()
    assert f"    # compat.migrate: pin expires {tomorrow.isoformat()}\n    torch.onnx.export(model, (x,), " \
        '"n.onnx", training=torch.onnx.TrainingMode.TRAINING, dynamo=False)' in text
    rc, out, _ = run(capsys, "--check", str(src))
    assert rc == 0 and "All checks passed!" in out
    # the date passes
    src.write_text(text.replace(tomorrow.isoformat(), "2020-01-31"))
    rc, out, _ = run(capsys, "--check", str(src))
    assert rc == 1 and f"{src}:8: pin expired on 2020-01-31" in out and "1 pin(s) expired." in out
    assert "All checks passed!" not in out
    assert run(capsys, "--pin-expires", "soon", str(src))[0] == 2
