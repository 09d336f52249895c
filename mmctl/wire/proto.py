"""The one way into mmctl's generated protobuf and gRPC code, loaded on first use.

The modules are generated from ``proto/*.proto`` by ``scripts/gen_proto.py``
into :mod:`mmctl.wire._gen` (with ``.pyi`` stubs) and registered in mmctl's
private descriptor pool (see that script's docstring for why). They cost
tens of milliseconds to import, so this module serves them lazily (PEP 562)
and the command line never pays for them before it needs them; the
``TYPE_CHECKING`` imports give every call site the stubs' types::

    from mmctl.wire import proto

    req = proto.engine_pb2.GenerateRequest(request_id="x")
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from google.protobuf.descriptor_pool import DescriptorPool

    from mmctl.wire._gen import common_pb2 as common_pb2

#: attribute -> generated module
_MODULES = {
    "engine_pb2": "mmctl.wire._gen.vllm_engine_pb2",  # vllm.grpc.engine messages
    "common_pb2": "mmctl.wire._gen.common_pb2",  # smg.grpc.common messages, Modality
    "engine_grpc": "mmctl.wire._gen.vllm_engine_pb2_grpc",  # VllmEngineStub / Servicer
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'mmctl.wire.proto' has no attribute {name!r}")
    value = import_module(module)
    globals()[name] = value
    return value


def descriptor_pool() -> DescriptorPool:
    """mmctl's private descriptor pool (for reflection and compatibility checks)."""
    import_module(_MODULES["engine_pb2"])  # registers both files
    from mmctl.wire._gen._pool import POOL

    return POOL


#: gRPC channel and server options: no message-size limits, like the real
#: worker (a video's pixel tensor is hundreds of megabytes inline).
UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]

#: Proto file names as registered in the pool; the same names as upstream's,
#: so ``import "common.proto"`` resolves alike on both sides.
PROTO_FILES = ("common.proto", "vllm_engine.proto")
SERVICE_NAME = "vllm.grpc.engine.VllmEngine"
