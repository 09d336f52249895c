"""Hand-built requests for the stub worker (the stubs themselves: tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mmctl.choices import PixelFormat
from mmctl.media import synth
from mmctl.request.compose import compose
from mmctl.transport.shm import ShmArena
from mmctl.wire import proto


@pytest.fixture
def video_request(red_blue, builtin_model):
    """A fresh red/blue video GenerateRequest (float32, inline) per call."""

    def build(fmt: PixelFormat = PixelFormat.FLOAT32, prompt: str = "Which colours?", **kw):
        composed = compose([red_blue], prompt, builtin_model, pixel_format=fmt, **kw)
        return composed.plan.to_proto(), composed

    return build


def shm_placer(arena: ShmArena, min_bytes: int = 0):
    """Place tensors of at least ``min_bytes`` in /dev/shm (the send command's rule)."""
    common, engine = proto.common_pb2, proto.engine_pb2
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


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> tuple[Path, Path]:
    """A red 200x300 and a blue 500x120 PNG (the family stub tests' images)."""
    folder = tmp_path_factory.mktemp("family-media")
    red = synth.write_image(folder / "red.png", synth.color_frame((255, 0, 0), 200, 300))
    blue = synth.write_image(folder / "blue.png", synth.color_frame((0, 0, 255), 500, 120))
    return red, blue
