"""Stub workers on 127.0.0.1 (free ports), and hand-built requests for them."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import grpc
import pytest

from mmctl.preprocess.pixels import PixelFormat
from mmctl.request.compose import compose
from mmctl.transport.shm import ShmArena, shm_dir
from mmctl.wire import proto
from mmctl.worker import checks
from mmctl.worker.server import UNLIMITED, StubConfig, start


class Stub:
    def __init__(self, running, log: io.StringIO) -> None:
        self.running, self.log = running, log
        self.channel = grpc.insecure_channel(running.address, options=UNLIMITED)
        self.engine = proto.engine_grpc().VllmEngineStub(self.channel)

    def generate(self, req, timeout: float = 30) -> tuple[list[int], object]:
        """(all output token ids, the Complete message)."""
        tokens: list[int] = []
        complete = None
        for resp in self.engine.Generate(req, timeout=timeout):
            if resp.HasField("chunk"):
                tokens.extend(resp.chunk.token_ids)
            else:
                complete = resp.complete
                if not req.stream:
                    tokens.extend(complete.output_ids)
        return tokens, complete

    def close(self) -> None:
        self.channel.close()
        self.running.stop(grace=0.5)


def _stub(model, **policy_and_cfg) -> Stub:
    cfg_keys = {"answer", "delay_ms", "allowed_local_media_path"}
    cfg_kw = {k: v for k, v in policy_and_cfg.items() if k in cfg_keys}
    policy = checks.Policy(**{k: v for k, v in policy_and_cfg.items() if k not in cfg_keys})
    log = io.StringIO()
    running = start(StubConfig(model=model, policy=policy, log=log, **cfg_kw), port=0)
    return Stub(running, log)


@pytest.fixture(scope="module")
def stub(builtin_model) -> Iterator[Stub]:
    s = _stub(builtin_model)
    yield s
    s.close()


@pytest.fixture
def make_stub(builtin_model):
    made: list[Stub] = []

    def make(**kw) -> Stub:
        s = _stub(builtin_model, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


@pytest.fixture
def video_request(red_blue, builtin_model):
    """A fresh red/blue video GenerateRequest (float32, inline) per call."""

    def build(fmt: PixelFormat = PixelFormat.FLOAT32, prompt: str = "Which colours?", **kw):
        composed = compose([red_blue], prompt, builtin_model, pixel_format=fmt, **kw)
        return composed.plan.to_proto(), composed

    return build


def shm_placer(arena: ShmArena, min_bytes: int = 0):
    """Place tensors of at least ``min_bytes`` in /dev/shm (the send command's rule)."""
    common, engine = proto.common(), proto.engine()
    from mmctl.request.tensors import inline, wire_array

    def place(key, array, dtype):
        data = wire_array(array, dtype)
        if data.nbytes < min_bytes:
            return inline(data, dtype)
        seg = arena.put(data)
        return engine.TensorData(
            shape=list(data.shape),
            dtype=dtype,
            shm=common.ShmHandle(
                name=seg.name, offset=0, nbytes=seg.nbytes, owner_id=str(os.getpid())
            ),
        )

    return place


@pytest.fixture
def no_leaks():
    """Fails the test if it leaves mmctl files of this process in /dev/shm."""
    prefix = f"mmctl-{os.getpid()}-"
    before = {p.name for p in shm_dir().iterdir() if p.name.startswith(prefix)}
    yield
    after = {p.name for p in shm_dir().iterdir() if p.name.startswith(prefix)}
    assert after <= before, f"leaked in /dev/shm: {sorted(after - before)}"
