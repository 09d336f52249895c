"""mmctl's GLM-4.1V / GLM-4.6V functions against HF (and vLLM's loaders) on unseen media.

Runs in the reference environment (torch, transformers 5.20.2; never in CI)::

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/families/check_glm4v_unseen.py --images 300 --clips 16

Random-size, random-content images (sides 1 to ~3000 px, aspect ratios up to
1:150, sizes around the 28-px factor and the pixel budget) go through the
folder's processor (tests/fixtures/families/glm4v|glm46v/) as vLLM calls it
and through ``image_pixels``; the float32 rows and the grid must be equal bit
for bit. Random clips (numpy frames, random frame count and rate: no encoding)
are handed to the processor as vLLM's registered loader hands them (the
frames ``loader_indices`` names, the loader's metadata, ``do_sample_frames``
when every frame was decoded); the processor's kept frames, rows and grid must
equal ``sample_indices`` + ``video_pixels``, and the timestamps the seconds.

With ``--loaders N`` in a Python that has vLLM (the engine environment), it
instead compares ``loader_indices`` with vLLM's own
``DynamicVideoBackend`` / ``GLM46VVideoBackend.compute_frames_index_to_sample``
on N random (frame count, fps) pairs. Prints "N equal, M differ"; exit 1 on any
difference.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mmctl.errors import InputError  # noqa: E402
from mmctl.models import glm4v  # noqa: E402

FAMILIES = ROOT / "tests" / "fixtures" / "families"
SETTINGS = {"glm4v": glm4v.GLM41V, "glm46v": glm4v.GLM46V}


def image_sizes(rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    fixed = [(1, 1), (27, 28), (28, 28), (29, 57), (56, 56), (111, 113), (1, 150), (3000, 20)]
    fixed += [(2192, 2192), (2193, 2191), (3000, 2000), (1000, 7)]
    out = list(fixed)
    while len(out) < count:
        h = int(np.exp(rng.uniform(0, np.log(3000))))
        w = int(np.clip(h * np.exp(rng.uniform(-np.log(120), np.log(120))), 1, 3000))
        if max(h, w) / min(h, w) < 190:
            out.append((h, w))
    return out[:count]


def content(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    kind = rng.integers(3)
    if kind == 0:
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    if kind == 1:
        y = np.linspace(0, 255, h, dtype=np.float32)[:, None, None]
        x = np.linspace(0, 255, w, dtype=np.float32)[None, :, None]
        return np.broadcast_to((y + x) / 2, (h, w, 3)).astype(np.uint8).copy()
    return np.full((h, w, 3), rng.integers(0, 256, 3), dtype=np.uint8)


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def check_images(family: str, processor, rng: np.random.Generator, count: int) -> int:
    from PIL import Image

    s = SETTINGS[family]
    differ = 0
    for h, w in image_sizes(rng, count):
        rgb = content(rng, h, w)
        try:
            ours = glm4v.image_pixels(rgb, s)
        except InputError as err:
            ours = err
        try:
            # vLLM hands the processor PIL images (ImageMediaIO), never arrays.
            hf = processor.image_processor(images=[Image.fromarray(rgb)], return_tensors="pt")
            theirs: object = (hf["pixel_values"].numpy(), tuple(hf["image_grid_thw"][0].tolist()))
        except ValueError as err:
            theirs = err
        if isinstance(ours, Exception) or isinstance(theirs, Exception):
            same = isinstance(ours, Exception) and isinstance(theirs, Exception)
        else:
            same = ours[1] == theirs[1] and _sha(ours[0]) == _sha(theirs[0])  # type: ignore[index]
        if not same:
            differ += 1
            print(
                f"DIFF {family} image {w}x{h}: {ours if isinstance(ours, Exception) else ours[1]} "
                f"vs {theirs if isinstance(theirs, Exception) else theirs[1]}"
            )  # type: ignore[index]
    print(f"{family} images: {count - differ} equal, {differ} differ", flush=True)
    return differ


def check_clips(family: str, processor, rng: np.random.Generator, count: int) -> int:
    from transformers.video_utils import VideoMetadata

    s = SETTINGS[family]
    differ = 0
    for _ in range(count):
        fps = float(rng.choice([2.0, 5.0, 8.0, 10.0, 12.5, 24000 / 1001, 30.0, 60.0]))
        total = int(rng.integers(math.ceil(fps) + 1, int(fps * 45)))
        h, w = int(rng.integers(20, 200)), int(rng.integers(20, 200))
        clip = rng.integers(0, 256, (total, h, w, 3), dtype=np.uint8)
        decoded = glm4v.loader_indices(total, fps, s)
        meta = {
            "total_num_frames": total,
            "fps": fps,
            "duration": total / fps,
            "video_backend": "opencv",
            "frames_indices": decoded,
        }
        try:
            sampled = glm4v.sample_indices(total, fps, s)
        except InputError:
            continue
        out = processor.video_processor(
            videos=[clip[decoded]],
            video_metadata=[VideoMetadata(**meta)],
            do_sample_frames=len(decoded) == total,
            return_metadata=True,
            return_tensors="pt",
        )
        kept = [int(i) for i in out["video_metadata"][0].frames_indices]
        rows, grid = glm4v.video_pixels(clip[list(sampled.indices)], s)
        problems = []
        if kept != list(sampled.indices):
            problems.append(f"frames {kept[:6]}.. vs {list(sampled.indices)[:6]}..")
        if tuple(out["video_grid_thw"][0].tolist()) != grid:
            problems.append(f"grid {out['video_grid_thw'][0].tolist()} vs {grid}")
        elif _sha(out["pixel_values_videos"].numpy()) != _sha(rows):
            problems.append("pixels")
        if len(sampled.seconds) != grid[0]:
            problems.append(f"{len(sampled.seconds)} timestamps for {grid[0]} patches")
        if problems:
            differ += 1
            print(
                f"DIFF {family} clip {total} frames at {fps:.3f} fps {w}x{h}: {'; '.join(problems)}"
            )
    print(f"{family} clips: {count - differ} equal, {differ} differ", flush=True)
    return differ


def check_loaders(rng: np.random.Generator, count: int) -> int:
    from vllm.multimodal.video import DynamicVideoBackend, GLM46VVideoBackend
    from vllm.multimodal.video_decoders import VideoSourceMetadata, VideoTargetMetadata

    loaders = {"glm4v": DynamicVideoBackend, "glm46v": GLM46VVideoBackend}
    differ = 0
    cases = [(6, 10.0), (10, 10.0), (1600, 4.0), (600, 2.0), (601, 2.0), (72000, 30.0)]
    while len(cases) < count:
        fps = float(rng.choice([1.0, 2.0, 7.5, 10.0, 24000 / 1001, 25.0, 30000 / 1001, 60.0]))
        seconds = float(np.exp(rng.uniform(np.log(0.3), np.log(3000))))
        cases.append((max(1, int(seconds * fps)), fps))
    for total, fps in cases[:count]:
        source = VideoSourceMetadata(total, fps, total / fps)
        for family, loader in loaders.items():
            # VideoMediaIO's call: num_frames=32 and each loader's own fps default.
            target = VideoTargetMetadata(32, 2 if family == "glm4v" else -1, 300)
            try:
                theirs = sorted(set(loader.compute_frames_index_to_sample(source, target)))
            except Exception as err:
                theirs = [f"{type(err).__name__}"]  # type: ignore[list-item]
            try:
                ours = glm4v.loader_indices(total, fps, SETTINGS[family])
            except InputError as err:
                ours = [f"{type(err).__name__}"]  # type: ignore[list-item]
            if ours != theirs:
                differ += 1
                print(
                    f"DIFF {family} loader {total} frames at {fps:.3f} fps: {ours[:5]} vs {theirs[:5]}"
                )
    checked = 2 * min(count, len(cases))
    print(f"loaders: {checked - differ} equal, {differ} differ")
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument(
        "--loaders", type=int, default=0, help="vLLM's loaders instead (engine env)"
    )
    parser.add_argument("--seed", type=int, default=20260)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.loaders:
        return 1 if check_loaders(rng, args.loaders) else 0

    import torch
    from transformers import AutoProcessor

    torch.set_num_threads(1)
    differ = 0
    for family in SETTINGS:
        processor = AutoProcessor.from_pretrained(str(FAMILIES / family))
        differ += check_images(family, processor, rng, args.images)
        differ += check_clips(family, processor, rng, args.clips)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
