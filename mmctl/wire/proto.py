"""The one way into mmctl's generated protobuf and gRPC code.

The modules are generated from ``proto/*.proto`` by ``scripts/gen_proto.py``
into :mod:`mmctl.wire._gen` and registered in mmctl's private descriptor pool
(see that script's docstring for why). They cost tens of milliseconds to
import, so callers ask for them here, inside the function that needs them.
"""

from __future__ import annotations

from types import ModuleType


def engine() -> ModuleType:
    """``vllm.grpc.engine`` messages (GenerateRequest, TensorData, …)."""
    from mmctl.wire._gen import vllm_engine_pb2

    return vllm_engine_pb2


def common() -> ModuleType:
    """``smg.grpc.common`` messages and enums (ShmHandle, Modality, …)."""
    from mmctl.wire._gen import common_pb2

    return common_pb2


def engine_grpc() -> ModuleType:
    """``VllmEngineStub`` / ``VllmEngineServicer`` for ``vllm.grpc.engine.VllmEngine``."""
    from mmctl.wire._gen import vllm_engine_pb2_grpc

    return vllm_engine_pb2_grpc


def descriptor_pool():
    """mmctl's private descriptor pool (for reflection and compatibility checks)."""
    engine()  # registers both files
    from mmctl.wire._gen._pool import POOL

    return POOL


#: gRPC channel and server options: no message-size limits, like the real
#: worker (a video's pixel tensor is hundreds of megabytes inline).
UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]

#: Proto file names as registered in the pool; the same names as upstream's,
#: so ``import "common.proto"`` resolves alike on both sides.
PROTO_FILES = ("common.proto", "vllm_engine.proto")
SERVICE_NAME = "vllm.grpc.engine.VllmEngine"
