"""Where ``compat.export``'s own time goes, layer by layer, on each route (issue 20 items 5/6).

``compat.export`` of a small CNN alternates with the plain ``torch.onnx.export`` of the same
route (``dynamo=False``; ``dynamo=True, external_data=False``) in one process. While compat runs,
each layer of its data path is timed *exclusively* (a layer's time excludes the layers it calls):

normalise (call-site discovery, ``normalize``), policy (strict mode, usage warnings), plan
(route choice, project config lookups), snapshot (the model-state guards), noise capture (fd
redirects, the route's held warnings and logs, the tracer-warning tap), route (the route's own
work around torch: options, keyword adapters, post-processing), export (torch's exporter itself),
validate (strict shape inference on the torch.export route), save (atomic save), ledger (the
record, attempt logs), other (what is left of the call).

Rows: each layer's median share of plain torch's median export (ratio); the layers add up to the
whole call's ratio. ``details.table`` prints the same as a table. The hooks wrap module
attributes for the benchmark's own runs and are removed after; a name that moved is listed in
``details.unhooked`` (its time then lands in the layer that calls it).
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _timing import alternate, cache_dir, convnet, quiet

TITLE = "compat.export's layers: exclusive time of each, as a share of plain torch.onnx.export (ratio of medians)"
LAYERS = ("normalise", "policy", "plan", "snapshot", "noise capture", "route", "export", "validate",
          "save", "ledger", "other")


class _Clock:
    """Exclusive time per layer: a stack of open layers; a layer's time stops while a nested
    one runs."""

    def __init__(self) -> None:
        self.spent: Counter[str] = Counter()
        self._stack: list[list[Any]] = []  # [layer, started]

    def push(self, layer: str) -> None:
        now = time.perf_counter()
        if self._stack:
            top = self._stack[-1]
            self.spent[top[0]] += now - top[1]
        self._stack.append([layer, now])

    def pop(self) -> None:
        now = time.perf_counter()
        layer, started = self._stack.pop()
        self.spent[layer] += now - started
        if self._stack:
            self._stack[-1][1] = now

    @contextlib.contextmanager
    def layer(self, name: str) -> Iterator[None]:
        self.push(name)
        try:
            yield
        finally:
            self.pop()


class _Hooks:
    """Wrap functions, context-manager factories and methods of compat's modules so their time
    is charged to a layer; ``undo`` puts every original back."""

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self.undo_list: list[tuple[Any, str, Any]] = []
        self.unhooked: list[str] = []

    def _set(self, owner: Any, name: str, value: Any) -> None:
        self.undo_list.append((owner, name, owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)))
        setattr(owner, name, value)

    def _lookup(self, module: str, name: str) -> tuple[Any, str, Any] | None:
        """(owner, attribute, what is there now) of ``module``'s ``name``; None (noted) if absent."""
        import importlib

        try:
            if module.split(".")[0] in ("legacy", "dynamo"):  # the shim's own route packages
                from compat.routing.route_packages import route_module

                owner: Any = route_module(module)
            else:
                owner = importlib.import_module(module)
            *path, last = name.split(".")
            for part in path:
                owner = getattr(owner, part)
            current = getattr(owner, last)
        except (ImportError, AttributeError):
            self.unhooked.append(f"{module}.{name}")
            return None
        return owner, last, current

    def _wrap(self, module: str, name: str, wrapper: Callable[[Any], Any]) -> None:
        """Put ``wrapper(what is there)`` in place of ``module``'s ``name`` (noted if absent)."""
        found = self._lookup(module, name)
        if found is not None:
            owner, attr, current = found
            self._set(owner, attr, wrapper(current))

    def call(self, layer: str, module: str, name: str) -> None:
        """A function (or method) charged to ``layer`` while it runs."""
        clock = self.clock

        def wrapper(fn: Any) -> Any:
            def timed(*args: Any, **kwargs: Any) -> Any:
                with clock.layer(layer):
                    return fn(*args, **kwargs)
            return timed

        self._wrap(module, name, wrapper)

    def manager(self, layer: str, module: str, name: str) -> None:
        """A context-manager factory whose ``__enter__``/``__exit__`` are charged to ``layer``
        (and its creation); what runs inside the block is not."""
        clock = self.clock

        def wrapper(factory: Any) -> Any:
            @contextlib.contextmanager
            def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
                with clock.layer(layer):
                    cm = factory(*args, **kwargs)
                    value = cm.__enter__()
                try:
                    yield value
                except BaseException as exc:
                    with clock.layer(layer):
                        if not cm.__exit__(type(exc), exc, exc.__traceback__):
                            raise
                else:
                    with clock.layer(layer):
                        cm.__exit__(None, None, None)
            return timed

        self._wrap(module, name, wrapper)

    def steps(self, layer: str, module: str, name: str) -> None:
        """A steps generator function (``compat.routing.steps``): the time its generator runs is
        charged to ``layer``, not the calls it yields (those are the driver's)."""
        clock = self.clock

        def wrapper(fn: Any) -> Any:
            def timed(*args: Any, **kwargs: Any) -> Any:
                gen = fn(*args, **kwargs)
                value, failure = None, None
                while True:
                    with clock.layer(layer):
                        try:
                            call = gen.send(value) if failure is None else gen.throw(failure)
                        except StopIteration as done:
                            return done.value
                    try:
                        value, failure = (yield call), None
                    except BaseException as exc:  # noqa: BLE001 - the route's to handle
                        value, failure = None, exc
            return timed

        self._wrap(module, name, wrapper)

    def original(self, layer: str, key: str) -> None:
        """One of torch's exporters as ``compat.installed.torch_api`` hands it to a route."""
        from compat.installed import torch_api

        torch_api.capture()
        fn, clock = torch_api._ORIGINALS[key], self.clock

        def timed(*args: Any, **kwargs: Any) -> Any:
            with clock.layer(layer):
                return fn(*args, **kwargs)

        self.undo_list.append((torch_api._ORIGINALS, key, fn))
        torch_api._ORIGINALS[key] = timed

    def undo(self) -> None:
        for owner, name, value in reversed(self.undo_list):
            if isinstance(owner, dict):
                owner[name] = value
            else:
                setattr(owner, name, value)
        self.undo_list.clear()


