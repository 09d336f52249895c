"""mmctl's GLM-4.1V / GLM-4.6V processing against HF (and vLLM's loaders) on unseen media.

Runs in the reference environment (torch, transformers 5.20.2; never in CI)::

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/families/check_glm4v_unseen.py --images 300 --clips 16

mmctl's side is its real path: the folder loaded with ``load_model`` (the
family and its 4.1V/4.6V processing chosen from the files), each item through
``model.spec.processor.preprocess`` from a file. Random-size, random-content
images (sides 1 to ~3000 px, aspect ratios up to 1:190, sizes around the 28-px
factor and the pixel budget) are written as PNG (lossless) and go through the
folder's processor (tests/fixtures/families/glm4v|glm46v/) as vLLM calls it;
the float32 rows and the grid must be equal bit for bit. Random clips (noise,
random frame count and rate) are written losslessly (FFV1 RGB in AVI; the
frames mmctl decodes are checked to be the written ones) and handed to the
processor as vLLM's registered loader hands them (the frames
``loader_indices`` names, the loader's metadata, ``do_sample_frames`` when
every frame was decoded); the processor's kept frames, rows and grid must
equal mmctl's, and vLLM's timestamps (whole seconds of every second kept
frame) the ones mmctl writes.

With ``--loaders N`` in a Python that has vLLM (the engine environment), it
instead compares ``loader_indices`` with vLLM's own
``DynamicVideoBackend`` / ``GLM46VVideoBackend.compute_frames_index_to_sample``
on N random (frame count, fps) pairs. Prints "N equal, M differ"; exit 1 on any
difference.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mmctl.choices import PixelFormat  # noqa: E402
from mmctl.errors import InputError  # noqa: E402
from mmctl.media.probe import MediaKind, dimensions  # noqa: E402
from mmctl.models import glm4v  # noqa: E402
from mmctl.models.model import Model, load_model  # noqa: E402
from mmctl.values.items import DEFAULT_OPTIONS  # noqa: E402

FAMILIES = ROOT / "tests" / "fixtures" / "families"
FOLDERS = ("glm4v", "glm46v")


def _preprocess(model: Model, path: Path, kind: MediaKind) -> Any:
    """mmctl's item as ``mmctl build --pixel-dtype float32`` makes it, or its refusal."""
    try:
        return model.spec.processor.preprocess(
            path, kind, model.params, PixelFormat.FLOAT32, DEFAULT_OPTIONS
        )
    except InputError as err:
        return err


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


def check_images(
    model: Model, processor: Any, rng: np.random.Generator, count: int, tmp: Path
) -> int:
    from PIL import Image

    family = model.params.variant
    differ = 0
    for n, (h, w) in enumerate(image_sizes(rng, count)):
        rgb = content(rng, h, w)
        path = tmp / f"{n}.png"
        Image.fromarray(rgb).save(path)
        pre = _preprocess(model, path, MediaKind.IMAGE)
        ours = pre if isinstance(pre, Exception) else (pre.pixel_values, pre.grid_thw)
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
                f"DIFF {family} image {dimensions(w, h)}: {ours if isinstance(ours, Exception) else ours[1]} "
                f"vs {theirs if isinstance(theirs, Exception) else theirs[1]}"  # type: ignore[index]
            )
        path.unlink()
    print(f"{family} images: {count - differ} equal, {differ} differ", flush=True)
    return differ


def write_clip(path: Path, clip: np.ndarray, fps: Fraction) -> None:
    """Lossless: FFV1 keeps RGB exactly (no chroma subsampling)."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=fps)
        stream.width, stream.height = clip.shape[2], clip.shape[1]
        stream.pix_fmt = "bgr0"
        for rgb in clip:
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="bgr0")
            container.mux(stream.encode(frame))
        container.mux(stream.encode())


def decoded_frames(path: Path, indices: list[int]) -> np.ndarray:
    """The frames mmctl's decoder gives for ``indices`` (the lossless check)."""
    from mmctl.media.video import decode_sampled

    got: dict[int, np.ndarray] = {}

    def sink(pos: int, rgb: np.ndarray) -> None:
        got[pos] = rgb

    decode_sampled(path, lambda total, fps: np.asarray(indices, dtype=np.int64), sink)
    return np.stack([got[p] for p in range(len(indices))])


