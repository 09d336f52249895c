"""Decoding strategies for the sampled frames of a clip, per codec, in one run.

    python bench/decoders.py [--rounds 5]            # PyAV strategies
    /path/to/reference/python bench/decoders.py      # + OpenCV where cv2 imports

Encodes (once, into the temp dir) a 10 s 640x360 30 fps moving-pattern clip
per codec — H.264 (x264's default GOP, and a 1 s GOP), HEVC (x265), VP9,
AV1 (SVT-AV1) — then, warm and in-process, interleaved round by round, times
each strategy at getting the frames Qwen3-VL samples (2 fps: 20 of 300) and,
separately, a sparse sampling (4 of 300):

* sequential — decode every frame (FFmpeg threads from 320x240), convert the
  sampled ones: the floor the other benchmarks use;
* mmctl      — ``mmctl.media.video.decode_sampled`` (H.264/HEVC: one demux,
  decoding from the IDR before each group of samples to the last sampled
  packet, unsampled non-reference frames skipped; other codecs: sequential);
* seek       — a demux-only pass finds the keyframes; a sampled frame whose
  keyframe lies beyond the decoder's position is reached by a seek to it,
  the others by decoding forward;
* opencv     — what vLLM's backend does: ``grab()`` every frame up to the last
  sampled one, ``retrieve()`` + BGR→RGB the sampled ones (cv2 only).

Exactness is the gate: each strategy's frames are compared with sequential's
(sha256 of the RGB bytes); a strategy whose frames differ is reported as such.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FRAMES, FPS, HEIGHT, WIDTH = 300, 30, 360, 640
#: name, suffix, encoder, options
CLIPS = (
    ("h264", "mp4", "libx264", {"crf": "20"}),
    ("h264-gop30", "mp4", "libx264", {"crf": "20", "g": "30", "keyint_min": "30"}),
    ("hevc", "mp4", "libx265", {"crf": "24", "x265-params": "log-level=error"}),
    ("vp9", "webm", "libvpx-vp9", {"crf": "32", "b": "0"}),
    ("av1", "mkv", "libsvtav1", {"crf": "35", "preset": "10"}),
)


def make_clip(folder: Path, name: str, suffix: str, encoder: str, options: dict) -> Path | None:
    import av

    from mmctl.media import synth

    path = folder / f"decoders-{name}.{suffix}"
    if path.exists():
        return path
    tmp = path.with_name(f"part-{path.name}")
    try:
        with av.open(str(tmp), "w") as container:
            stream = container.add_stream(encoder, rate=Fraction(FPS), options=options)
            stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
            for i in range(FRAMES):
                frame = av.VideoFrame.from_ndarray(synth.pattern_frame(i, HEIGHT, WIDTH))
                container.mux(stream.encode(frame))
            container.mux(stream.encode())
    except Exception as err:
        print(f"{name}: cannot encode ({err})")
        tmp.unlink(missing_ok=True)
        return None
    tmp.rename(path)
    return path


def sequential(path: Path, wanted: list[int]) -> list[np.ndarray]:
    import av

    keep = set(wanted)
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        return [f.to_ndarray(format="rgb24") for i, f in enumerate(c.decode(s)) if i in keep]


def mmctl_path(path: Path, wanted: list[int]) -> list[np.ndarray]:
    from mmctl.media.video import decode_sampled

    frames: dict[int, np.ndarray] = {}
    decode_sampled(path, lambda total, fps: np.asarray(wanted), frames.__setitem__)
    return [frames[k] for k in sorted(frames)]


def seek(path: Path, wanted: list[int]) -> list[np.ndarray]:
    """A demux-only pass finds the keyframes; a sampled frame whose keyframe
    lies beyond the decoder's position is reached by seeking there, the rest
    by decoding forward."""
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        packets = [(p.pts, p.is_keyframe) for p in c.demux(s) if p.size and p.pts is not None]
    order = sorted(pts for pts, _ in packets)  # frame index -> pts
    keys = sorted(pts for pts, key in packets if key)
    out = []
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        frames = None
        position = None  # pts of the last frame decoded
        for index in wanted:
            target = order[index]
            key = max((k for k in keys if k <= target), default=keys[0])
            if frames is None or position is None or key > position:
                c.seek(key, stream=s, backward=True)
                frames = c.decode(s)
            for frame in frames:
                position = frame.pts
                if frame.pts == target:
                    out.append(frame.to_ndarray(format="rgb24"))
                    break
    return out


def opencv(path: Path, wanted: list[int]) -> list[np.ndarray]:
    import cv2

    cap = cv2.VideoCapture(str(path))
    keep, out = set(wanted), []
    try:
        for i in range(max(wanted) + 1):
            if not cap.grab():
                break
            if i in keep:
                ok, bgr = cap.retrieve()
                if ok:
                    out.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
    finally:
        cap.release()
    return out


def digest(frames: list[np.ndarray]) -> str:
    h = hashlib.sha256()
    for f in frames:
        h.update(np.ascontiguousarray(f).tobytes())
    return h.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    strategies: dict[str, Callable[[Path, list[int]], list[np.ndarray]]] = {
        "sequential": sequential,
        "mmctl": mmctl_path,
        "seek": seek,
    }
    try:
        import cv2  # noqa: F401

        strategies["opencv"] = opencv
    except ImportError:
        print("(opencv not importable here: its column is skipped)")
    from mmctl.models.qwen_vl import qwen3_vl

    folder = Path(tempfile.gettempdir())
    dense = qwen3_vl.VARIANT.sample_indices(FRAMES, FPS, qwen3_vl.FAMILY.settings()).tolist()
    sparse = np.linspace(0, FRAMES - 1, 4).round().astype(int).tolist()
    print(f"{'clip':<11} {'sampled':>7}  " + "  ".join(f"{n:>12}" for n in strategies))
    for name, suffix, encoder, options in CLIPS:
        path = make_clip(folder, name, suffix, encoder, options)
        if path is None:
            continue
        for label, wanted in (("20/300", dense), ("4/300", sparse)):
            reference = digest(sequential(path, wanted))
            times: dict[str, list[float]] = {n: [] for n in strategies}
            exact: dict[str, bool] = {}
            for n, fn in strategies.items():
                exact[n] = digest(fn(path, wanted)) == reference  # also the warm-up
            for _ in range(args.rounds):
                for n, fn in strategies.items():
                    t = time.perf_counter()
                    fn(path, wanted)
                    times[n].append(time.perf_counter() - t)
            cells = [
                f"{statistics.median(times[n]) * 1000:8.1f} ms" + (" " if exact[n] else "*")
                for n in strategies
            ]
            print(f"{name:<11} {label:>7}  " + "  ".join(f"{c:>12}" for c in cells))
    print("* frames differ from a full decode's (not exact)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
