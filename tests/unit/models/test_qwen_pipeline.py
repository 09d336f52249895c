"""The video pipeline's hand-off: small frames assembled inline, large ones
on one helper thread — the same tensor either way, errors raised in the caller."""

import threading

import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.models.qwen_vl import pipeline, qwen3_vl
from mmctl.values.items import ItemOptions


def _run(path, **kw):
    return pipeline.preprocess(
        path,
        qwen3_vl.VARIANT,
        qwen3_vl.FAMILY.settings(),
        PixelFormat.UINT8,
        options=ItemOptions(**kw),
    )


def _threads_seen(path, monkeypatch, threshold):
    monkeypatch.setattr(pipeline, "THREADED_FRAME_PIXELS", threshold)
    seen = set()
    pre = _run(path, on_frame=lambda done, total: seen.add(threading.current_thread().name))
    return pre, seen


@pytest.mark.parametrize("clip", ["ties.mp4", "shrink.mp4"])
def test_inline_and_threaded_assembly_give_the_same_tensor(fixtures, monkeypatch, clip):
    path = fixtures / "media" / clip
    inline, inline_threads = _threads_seen(path, monkeypatch, 10**12)
    threaded, threaded_threads = _threads_seen(path, monkeypatch, 0)
    assert inline_threads == {threading.current_thread().name}
    assert len(threaded_threads) == 1
    assert threaded_threads.pop().startswith("mmctl-preprocess")
    assert inline.grid_thw == threaded.grid_thw
    assert np.array_equal(inline.pixel_values, threaded.pixel_values)


def test_the_default_threshold_keeps_small_clips_off_threads(fixtures, monkeypatch):
    small = fixtures / "media" / "ties.mp4"  # 130x90
    large = fixtures / "media" / "shrink.mp4"  # 320x240
    assert 130 * 90 < pipeline.THREADED_FRAME_PIXELS <= 320 * 240
    _, small_threads = _threads_seen(small, monkeypatch, pipeline.THREADED_FRAME_PIXELS)
    _, large_threads = _threads_seen(large, monkeypatch, pipeline.THREADED_FRAME_PIXELS)
    assert small_threads == {threading.current_thread().name}
    assert all(name.startswith("mmctl-preprocess") for name in large_threads)


@pytest.mark.parametrize("threshold", [0, 10**12], ids=["threaded", "inline"])
def test_an_assembly_error_reaches_the_caller_and_no_thread_stays(fixtures, monkeypatch, threshold):
    monkeypatch.setattr(pipeline, "THREADED_FRAME_PIXELS", threshold)
    before = {t.ident for t in threading.enumerate()}

    def fail(done, total):
        if done == 3:
            raise RuntimeError("frame 3 failed")

    with pytest.raises(RuntimeError, match="frame 3 failed"):
        _run(fixtures / "media" / "shrink.mp4", on_frame=fail)
    assert {t.ident for t in threading.enumerate()} <= before


@pytest.mark.parametrize("fmt", ["uint8", "float32", "bfloat16"])
def test_a_decode_in_pieces_gives_the_same_tensor(fixtures, monkeypatch, fmt):
    from mmctl.media import video
    from mmctl.models.settings import VisionOverrides

    path = fixtures / "clips" / "gop_closed.mp4"
    params = qwen3_vl.FAMILY.settings().overridden(VisionOverrides(fps=8.0))  # most of 120
    monkeypatch.setattr(video, "PARALLEL_MIN_PACKETS", 10)
    cut: list[int] = []
    split = video.split_at_idr
    monkeypatch.setattr(video, "split_at_idr", lambda *a: cut.append(len(split(*a))) or split(*a))
    runs = {}
    for threads in (1, 3):
        monkeypatch.setattr(pipeline, "decode_threads", lambda n=threads: n)
        runs[threads] = pipeline.preprocess(path, qwen3_vl.VARIANT, params, PixelFormat(fmt))
    assert cut == [3]  # the second run went in pieces
    one, three = runs[1], runs[3]
    assert one.grid_thw == three.grid_thw and np.array_equal(one.pixel_values, three.pixel_values)
    assert one.frame_indices.tolist() == three.frame_indices.tolist()
