"""Zero-config model files: the worker's own tokenizer bundle, verified and cached.

``GetTokenizer`` streams a zip in 64 KiB chunks with the sha256 of the whole
zip on the last one. mmctl checks it, unpacks it once into
``<cache>/bundles/<sha256>/`` and remembers which bundle a worker serves
(``<cache>/workers/<key>``, keyed by address and the model's identity from
``GetModelInfo``), so the next run reuses it without fetching again.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import grpc

from mmctl.checkpoint.source import ModelSource, cache_root, cached_bundle, from_bundle_bytes
from mmctl.client.channel import Target, as_error
from mmctl.errors import InputError
from mmctl.wire import proto

if TYPE_CHECKING:
    from mmctl.wire.proto import engine_pb2

MAX_BUNDLE = 512 * 2**20


def _worker_key(target: Target, model_info: engine_pb2.GetModelInfoResponse) -> str:
    identity = json.dumps(
        [
            target.address,
            model_info.model_path,
            model_info.served_model_name,
            model_info.model_type,
            model_info.vocab_size,
        ]
    )
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


def fetch_bundle(
    channel: grpc.Channel,
    target: Target,
    model_info: engine_pb2.GetModelInfoResponse,
    timeout: float = 60.0,
    refresh: bool = False,
) -> tuple[ModelSource, dict]:
    """The worker's model files and how they were obtained (``{"bundle": …}`` facts)."""
    index = cache_root() / "workers" / _worker_key(target, model_info)
    if not refresh and index.is_file():
        sha = index.read_text().strip()
        source = cached_bundle(sha)
        if source is not None:
            return source, {"sha256": sha, "cached": True, "bytes": None}
    stub = proto.engine_grpc.VllmEngineStub(channel)
    data = bytearray()
    sha = ""
    try:
        for chunk in stub.GetTokenizer(
            proto.common_pb2.GetTokenizerRequest(), timeout=timeout, metadata=list(target.headers)
        ):
            data += chunk.data
            if len(data) > MAX_BUNDLE:
                raise InputError(
                    f"tokenizer bundle from {target.address} exceeds {MAX_BUNDLE} bytes"
                )
            if chunk.sha256:
                sha = chunk.sha256
    except grpc.RpcError as err:
        raise as_error(err, target, "GetTokenizer") from None
    if not sha:
        raise InputError(
            f"tokenizer bundle from {target.address} carries no sha256; refusing to trust it",
            hint="pass --model-dir with the model's files instead",
        )
    source = from_bundle_bytes(bytes(data), f"worker {target.address}", sha256=sha)
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text(sha.lower() + "\n")
    return source, {"sha256": sha.lower(), "cached": False, "bytes": len(data)}
