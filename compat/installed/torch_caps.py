"""What the installed torch can do: one home for version decisions and feature probes.

Decisions use ``packaging.version`` for the documented changes and probes for what a build may
lack (a torch without the TorchScript exporter, private internals a release moved).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable

from packaging.version import Version


@functools.cache
def torch_version() -> Version:
    """The installed torch's release (local tags such as ``+cpu`` dropped)."""
    import torch

    return Version(Version(torch.__version__.split("+")[0]).base_version)


def torch_version_str() -> str:
    import torch

    return str(torch.__version__)


def at_least(version: str) -> bool:
    return torch_version() >= Version(version)


#: ``1``: the probes below report no TorchScript exporter (nor its symbolic registry and graph
#: context), as on a torch that has removed it; ``make test-no-torchscript`` runs the suite so
ENV_HIDE_TORCHSCRIPT = "TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT"


def torchscript_hidden() -> bool:
    """True when ``TORCH_ONNX_COMPAT_HIDE_TORCHSCRIPT`` hides the TorchScript exporter."""
    return os.environ.get(ENV_HIDE_TORCHSCRIPT, "").strip().lower() in {"1", "true", "yes", "on"}


def torchscript_missing_reason() -> str:
    """Why the TorchScript exporter is unavailable: hidden by the variable, or not in this torch."""
    if torchscript_hidden():
        return (f"the TorchScript-based ONNX exporter is hidden by {ENV_HIDE_TORCHSCRIPT}=1 "
                "(simulating a torch that has removed it)")
    return f"torch {torch_version_str()} has no TorchScript-based ONNX exporter"


def has_torchscript_exporter() -> bool:
    """True when torch still ships the TorchScript-based ONNX exporter (and it is not hidden)."""
    return not torchscript_hidden() and _ships_torchscript_exporter()


@functools.cache
def _ships_torchscript_exporter() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch.onnx

    for mod in ("torch.onnx._internal.torchscript_exporter.utils", "torch.onnx.utils"):
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            return hasattr(torch.jit, "trace") and hasattr(torch.onnx, "export")
    return False


#: the lowest torch the runtime extra declares (pyproject.toml): older ones have the exporter's
#: modules but cannot run it with a current onnxscript, and lack the internals probed below
MIN_TORCH = "2.9"


#: the torch releases the whole suite passed on (README: Version matrix); the runtime extra declares
#: torch>=TESTED_TORCH[0],<(next minor after TESTED_TORCH[1]). Raised on each torch release after
#: ``make matrix TORCH=<it>`` passes. MIN_TORCH stays the capability floor: below TESTED_TORCH[0]
#: the routes still run (installed with --no-deps), with the differences UNTESTED_BELOW names
TESTED_TORCH = ("2.9", "2.15")

#: what is known to differ on the releases below the tested range
UNTESTED_BELOW = (
    "torch before 2.9 was not run: its torch.export-based exporter is not the default, and it "
    "lacks internals the shim probes (below MIN_TORCH the torch.export route is unavailable)"
)


def untested_torch() -> str | None:
    """Why the installed torch is outside the tested range (None inside it)."""
    low, high = (Version(v) for v in TESTED_TORCH)
    v = torch_version()
    if v < low:
        return (f"torch {torch_version_str()} is below the tested range ({TESTED_TORCH[0]} to "
                f"{TESTED_TORCH[1]}): {UNTESTED_BELOW}")
    if (v.major, v.minor) > (high.major, high.minor):
        return (f"torch {torch_version_str()} is newer than the tested range ({TESTED_TORCH[0]} to "
                f"{TESTED_TORCH[1]}): the private torch pieces the shim uses are checked only as "
                "they are used (TorchInternalsMoved if one is gone), and the down-conversion, "
                "dispatch-order and tracer-warning behaviour it relies on is unverified")
    return None


