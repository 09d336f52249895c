"""mmctl decodes each committed video to what vLLM's OpenCV loader sees: the
frame count and rate vLLM samples from, the frame size after the display
matrix (a rotated phone clip included), and every frame's RGB bytes.

The goldens (tests/fixtures/opencv/frames.json) are OpenCV's, written by
scripts/make_opencv_fixtures.py in the engine environment; this test needs no
OpenCV. Decoded twice: every frame (the fast path, or the full one for VP9),
and a sparse sampling, on two threads where the stream splits at IDRs.
"""

import hashlib
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from mmctl.media import video

FRAMES = Path(__file__).resolve().parents[2] / "fixtures" / "opencv" / "frames.json"
GOLDEN = {k: v for k, v in json.loads(FRAMES.read_text()).items() if not k.startswith("_")}


def _digest(rgb: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(rgb).data).hexdigest()[:16]


def _decode(path, every: int, threads: int = 1):
    got: dict[int, str] = {}
    lock = threading.Lock()

    def sink(pos: int, rgb: np.ndarray) -> None:
        with lock:
            got[pos] = _digest(rgb)

    info, indices = video.decode_sampled(
        path,
        lambda total, fps: np.arange(0, total, every),
        sink,
        threads=threads,
        shared_sink=sink if threads > 1 else None,
    )
    return info, [int(i) for i in indices], [got[p] for p in range(len(indices))]


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_every_frame_is_what_vllms_opencv_loader_sees(fixtures, name):
    cv = GOLDEN[name]
    info, indices, digests = _decode(fixtures / name, every=1)
    assert info.total_frames == cv["count"] == len(cv["frames"])
    assert info.source_fps == pytest.approx(cv["fps"], abs=1e-9)
    assert (info.width, info.height) == (cv["width"], cv["height"])
    assert indices == list(range(cv["count"]))
    assert digests == cv["frames"]


@pytest.mark.parametrize("name", [n for n in sorted(GOLDEN) if len(GOLDEN[n]["frames"]) >= 40])
def test_sparse_samples_on_two_threads_are_opencvs_frames(fixtures, name):
    cv = GOLDEN[name]
    _, indices, digests = _decode(fixtures / name, every=7, threads=2)
    assert digests == [cv["frames"][i] for i in indices]
