"""mmctl: multimodal gRPC requests to vLLM workers, as a library and a command line.

The public API, loaded on first use (PEP 562: ``import mmctl`` stays light,
so the command line starts fast)::

    import mmctl

    with mmctl.Client("localhost:50051") as client:
        print(client.send("clip.mp4", prompt="Which colours appear, in order?").answer)

``Client`` / ``AsyncClient`` talk to a worker; ``batch`` runs a dataset
through several; ``preprocess`` and ``inspect_tokens`` need none. Errors are :class:`MmctlError` subclasses,
each with the exit code the command line uses.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from mmctl._version import __version__

#: public name -> module that defines it
_EXPORTS = {
    "Client": "mmctl.client.client",
    "Connection": "mmctl.client.connection",
    "Built": "mmctl.client.client",
    "AsyncClient": "mmctl.client.aio",
    "SendOptions": "mmctl.client.options",
    "SendResult": "mmctl.client.run",
    "Check": "mmctl.client.run",
    "Health": "mmctl.client.probe",
    "batch": "mmctl.run_batch.api",
    "BatchCounts": "mmctl.run_batch.api",
    "preprocess": "mmctl.offline",
    "inspect_tokens": "mmctl.offline",
    "TokenReport": "mmctl.offline",
    "Sampling": "mmctl.request.build",
    "VisionOverrides": "mmctl.models.settings",
    "VideoPruning": "mmctl.values.pruning",
    "PruningMethod": "mmctl.choices",
    "PixelFormat": "mmctl.choices",
    "Transport": "mmctl.choices",
    "Processing": "mmctl.choices",
    "MediaRef": "mmctl.choices",
    "LayoutKind": "mmctl.choices",
    "MmctlError": "mmctl.errors",
    "UsageError": "mmctl.errors",
    "InputError": "mmctl.errors",
    "WorkerRejected": "mmctl.errors",
    "WorkerUnavailable": "mmctl.errors",
    "CheckFailed": "mmctl.errors",
    "ExitCode": "mmctl.errors",
}

# Literal, so tools see it; tests/unit/test_api.py keeps it equal to _EXPORTS.
__all__ = [
    "AsyncClient",
    "BatchCounts",
    "Built",
    "Check",
    "CheckFailed",
    "Client",
    "Connection",
    "ExitCode",
    "Health",
    "InputError",
    "LayoutKind",
    "MediaRef",
    "MmctlError",
    "PixelFormat",
    "Processing",
    "PruningMethod",
    "Sampling",
    "SendOptions",
    "SendResult",
    "TokenReport",
    "Transport",
    "UsageError",
    "VideoPruning",
    "VisionOverrides",
    "WorkerRejected",
    "WorkerUnavailable",
    "__version__",
    "batch",
    "inspect_tokens",
    "preprocess",
]

if TYPE_CHECKING:
    from mmctl.choices import (
        LayoutKind,
        MediaRef,
        PixelFormat,
        Processing,
        PruningMethod,
        Transport,
    )
    from mmctl.client.aio import AsyncClient
    from mmctl.client.client import Built, Client
    from mmctl.client.connection import Connection
    from mmctl.client.options import SendOptions
    from mmctl.client.probe import Health
    from mmctl.client.run import Check, SendResult
    from mmctl.errors import (
        CheckFailed,
        ExitCode,
        InputError,
        MmctlError,
        UsageError,
        WorkerRejected,
        WorkerUnavailable,
    )
    from mmctl.models.settings import VisionOverrides
    from mmctl.offline import TokenReport, inspect_tokens, preprocess
    from mmctl.request.build import Sampling
    from mmctl.run_batch.api import BatchCounts, batch
    from mmctl.values.pruning import VideoPruning


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mmctl' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