@functools.cache
def has_dynamo_exporter() -> bool:
    """True when torch has a usable torch.export-based exporter (torch >= MIN_TORCH with onnxscript)."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("onnxscript") is None:
        return False
    if not at_least(MIN_TORCH):
        return False
    return importlib.util.find_spec("torch.onnx._internal.exporter._core") is not None


def torchlib_min_opset() -> int:
    """The lowest opset the new exporter builds natively (it converts down from there)."""
    try:
        from torch.onnx._internal.exporter import _constants

        return int(_constants.TORCHLIB_OPSET)
    except (ImportError, AttributeError):
        from compat.catalog import DYNAMO_MIN_OPSET

        return DYNAMO_MIN_OPSET


#: torch's ONNX type-promotion pass and the function in it that re-finds an operator's overload
TYPE_PROMOTION_OVERLOAD = ("torch.onnx._internal.fx.passes.type_promotion", "find_compatible_op_overload")


@functools.cache
def type_promotion_misfinds_overloads() -> bool:
    """torch's ONNX type-promotion pass fails on a parameter times a Python scalar (``self.w * 2``:
    ConversionError "Expected same OpOverload packet, got prim.device != aten.mul", torch 2.9).

    The pass re-finds the promoted node's overload by tracing what the op dispatches, and on fake
    tensors the first op traced is ``prim.device``; later torches match the overloads' schemas.
    Probed by running torch's function on that case (fake tensors, no export): True on 2.9.0 and
    2.9.1, False where the function is fixed or gone."""
    if not has_dynamo_exporter():
        return False
    from compat.installed.torch_internals import lookup

    try:
        find = lookup(*TYPE_PROMOTION_OVERLOAD)
        fake_mode = lookup("torch._subclasses.fake_tensor", "FakeTensorMode")
    except (ImportError, AttributeError):
        return False
    import torch

    with fake_mode():
        weight, two = torch.nn.Parameter(torch.ones(2)), torch.tensor(2.0)
    try:
        find(torch.ops.aten.mul, (weight, two), {})
    except AssertionError:
        return True
    except Exception:  # noqa: BLE001 - any other failure is not this bug: torch's pass runs as is
        return False
    return False


#: torch.export's check that a forward assigns no tensor attribute (non-strict capture)
ATTRIBUTE_ASSIGNMENT_CHECK = ("torch._functorch._aot_autograd.frontend_utils", "_detect_attribute_assignment")


@functools.cache
def export_refuses_tensor_attribute_assignment() -> bool:
    """torch.export fails when a forward assigns a tensor attribute (ValueError "... were
    assigned during export", torch 2.9; later torches restore it without failing). An RNN's
    forward re-flattens its weights into ``self._flat_weights`` when export swaps its parameters,
    so every LSTM/GRU/RNN fails there. Probed by running the check on a one-attribute module."""
    if not has_dynamo_exporter():
        return False
    from compat.installed.torch_internals import lookup

    try:
        check = lookup(*ATTRIBUTE_ASSIGNMENT_CHECK)
    except (ImportError, AttributeError):
        return False
    import warnings

    import torch

    module = torch.nn.Module()
    module.probe = torch.zeros(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with check(module):
                module.probe = torch.ones(1)
    except ValueError:
        return True
    except Exception:  # noqa: BLE001 - another failure is not this behaviour
        return False
    return False


#: the hooks every ``nn.Module`` runs when a buffer is assigned; torch.export's non-strict capture
#: registers one there holding the module it captures
BUFFER_REGISTRATION_HOOKS = ("torch.nn.modules.module", "_global_buffer_registration_hooks")
#: the first torch whose capture removes that hook when the capture fails (in a ``finally``)
BUFFER_HOOK_REMOVED_ON_FAILURE = "2.13"


class _ProbeFailure(Exception):
    """Raised by the probe module's forward: the capture fails there."""


@functools.cache
def export_leaks_buffer_assignment_hook() -> bool:
    """torch.export's non-strict capture leaves its buffer-assignment hook registered when the
    capture fails (torch 2.9 to 2.12: ``torch.export._trace`` and aot_autograd's ``graph_capture``
    remove it only after tracing succeeds; 2.13 removes it in a ``finally``). The hook holds the
    captured module, so a model whose torch.export-route export failed stays alive for the
    process, and registering a buffer on it later fails in the stale hook (AssertionError
    "expected FakeTensor", 2.12.1). Decided by version from 2.13; before, probed by a failing
    non-strict export of a one-line module (its leftover hook removed)."""
    if not has_dynamo_exporter() or at_least(BUFFER_HOOK_REMOVED_ON_FAILURE):
        return False
    from compat.installed.torch_internals import lookup, remove_hooks_holding

    try:
        hooks = lookup(*BUFFER_REGISTRATION_HOOKS)
        export = lookup("torch.export", "export")
    except (ImportError, AttributeError):
        return False
    if not isinstance(hooks, dict):
        return False
    import torch

    class Fails(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise _ProbeFailure

    module = Fails()
    before = set(hooks)
    try:
        export(module, (torch.zeros(1),), strict=False)
    except Exception:  # noqa: BLE001, S110 - the capture is meant to fail; what it leaves is the answer
        pass
    return remove_hooks_holding(hooks, before, module) > 0


def onnx_lstm_node_misshaped() -> bool:
    """torch's ONNX translation of ``aten::lstm`` writes an LSTM node whose output shape fails
    ONNX shape inference ("Inferred shape and existing shape differ in rank: (3) vs (4)"):
    measured on 2.9.1, 2.10.0, 2.11.0 and 2.12.1, not on 2.13.0 to 2.15.0. A version decision:
    probing it needs a whole export."""
    return has_dynamo_exporter() and not at_least("2.13")


def lacks_decomposition(op_name: str) -> bool:
    """torch has no decomposition for ``aten.<op_name>`` (``hann_window.periodic`` before
    2.12: the torch.export route then has no ONNX translation for it)."""
    if not has_dynamo_exporter():
        return False
    import torch

    packet, _, overload = op_name.partition(".")
    op = getattr(getattr(torch.ops.aten, packet), overload or "default")
    try:
        from torch._decomp import global_decomposition_table
    except ImportError:
        return False
    return op not in global_decomposition_table.get("post_autograd", {})


@functools.cache
def fake_cuda_guard_dies_with_its_thread() -> bool:
    """torch's fake CUDA device guard lives only as long as the thread that installed it.

    Entering FakeTensorMode (every torch.export) without a CUDA device replaces the CUDA device
    guard with a fake one. On torch 2.10 and 2.11, c10's ``ensureCUDADeviceGuardSet`` keeps that
    guard in a ``thread_local``, so the global registry points at freed memory once that thread
    ends, and the next export in another thread segfaults. Measured on 2.11.0 (CUDA build on a
    machine with no GPU): exports in threads that end one after another crash; 2.12.1 keeps the
    guard in a static (pytorch/pytorch#178950, "Fix use after free in ensureCUDADeviceGuardSet").
    A version decision plus probes: torch has the guard (2.9's FakeTensorMode installs none, and
    ``torch._C`` has no ``_ensureCUDADeviceGuardSet``), and there is no CUDA device."""
    if not has_dynamo_exporter() or at_least("2.12"):
        return False
    import torch

    return hasattr(torch._C, "_ensureCUDADeviceGuardSet") and torch.cuda.device_count() == 0


# --- custom symbolics on the torch.export route (private internals live in dynamo/torch_internals.py)

#: the private torch modules and attributes the symbolics adapter relies on
SYMBOLICS_INTERNALS: tuple[tuple[str, str], ...] = (
    ("torch.onnx._internal.exporter._core", "current_tracer"),
    ("torch.onnx._internal.torchscript_exporter.jit_utils", "GraphContext"),
    ("torch.onnx._internal.torchscript_exporter._globals", "GLOBALS"),
    ("torch.onnx._internal.torchscript_exporter.registration", "registry"),
    ("torch.onnx._internal.torchscript_exporter.utils", "register_custom_op_symbolic"),
    ("torch.onnx._internal.torchscript_exporter.utils", "unregister_custom_op_symbolic"),
    ("torch._C", "_jit_pass_onnx_scalar_type_analysis"),
    ("torch._C", "_jit_pass_onnx_graph_shape_type_inference"),
    ("torch.onnx._internal.torchscript_exporter.utils", "_trigger_symbolic_function_registration"),
)


def _has_attr(module: str, attr: str) -> bool:
    import importlib

    try:
        return hasattr(importlib.import_module(module), attr)
    except ImportError:
        return False


def has_legacy_symbolic_registry() -> bool:
    """torch's TorchScript symbolic registry (where ``register_custom_op_symbolic`` writes);
    part of the TorchScript exporter, so hidden with it."""
    return not torchscript_hidden() and _has_legacy_symbolic_registry()


def ships_legacy_symbolic_registry() -> bool:
    """torch still ships that registry, hidden or not: registrations made directly with torch
    (``torch.onnx.register_custom_op_symbolic`` at a library's import) are read from it."""
    return _has_legacy_symbolic_registry()


@functools.cache
def _has_legacy_symbolic_registry() -> bool:
    return all(_has_attr(m, a) for m, a in SYMBOLICS_INTERNALS[3:])


def has_legacy_graph_context() -> bool:
    """The TorchScript ``GraphContext`` (``g``) legacy symbolics are written against; part of the
    TorchScript exporter, so hidden with it."""
    return not torchscript_hidden() and _has_legacy_graph_context()


@functools.cache
def _has_legacy_graph_context() -> bool:
    return all(_has_attr(m, a) for m, a in SYMBOLICS_INTERNALS[1:3]) and hasattr(
        __import__("torch")._C, "Graph"
    )


@functools.cache
def has_exporter_tracer() -> bool:
    """The new exporter's node recorder that custom translations append ONNX IR nodes to."""
    return has_dynamo_exporter() and _has_attr(*SYMBOLICS_INTERNALS[0])


@functools.cache
def can_scope_pytree_nodes() -> bool:
    """A pytree node registered for one export can be removed after it (``_deregister_pytree_node``,
    which only covers the Python pytree: not when optree's C++ pytree is also in use)."""
    from torch.utils import _pytree

    return hasattr(_pytree, "_deregister_pytree_node") and not getattr(_pytree, "_cxx_pytree_exists", True)


def onnx_log_stream_setter() -> Callable[[str], None] | None:
    """torch's switch for where the TorchScript exporter's C++ log goes ("stdout"/"stderr");
    private, so probed: None where this torch has none."""
    import torch

    return getattr(torch._C, "_jit_set_onnx_log_output_stream", None)


def dynamo_default_opset() -> int:
    """The opset ``torch.onnx.export(..., dynamo=True)`` produces when none is given."""
    try:
        from torch.onnx import _constants

        return int(_constants.ONNX_DEFAULT_OPSET)
    except (ImportError, AttributeError):
        from compat.catalog import DYNAMO_MIN_OPSET

        return DYNAMO_MIN_OPSET


def max_opset() -> int:
    """The highest ``opset_version`` torch's exporters accept."""
    try:
        from torch.onnx import _constants

        return int(_constants.ONNX_MAX_OPSET)
    except (ImportError, AttributeError):
        import onnx.defs

        return int(onnx.defs.onnx_opset_version())