def check_clips(
    model: Model, processor: Any, rng: np.random.Generator, count: int, tmp: Path
) -> int:
    from transformers.video_utils import VideoMetadata

    family, s = model.params.variant, model.params
    differ = refused = 0
    rates = [Fraction(2), Fraction(5), Fraction(8), Fraction(10), Fraction(25, 2),
             Fraction(24000, 1001), Fraction(30), Fraction(60)]  # fmt: skip
    for n in range(count):
        rate = rates[int(rng.integers(len(rates)))]
        # The first clip is under 1 s (both must refuse it), the rest up to 45 s.
        total = int(rng.integers(2, int(rate) if n == 0 else int(rate * 45)))
        h, w = int(rng.integers(20, 200)), int(rng.integers(20, 200))
        clip = rng.integers(0, 256, (total, h, w, 3), dtype=np.uint8)
        path = tmp / f"{n}.avi"
        write_clip(path, clip, rate)
        pre = _preprocess(model, path, MediaKind.VIDEO)
        fps = float(rate) if isinstance(pre, Exception) else pre.source.source_fps
        decoded = glm4v.loader_indices(total, fps, s)
        meta = {
            "total_num_frames": total,
            "fps": fps,
            "duration": total / fps,
            "video_backend": "opencv",
            "frames_indices": decoded,
        }
        try:
            out = processor.video_processor(
                videos=[clip[decoded]],
                video_metadata=[VideoMetadata(**meta)],
                do_sample_frames=len(decoded) == total,
                return_metadata=True,
                return_tensors="pt",
            )
        except ValueError as err:
            out = err
        problems = []
        if isinstance(pre, Exception) or isinstance(out, Exception):
            if not (isinstance(pre, Exception) and isinstance(out, Exception)):
                problems.append(f"mmctl {pre!r:.80} vs HF {out!r:.80}")
            else:
                refused += 1
        else:
            kept = [int(i) for i in out["video_metadata"][0].frames_indices]
            ours = pre.frame_indices.tolist()
            grid = tuple(out["video_grid_thw"][0].tolist())
            seconds = [float(int(i / fps)) for i in kept][::2]
            if pre.source.total_frames != total:
                problems.append(f"{pre.source.total_frames} frames decoded of {total}")
            elif not np.array_equal(decoded_frames(path, ours), clip[ours]):
                problems.append("the codec was not lossless here (not a difference of mmctl's)")
            if kept != ours:
                problems.append(f"frames {kept[:6]}.. vs {ours[:6]}..")
            if grid != pre.grid_thw:
                problems.append(f"grid {list(grid)} vs {list(pre.grid_thw)}")
            elif _sha(out["pixel_values_videos"].numpy()) != _sha(pre.pixel_values):
                problems.append("pixels")
            if list(pre.patch_times) != seconds:
                problems.append(f"timestamps {list(pre.patch_times)} vs vLLM's {seconds}")
        if problems:
            differ += 1
            print(
                f"DIFF {family} clip {total} frames at {fps:.3f} fps {dimensions(w, h)}: {'; '.join(problems)}"
            )
        path.unlink()
    print(
        f"{family} clips: {count - differ} equal ({refused} of them refused by both), "
        f"{differ} differ",
        flush=True,
    )
    return differ


def check_loaders(rng: np.random.Generator, count: int) -> int:
    from vllm.multimodal.video import DynamicVideoBackend, GLM46VVideoBackend
    from vllm.multimodal.video_decoders import VideoSourceMetadata, VideoTargetMetadata

    loaders = {"glm4v": DynamicVideoBackend, "glm46v": GLM46VVideoBackend}
    models = {f: load_model(model_dir=FAMILIES / f) for f in FOLDERS}
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
                ours = glm4v.loader_indices(total, fps, models[family].params)
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
    with tempfile.TemporaryDirectory(prefix="mmctl-glm-unseen-") as folder:
        for family in FOLDERS:
            model = load_model(model_dir=FAMILIES / family)
            processor = AutoProcessor.from_pretrained(str(FAMILIES / family))
            differ += check_images(model, processor, rng, args.images, Path(folder))
            differ += check_clips(model, processor, rng, args.clips, Path(folder))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
