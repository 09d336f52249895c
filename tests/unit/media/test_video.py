"""Decoding details that the HF parity goldens cannot isolate."""

import os
import signal
import time

import av
import numpy as np
import pytest

from mmctl.media import video


def test_the_kept_rgb_converter_matches_a_fresh_one_across_sizes(fixtures):
    # The per-thread converter is reused between clips; switching frame size
    # (and back) must give what a fresh conversion of each frame gives.
    clips = [fixtures / "media" / name for name in ("ties.mp4", "shrink.mp4", "portrait.mp4")]
    frames = []
    for path in clips + clips[:1]:
        with av.open(str(path)) as container:
            frames += [f for i, f in enumerate(container.decode(video=0)) if i < 3]
    for frame in frames:
        fresh = frame.to_ndarray(format="rgb24")
        kept = video._to_rgb(frame)
        assert kept.shape == fresh.shape == (frame.height, frame.width, 3)
        assert np.array_equal(kept, fresh)


def _decoded(path, count=2):
    with av.open(str(path)) as container:
        return [f for i, f in zip(range(count), container.decode(video=0), strict=False)]


def test_a_forked_child_converts_frames_too(fixtures):
    # The kept converter must not hold FFmpeg scaler threads: a forked child
    # inherits such a pool without its threads, and its first conversion
    # would wait for them forever.
    clip = fixtures / "media" / "shrink.mp4"  # 320x240
    parent = [video._to_rgb(f) for f in _decoded(clip)]
    pid = os.fork()
    if pid == 0:  # the child: convert with the inherited converter, then leave at once
        try:
            child = [video._to_rgb(f) for f in _decoded(clip)]
            same = len(child) == len(parent) and all(map(np.array_equal, parent, child))
            os._exit(0 if same else 1)
        finally:
            os._exit(2)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child's conversion did not finish in 30 s")
