"""mmctl preprocess vs vLLM's own media path, warm and in-process, at three
clip sizes and on many small clips, in one run.

    /path/to/reference/python bench/preprocess_native.py [--rounds 7] [--json]
    /path/to/reference/python bench/preprocess.py --native [--rounds 7]   # the same

Contenders, each in this process after a warm-up, interleaved round by round:

* mmctl  — ``mmctl.models.qwen_vl.pipeline.preprocess`` (Qwen3-VL, the
  checkpoint's video budget), uint8 pixels as a default vLLM worker wants;
* floor  — PyAV decoding the whole stream, converting only the sampled frames;
* native — what vLLM 0.33 does with a video it receives (its OpenCV backend:
  the bytes through ``cv2.VideoCapture(BytesIO)``, the metadata pass with its
  end-of-stream seek, ``grab()`` every frame up to the last sampled one and
  ``retrieve()`` + BGR→RGB only the sampled ones; then the Hugging Face
  ``Qwen3VLVideoProcessor`` on those frames with torch on one thread, as vLLM
  runs it). Only where opencv, torch and transformers import.

Clips (generated once into the temp dir, moving pattern, H.264): 128x96 4 s,
640x360 10 s, 1280x720 30 s, all 30 fps; then 50 clips of 2–6 s between
128x96 and 640x360 (seeded), preprocessed one after another: clips/s.
Goals: mmctl <= 0.67x native at every size, the 720p clip <= 1.2x the floor,
>= 1.5x native's clips/s on the small clips.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = {  # name: (frames, fps, height, width)
    "128x96 4s": (120, 30.0, 96, 128),
    "640x360 10s": (300, 30.0, 360, 640),
    "1280x720 30s": (900, 30.0, 720, 1280),
}
VIDEO_BUDGET = {"shortest_edge": 4096, "longest_edge": 25165824}


def clip(folder: Path, name: str, frames: int, fps: float, height: int, width: int) -> Path:
    from mmctl.media import synth

    path = folder / f"mmctl-native-{name.replace(' ', '-')}.mp4"
    if not path.exists():
        tmp = path.with_suffix(".part.mp4")
        synth.pattern_clip(tmp, frames, fps, height, width)
        tmp.rename(path)
    return path


def small_clips(folder: Path, count: int = 50, seed: int = 0) -> list[Path]:
    rng = random.Random(seed)
    sides = [(96, 128), (144, 256), (240, 320), (270, 480), (360, 640)]
    paths = []
    for n in range(count):
        height, width = rng.choice(sides)
        seconds = rng.uniform(2, 6)
        paths.append(clip(folder, f"small-{seed}-{n}", round(seconds * 30), 30.0, height, width))
    return paths


def mmctl_contender() -> Callable[[Path], object]:
    from mmctl.choices import PixelFormat
    from mmctl.models.qwen_vl import qwen3_vl
    from mmctl.models.qwen_vl.pipeline import preprocess

    return lambda path: preprocess(
        path, qwen3_vl.VARIANT, qwen3_vl.FAMILY.settings(), PixelFormat.UINT8
    )


def floor_contender() -> Callable[[Path], object]:
    from _floor import floor_frames  # one floor for both preprocessing scripts

    return floor_frames


def native_contender() -> Callable[[Path], object] | None:
    try:
        import cv2
        import numpy as np
        import torch
        from cv2 import videoio_registry as vr
        from transformers import Qwen3VLVideoProcessor
        from transformers.video_utils import VideoMetadata
    except ImportError:
        return None
    from mmctl.models.qwen_vl import qwen3_vl

    torch.set_num_threads(1)
    backend = next(b for b in vr.getStreamBufferedBackends() if vr.hasBackend(b))
    # cap_pixels_per_frame=False: the behaviour of the transformers vLLM 0.33 pins (<5.21).
    processor = Qwen3VLVideoProcessor(size=VIDEO_BUDGET, cap_pixels_per_frame=False)

    def capture(data: bytes) -> object:
        cap = cv2.VideoCapture(BytesIO(data), backend, [])
        if not cap.isOpened():
            raise RuntimeError("opencv cannot open the clip")
        return cap

    def run(path: Path) -> object:
        data = path.read_bytes()  # vLLM receives bytes (a data URL or a download)
        cap = capture(data)
        meta_cap = capture(data)  # vLLM's get_video_metadata opens its own
        total = int(meta_cap.get(cv2.CAP_PROP_FRAME_COUNT))
        fps = meta_cap.get(cv2.CAP_PROP_FPS)
        if meta_cap.set(cv2.CAP_PROP_POS_AVI_RATIO, 1.0):  # its edit-list cross-check
            meta_cap.grab()
        indices = qwen3_vl.VARIANT.sample_indices(total, fps, qwen3_vl.FAMILY.settings()).tolist()
        wanted = set(indices)
        width, height = (
            int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
            int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
        )
        frames = np.empty((len(wanted), height, width, 3), dtype=np.uint8)
        i = 0
        for idx in range(max(indices) + 1):
            if not cap.grab():
                continue
            if idx in wanted:
                ok, frame = cap.retrieve()
                if ok:
                    frames[i] = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
                    i += 1
        metadata = VideoMetadata(
            total_num_frames=total, fps=fps, frames_indices=indices, width=width, height=height
        )
        return processor(
            videos=[frames[:i]],
            video_metadata=[metadata],
            do_sample_frames=False,
            return_tensors="pt",
        )

    return run


def timed(fn: Callable[[Path], object], path: Path) -> float:
    start = time.perf_counter()
    fn(path)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    contenders = {"mmctl": mmctl_contender(), "floor": floor_contender()}
    native = native_contender()
    if native is not None:
        contenders["native"] = native
    clips = {name: clip(args.folder, name, *spec) for name, spec in SIZES.items()}
    times: dict[str, dict[str, list[float]]] = {c: {n: [] for n in contenders} for c in clips}
    for name, path in clips.items():
        outputs = {who: fn(path) for who, fn in contenders.items()}  # warm-up
        if native is not None:  # the same work: the grid HF computes is mmctl's
            grid = tuple(int(v) for v in outputs["native"]["video_grid_thw"][0])
            if grid != outputs["mmctl"].grid_thw:
                raise SystemExit(
                    f"{name}: grids differ: mmctl {outputs['mmctl'].grid_thw}, HF {grid}"
                )
    for r in range(args.rounds):
        order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
        for name, path in clips.items():
            for who in order:
                times[name][who].append(timed(contenders[who], path))
    medians = {c: {w: statistics.median(t) for w, t in ts.items()} for c, ts in times.items()}

    smalls = small_clips(args.folder)
    rates: dict[str, float] = {}
    for who in contenders:
        contenders[who](smalls[0])
    for who in contenders:
        start = time.perf_counter()
        for path in smalls:
            contenders[who](path)
        rates[who] = len(smalls) / (time.perf_counter() - start)

    report: dict = {"rounds": args.rounds, "median_s": medians, "small_clips_per_s": rates}
    report["mmctl_over_floor"] = {c: m["mmctl"] / m["floor"] for c, m in medians.items()}
    if native is not None:
        report["mmctl_over_native"] = {c: m["mmctl"] / m["native"] for c, m in medians.items()}
        report["small_clips_mmctl_over_native"] = rates["mmctl"] / rates["native"]
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(
        f"{'clip':14s}"
        + "".join(f"{w:>10s}" for w in contenders)
        + "   mmctl/floor"
        + ("   mmctl/native" if native else "")
    )
    for c, m in medians.items():
        line = f"{c:14s}" + "".join(f"{m[w] * 1000:8.1f}ms" for w in contenders)
        line += f"   {report['mmctl_over_floor'][c]:11.3f}"
        if native is not None:
            line += f"   {report['mmctl_over_native'][c]:12.3f}"
        print(line)
    print("50 small clips: " + ", ".join(f"{w} {r:.1f} clips/s" for w, r in rates.items()))
    if native is not None:
        print(
            f"small clips mmctl/native clips/s = {report['small_clips_mmctl_over_native']:.2f} (goal >= 1.5)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
