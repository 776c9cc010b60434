"""`make demo`: run unchanged legacy export scripts under the shim, show what it did, verify.

For each script in examples/ (copied to a temp folder): `python -m compat run --ledger L script.py
OUT` (exactly what a user types), then read the ledger and check every produced model with
onnxruntime. Last, `python -m compat.migrate --ledger L --write` rewrites the copies by that
evidence, the rewritten scripts run on the installed torch as written (`compat run --observe
--ledger L2`: plain torch, recorded), and `compat verify-migration L L2` checks that each call
site exported the same model as under the shim (opset, names, dim_params, layout, custom nodes,
onnxruntime numerics): a migration never changes the model. A call whose draft capture auto
deferred is recorded once more with `--route dynamo`, as its pin's comment asks, before the
rewrite. `compat.migrate` prints, and
`compat report` of the migrated run shows, how many call sites finished on plain torch (with or
without a post-step), are pinned (with the reason) or are left on the shim; a script with custom
symbolics migrates all the way too.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SCRIPTS = ("legacy_1x_export.py", "control_flow_export.py", "deploy_single_file.py")


def main() -> int:
    out_root = pathlib.Path(tempfile.mkdtemp(prefix="compat-demo-"))
    ledger = out_root / "ledger.jsonl"
    scripts = out_root / "scripts"
    scripts.mkdir()
    for script in SCRIPTS:
        shutil.copy(HERE / script, scripts / script)
    failures = 0
    for script in SCRIPTS:
        out_dir = out_root / script.removesuffix(".py")
        out_dir.mkdir()
        print(f"\n=== python -m compat run {script} {out_dir}")
        proc = subprocess.run(
            [sys.executable, "-W", "ignore::FutureWarning", "-m", "compat", "run",
             "--ledger", str(ledger), str(scripts / script), str(out_dir)],
            capture_output=True, text=True,
        )
        print(proc.stdout.strip())
        warned = sorted({ln.split("LegacyExportWarning: ")[1].split()[0]
                         for ln in proc.stderr.splitlines() if "LegacyExportWarning: " in ln})
        print(f"  exit code {proc.returncode}; legacy usages warned: {', '.join(warned) or 'none'}")
        if proc.returncode != 0:
            print(proc.stderr[-2000:])
            failures += 1
    print("\n=== what the shim did (from the ledger)")
    import onnxruntime as ort

    for line in ledger.read_text().splitlines():
        rec = json.loads(line)
        print(f"- {os.path.basename(rec['call_site'])}: route {rec['route_requested']} -> "
              f"{rec['route_taken']}" + (f" (why: {rec['fallback_reason']})" if rec["fallback_reason"] else ""))
        for t in rec["translations"]:
            print(f"    {t['code']} {t['option']}: {t['action']}")
        print(f"    model written to {rec['output']}")
        if rec["status"] == "ok":
            sess = ort.InferenceSession(rec["output"], providers=["CPUExecutionProvider"])
            ins = ", ".join(f"{i.name}{i.shape}" for i in sess.get_inputs())
            print(f"    onnxruntime loads it: inputs {ins}")
    deployed = out_root / "deploy_single_file" / "deploy"
    print(f"\ndeploy folder holds {sorted(os.listdir(deployed))} (self-contained, as before torch 2.9)")
    ratchet(scripts, out_root / "migrate-baseline.json")
    evidence = [ledger, *follow_the_pins_advice(scripts, ledger, out_root)]
    failures += migrate_and_rerun(scripts, evidence, out_root / "after-migration")
    failures += _migrate(["--check", "--baseline", str(out_root / "migrate-baseline.json"), str(scripts)],
                         "after the rewrite, against the baseline") != 0
    failures += custom_symbolic_all_the_way(out_root / "custom-symbolic")
    return 1 if failures else 0


def _migrate(argv: list[str], why: str) -> int:
    shown = " ".join(pathlib.Path(a).name if os.path.isabs(a) else a for a in argv)
    print(f"\n=== python -m compat.migrate {shown}   ({why})")
    run = subprocess.run([sys.executable, "-m", "compat.migrate", "--no-progress", *argv],
                         capture_output=True, text=True)
    print((run.stdout + run.stderr).strip())
    return run.returncode


def ratchet(scripts: pathlib.Path, baseline: pathlib.Path) -> None:
    """The baseline ratchet of a large codebase: record today's legacy usages, then `--check`
    fails only on a new one (and says how many remain)."""
    _migrate(["--baseline", str(baseline), str(scripts)], "record today's legacy usages")
    new = scripts / "new_code.py"
    new.write_text('import torch\n\n\ndef export(m, x):\n'
                   '    torch.onnx.export(m, (x,), "m.onnx", opset_version=17)\n', encoding="utf-8")
    code = _migrate(["--check", "--baseline", str(baseline), str(scripts)], "someone adds a legacy call")
    print(f"  exit {code}: only the new call fails the check")
    new.unlink()


def follow_the_pins_advice(scripts: pathlib.Path, ledger: pathlib.Path, out_root: pathlib.Path) -> list[pathlib.Path]:
    """A call auto exported on the TorchScript route with its draft capture deferred (below opset
    18, fixed shapes) says nothing of the torch.export route, so compat.migrate would pin it to
    dynamo=False, its comment asking for a `compat run --route dynamo --ledger` record: recorded
    here, as a user following that comment would. Returns the extra ledger (none if no call)."""
    from compat.catalog import DRAFT_DEFERRED

    deferred = sorted({os.path.basename(rec["call_site"].rpartition(":")[0])
                       for rec in map(json.loads, ledger.read_text().splitlines())
                       if DRAFT_DEFERRED in (rec.get("fallback_reason") or "")})
    if not deferred:
        return []
    extra = out_root / "dynamo.jsonl"
    for script in deferred:
        out_dir = out_root / f"{script.removesuffix('.py')}-dynamo"
        out_dir.mkdir()
        print(f"\n=== python -m compat run --route dynamo --ledger {extra.name} {script}   "
              f"(the record a deferred draft capture's pin asks for)")
        run = subprocess.run([sys.executable, "-W", "ignore", "-m", "compat", "run", "-q", "--route",
                              "dynamo", "--ledger", str(extra), str(scripts / script), str(out_dir)],
                             capture_output=True, text=True, check=False)
        print(f"  exit code {run.returncode}")
        if run.returncode != 0:
            print(run.stderr[-2000:])
    return [extra]


def migrate_and_rerun(scripts: pathlib.Path, ledgers: list[pathlib.Path], out: pathlib.Path) -> int:
    """Rewrite the scripts by the ledgers' evidence, run them on plain torch (recorded), and
    verify that every call site exports what the shim exported for the original (the first
    ledger: the scripts run as written)."""
    ledger = ledgers[0]
    given = [arg for extra in ledgers for arg in ("--ledger", str(extra))]
    print(f"\n=== python -m compat.migrate {' '.join('--ledger ' + x.name for x in ledgers)} "
          f"--unsafe-fixes --write scripts/")
    mig = subprocess.run([sys.executable, "-m", "compat.migrate", *given,
                          "--unsafe-fixes", "--write", str(scripts)], capture_output=True, text=True)
    print(mig.stdout.strip() or mig.stderr.strip())
    observed = out.parent / "observed.jsonl"
    failures = 0
    for script in SCRIPTS:
        out.mkdir(parents=True, exist_ok=True)
        run = subprocess.run([sys.executable, "-W", "ignore", "-m", "compat", "run", "--observe",
                              "-q", "--ledger", str(observed), str(scripts / script), str(out)],
                             capture_output=True, text=True)
        status = "ok" if run.returncode == 0 else f"FAILED (exit {run.returncode})"
        print(f"  migrated {script}, run as written (compat run --observe): {status}")
        if run.returncode != 0:
            print(run.stderr[-2000:])
            failures += 1
    print(f"  (the rewritten scripts are in {scripts})")
    print(f"\n=== python -m compat verify-migration {ledger.name} {observed.name}")
    verify = subprocess.run([sys.executable, "-m", "compat", "verify-migration", str(ledger),
                             str(observed)], capture_output=True, text=True)
    print(verify.stdout.strip() or verify.stderr.strip())
    if verify.returncode != 0:
        print(f"  the migrated scripts export other models (exit {verify.returncode})")
        failures += 1
    return failures + (not finished_counts(observed))


CUSTOM_SYMBOLIC = "custom_symbolic_export.py"


def custom_symbolic_all_the_way(work: pathlib.Path) -> int:
    """A script with custom symbolics (a registered one writing com.microsoft::Gelu, an
    autograd.Function with its own symbolic) migrates all the way onto torch's own exporter:
    the symbolics become onnxscript translations in a generated module beside it, the call
    passes custom_translation_table=, and verify-migration finds the shim's model; the counts
    (compat.migrate's from the text, `compat report`'s from the migrated run) say it finished."""
    work.mkdir(parents=True)
    shutil.copy(HERE / CUSTOM_SYMBOLIC, work / CUSTOM_SYMBOLIC)
    script, before, after = work / CUSTOM_SYMBOLIC, work / "L-shim.jsonl", work / "L-plain.jsonl"
    print(f"\n=== custom symbolics, all the way: python -m compat run {CUSTOM_SYMBOLIC}")
    failures = 0
    for ledger, mode in ((before, []), (after, ["--observe"])):
        if ledger is after:
            original = script.read_text(encoding="utf-8")
            print(f"\n=== python -m compat.migrate --ledger {before.name} --unsafe-fixes --write "
                  f"{CUSTOM_SYMBOLIC}")
            mig = subprocess.run([sys.executable, "-m", "compat.migrate", "--no-progress",
                                  "--ledger", str(before), "--unsafe-fixes", "--write", str(script)],
                                 capture_output=True, text=True, check=False)
            print(mig.stdout.strip())  # with the counts: finished, post-step, pinned, on the shim
            import difflib

            print("".join(difflib.unified_diff(original.splitlines(True),
                                               script.read_text(encoding="utf-8").splitlines(True),
                                               CUSTOM_SYMBOLIC, CUSTOM_SYMBOLIC + " (migrated)")))
            generated = work / CUSTOM_SYMBOLIC.replace(".py", "_onnx.py")
            print(f"--- {generated.name} (generated)\n{generated.read_text(encoding='utf-8')}")
        out = work / ("out-" + ledger.stem)
        out.mkdir()
        run = subprocess.run([sys.executable, "-W", "ignore", "-m", "compat", "run", *mode, "-q",
                              "--ledger", str(ledger), str(script), str(out)],
                             capture_output=True, text=True, cwd=work, check=False)
        print(f"  {'migrated' if mode else 'original'} script: exit {run.returncode}")
        if run.returncode != 0:
            print(run.stderr[-2000:])
            failures += 1
    text = script.read_text(encoding="utf-8")
    plain = "compat.export" not in text and "dynamo=True" in text
    print(f"  the migrated call exports with torch.onnx.export(..., dynamo=True, "
          f"custom_translation_table=...): {'yes' if plain else 'NO'}")
    failures += not plain
    verify = subprocess.run([sys.executable, "-m", "compat", "verify-migration", str(before),
                             str(after)], capture_output=True, text=True, check=False)
    print(verify.stdout.strip() or verify.stderr.strip())
    return failures + (verify.returncode != 0) + (not finished_counts(after))


def finished_counts(ledger: pathlib.Path) -> bool:
    """`compat report` of the migrated run: its call sites finished / pinned / on the shim (the
    counts `compat.migrate` printed from the text, here from what ran). True when every call
    site finished on plain torch (with or without a post-step)."""
    print(f"\n=== python -m compat report {ledger.name}")
    report = subprocess.run([sys.executable, "-m", "compat", "report", str(ledger)],
                            capture_output=True, text=True, check=False)
    lines = [ln for ln in report.stdout.splitlines()
             if ln.startswith(("Call sites:", "- pinned"))]
    print("\n".join(lines) or report.stdout.strip() or report.stderr.strip())
    done = report.returncode == 0 and bool(lines) and " 0 pinned, 0 left on the shim." in lines[0]
    print(f"  migrated all the way (no call pinned, none left on the shim): {'yes' if done else 'NO'}")
    return done


if __name__ == "__main__":
    raise SystemExit(main())
