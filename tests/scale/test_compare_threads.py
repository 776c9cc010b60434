"""``compare`` beside other exports: its own exports pass no ledger and no observers to dispatch, so
another thread's export keeps its record, and the environment is never touched to get there."""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import compat
from compat import api
from compat.policy import config


class SignalsWhenTraced(torch.nn.Module):
    """A Linear whose forward tells the test that compare has started exporting it."""

    def __init__(self, started: threading.Event) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.started = started

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.started.set()
        return self.fc(x)


def test_compare_in_one_thread_keeps_another_threads_ledger_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    book = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(config.ENV_LEDGER, str(book))
    environ_before = dict(os.environ)
    started, finished = threading.Event(), threading.Event()
    seen_ledger: set[str | None] = set()
    errors: list[BaseException] = []
    other = tmp_path / "other.onnx"

    def read_environ() -> None:  # a concurrent reader: the ledger setting never disappears
        while not finished.is_set():
            seen_ledger.add(os.environ.get(config.ENV_LEDGER))
            time.sleep(0.001)

    def export_meanwhile() -> None:  # starts while compare is exporting on its first route
        try:
            assert started.wait(timeout=300)
            compat.export(torch.nn.Sequential(torch.nn.Linear(4, 2)).eval(), (torch.randn(2, 4),),
                          str(other), route="legacy")
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=read_environ), threading.Thread(target=export_meanwhile)]
    for t in threads:
        t.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = compat.compare(SignalsWhenTraced(started).eval(), (torch.randn(2, 4),),
                                    latency_runs=0)
    finally:
        threads[1].join(timeout=300)
        finished.set()
        threads[0].join(timeout=10)
    assert not errors, errors
    assert report.verdict == "equivalent", report.differences
    records = [json.loads(line) for line in book.read_text().splitlines()]
    assert len(records) == 1, records  # the other thread's export, none of compare's own
    assert records[0]["output"] == str(other) and records[0]["model"] == "Sequential"
    assert records[0]["status"] == "ok" and records[0]["route_taken"] == "legacy"
    assert seen_ledger == {str(book)}
    assert dict(os.environ) == environ_before


def test_registered_observers_add_fields_to_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    book = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(config.ENV_LEDGER, str(book))
    calls: list[tuple[str, str]] = []

    def observer(req: Any, outcome: Any) -> dict[str, Any]:
        calls.append((req.call_site, outcome.route))
        return {"observed": outcome.route}

    model, x = torch.nn.Linear(4, 2).eval(), torch.randn(1, 4)
    api.add_observer(observer)
    try:
        compat.export(model, (x,), str(tmp_path / "a.onnx"), route="legacy")
    finally:
        api.remove_observer(observer)
    compat.export(model, (x,), str(tmp_path / "b.onnx"), route="legacy")
    first, second = (json.loads(line) for line in book.read_text().splitlines())
    assert len(calls) == 1 and calls[0][0] == first["call_site"] and calls[0][1] == "legacy"
    assert first["observed"] == "legacy"
    assert "observed" not in second