def _install(hooks: _Hooks) -> None:
    for module, name in (("compat.policy.notices", "find_call_site"), ("compat.request.normalize", "normalize"),
                         ("compat.installed.runtime_extra", "require_runtime"), ("compat.api", "require_runtime")):
        hooks.call("normalise", module, name)
    for module, name in (("compat.policy.config", "resolve_strict"), ("compat.policy.notices", "warn_usages"),
                         ("compat.policy.notices", "take_api_codes"), ("compat.policy.config", "env_ledger")):
        hooks.call("policy", module, name)
    hooks.call("plan", "compat.routing.dispatch", "plan")
    for name in ("preserved", "inputs_preserved", "route_guard", "values_preserved"):
        hooks.manager("snapshot", "compat.routing.model_state", name)
    hooks.manager("snapshot", "legacy.route", "copy_on_write")  # its copies during the trace: export
    for cls, methods in (("compat.routing.capture", ("Capture.__enter__", "Capture.__exit__", "Capture.replay")),
                         ("compat.policy.route_noise", ("Held.__init__", "Held.__enter__", "Held.__exit__")),
                         ("compat.policy.warning_tap", ("WarningTap.__enter__", "WarningTap.__exit__"))):
        for method in methods:
            hooks.call("noise capture", cls, method)
    hooks.steps("route", "legacy", "steps")  # what the dispatcher runs (compat.routing.steps)
    hooks.call("route", "dynamo", "export")
    hooks.original("export", "utils.export")
    hooks.original("export", "export")
    hooks.call("validate", "dynamo.validate", "check")
    hooks.call("save", "compat.records.saving", "save")
    hooks.call("ledger", "compat.records.ledger", "append")
    hooks.call("ledger", "compat.records.attempt_logs", "write")


def _profile(clock: _Clock, call: Callable[[], Any], into: list[dict[str, float]]) -> Callable[[], None]:
    def run() -> None:
        clock.spent.clear()
        clock.push("other")
        try:
            call()
        finally:
            clock.pop()
        into.append(dict(clock.spent))

    return run


def run(quick: bool = False) -> dict[str, Any]:
    import torch

    import compat

    model, x = convnet(1, 8), (torch.randn(1, 3, 32, 32),)
    routes = {
        "TorchScript": ("torch.onnx.export(dynamo=False)",
                        lambda f: torch.onnx.export(model, x, f, dynamo=False),
                        lambda f: compat.export(model, x, f, route="legacy"), 8 if quick else 30),
        "torch.export": ("torch.onnx.export(dynamo=True, external_data=False)",
                         lambda f: torch.onnx.export(model, x, f, dynamo=True, external_data=False),
                         lambda f: compat.export(model, x, f, route="dynamo"), 4 if quick else 12),
    }
    clock = _Clock()
    hooks = _Hooks(clock)
    rows, table, shares_by_route = [], [], {}
    with tempfile.TemporaryDirectory() as tmp, quiet(), cache_dir(Path(tmp) / "cache"):
        _install(hooks)
        try:
            for route, (torch_name, plain, shim, reps) in routes.items():
                layers: list[dict[str, float]] = []
                times = alternate({
                    torch_name: lambda p=plain: p(str(Path(tmp) / "torch.onnx")),
                    "compat": _profile(clock, lambda s=shim: s(str(Path(tmp) / "compat.onnx")), layers),
                }, reps=reps, warmup=2)
                layers = layers[-reps:]
                base = statistics.median(times[torch_name])
                shares = {name: statistics.median(r.get(name, 0.0) for r in layers) / base for name in LAYERS}
                whole = statistics.median(times["compat"]) / base
                shares_by_route[route] = shares
                for name in LAYERS:
                    rows.append({"name": f"{route} route: {name}", "ratio": round(shares[name], 4), "target": None,
                                 "numerator": f"{name} (exclusive, median per call)", "denominator": torch_name,
                                 "reps": reps})
                rows.append({"name": f"{route} route: whole call", "ratio": round(whole, 4), "target": None,
                             "numerator": "compat.export", "denominator": torch_name, "reps": reps})
        finally:
            hooks.undo()
    table.append(f"{'layer':<15}" + "".join(f"{r + ' route':>20}" for r in shares_by_route))
    for name in LAYERS:
        table.append(f"{name:<15}" + "".join(f"{s[name]:>20.4f}" for s in shares_by_route.values()))
    table.append(f"{'sum':<15}" + "".join(f"{sum(s.values()):>20.4f}" for s in shares_by_route.values()))
    return {"benchmark": "layers", "title": TITLE, "ratios": rows,
            "details": {"model": "1-block CNN (Conv-BN-ReLU, 8 channels), input 1x3x32x32",
                        "table": table, "unhooked": hooks.unhooked,
                        "note": "each cell: median exclusive seconds of the layer per compat.export call / "
                                "median seconds of plain torch.onnx.export on the same route; hooks add a "
                                "few microseconds per hooked call"}}


if __name__ == "__main__":
    def _main() -> None:
        import sys

        result = run(quick="--quick" in sys.argv)
        print(TITLE)
        print("\n".join(result["details"]["table"]))
        if result["details"]["unhooked"]:
            print("unhooked:", result["details"]["unhooked"])

    _main()
