"""mmctl's Qwen3.5 processing against HF (and vLLM's loader) on unseen media.

Runs in the reference environment (torch, transformers 5.20.2; never in CI)::

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/families/check_qwen3_5_unseen.py --images 300 --clips 16

mmctl's side is its real path: the Qwen3.5 folder (tests/fixtures/families/qwen3_5/)
loaded with ``load_model``, each item through ``model.spec.processor.preprocess``
from a file, in both pixel forms vLLM 0.33 can ask for: float32 (normalized; a
worker started with ``--no-mm-device-do-normalize``) and uint8 (a default worker:
vLLM calls HF with ``do_rescale=False, do_normalize=False``). Random-size,
random-content images (1 px to 3000 px, aspect ratios to 1:120) are written as PNG
and go through the folder's image processor as vLLM calls it (one PIL image); rows
and grid must be equal bit for bit, both forms. Random clips (noise, random frame
count and rate) are written losslessly (FFV1; the decoded frames are checked to be
the written ones) and handed to the folder's video processor as vLLM's ``qwen3_vl``
loader hands them (the sampled frames, their metadata, ``do_sample_frames`` when
every frame was kept); rows, grid and the per-temporal-patch timestamps
(``Qwen3VLProcessor._calculate_timestamps``, which vLLM's processor copies) must
equal mmctl's.

With ``--loaders N`` in a Python that has vLLM (the engine environment), it instead
compares mmctl's frame choice with vLLM's own ``Qwen3VLVideoBackend`` on N random
(frame count, fps) pairs. Prints "N equal, M differ"; exit 1 on any difference.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from check_glm4v_unseen import (  # noqa: E402
    ROOT,
    _sha,
    content,
    decoded_frames,
    image_sizes,
    write_clip,
)

from mmctl.choices import PixelFormat  # noqa: E402
from mmctl.errors import InputError  # noqa: E402
from mmctl.media.probe import MediaKind, dimensions  # noqa: E402
from mmctl.models.model import Model, load_model  # noqa: E402
from mmctl.values.items import DEFAULT_OPTIONS  # noqa: E402

FOLDER = ROOT / "tests" / "fixtures" / "families" / "qwen3_5"
FORMS = (PixelFormat.FLOAT32, PixelFormat.UINT8)
RAW = {"do_rescale": False, "do_normalize": False}  # what vLLM passes a device-normalizing worker


def _preprocess(model: Model, path: Path, kind: MediaKind, form: PixelFormat) -> Any:
    try:
        return model.spec.processor.preprocess(path, kind, model.params, form, DEFAULT_OPTIONS)
    except InputError as err:
        return err


def check_images(
    model: Model, processor: Any, rng: np.random.Generator, count: int, tmp: Path
) -> int:
    from PIL import Image

    differ = 0
    for n, (h, w) in enumerate(image_sizes(rng, count)):
        rgb = content(rng, h, w)
        path = tmp / f"{n}.png"
        Image.fromarray(rgb).save(path)
        problems = []
        for form in FORMS:
            pre = _preprocess(model, path, MediaKind.IMAGE, form)
            kwargs = RAW if form is PixelFormat.UINT8 else {}
            hf = processor.image_processor(
                images=[Image.fromarray(rgb)], return_tensors="pt", **kwargs
            )
            grid = tuple(hf["image_grid_thw"][0].tolist())
            if isinstance(pre, Exception):
                problems.append(f"{form.value}: mmctl refused ({pre})")
            elif grid != pre.grid_thw:
                problems.append(f"{form.value}: grid {list(grid)} vs {list(pre.grid_thw)}")
            elif _sha(hf["pixel_values"].numpy()) != _sha(pre.pixel_values):
                problems.append(f"{form.value}: pixels")
        if problems:
            differ += 1
            print(f"DIFF image {dimensions(w, h)}: {'; '.join(problems)}")
        path.unlink()
    print(f"qwen3.5 images: {count - differ} equal, {differ} differ (float32 and uint8 each)")
    return differ


def check_clips(
    model: Model, processor: Any, rng: np.random.Generator, count: int, tmp: Path
) -> int:
    from transformers.video_utils import VideoMetadata

    differ = 0
    rates = [Fraction(2), Fraction(5), Fraction(8), Fraction(10), Fraction(25, 2),
             Fraction(24000, 1001), Fraction(30)]  # fmt: skip
    tp = model.params.temporal_patch_size
    for n in range(count):
        rate = rates[int(rng.integers(len(rates)))]
        total = int(rng.integers(1, int(rate * 30)))
        h, w = int(rng.integers(20, 200)), int(rng.integers(20, 200))
        clip = rng.integers(0, 256, (total, h, w, 3), dtype=np.uint8)
        path = tmp / f"{n}.avi"
        write_clip(path, clip, rate)
        problems = []
        for form in FORMS:
            pre = _preprocess(model, path, MediaKind.VIDEO, form)
            if isinstance(pre, Exception):
                problems.append(f"{form.value}: mmctl refused ({pre})")
                continue
            fps, kept = pre.source.source_fps, pre.frame_indices.tolist()
            if pre.source.total_frames != total:
                problems.append(f"{pre.source.total_frames} frames decoded of {total}")
                break
            if form is FORMS[0] and not np.array_equal(decoded_frames(path, kept), clip[kept]):
                problems.append("the codec was not lossless here (not a difference of mmctl's)")
                break
            meta = VideoMetadata(
                total_num_frames=total,
                fps=fps,
                duration=total / fps,
                video_backend="opencv",
                frames_indices=kept,
            )
            kwargs = RAW if form is PixelFormat.UINT8 else {}
            out = processor.video_processor(
                videos=[clip[kept]],
                video_metadata=[meta],
                do_sample_frames=len(kept) == total,
                return_metadata=True,
                return_tensors="pt",
                **kwargs,
            )
            grid = tuple(out["video_grid_thw"][0].tolist())
            times = processor._calculate_timestamps(list(kept), fps, tp)
            if grid != pre.grid_thw:
                problems.append(f"{form.value}: grid {list(grid)} vs {list(pre.grid_thw)}")
            elif _sha(out["pixel_values_videos"].numpy()) != _sha(pre.pixel_values):
                problems.append(f"{form.value}: pixels")
            if list(pre.patch_times) != times:
                problems.append(f"timestamps {list(pre.patch_times)[:4]} vs {times[:4]}")
        if problems:
            differ += 1
            print(f"DIFF clip {total} frames at {float(rate):.3f} fps {dimensions(w, h)}: "
                  f"{'; '.join(problems)}")  # fmt: skip
        path.unlink()
    print(f"qwen3.5 clips: {count - differ} equal, {differ} differ (float32 and uint8 each)")
    return differ


def check_loader(rng: np.random.Generator, count: int) -> int:
    from vllm.multimodal.video import Qwen3VLVideoBackend
    from vllm.multimodal.video_decoders import VideoSourceMetadata, VideoTargetMetadata

    model = load_model(model_dir=FOLDER)
    variant, vision = model.spec.processor.variant, model.params  # type: ignore[attr-defined]
    cases = [(1, 30.0), (3, 2.0), (6, 10.0), (41, 24000 / 1001), (1600, 4.0), (72000, 30.0)]
    while len(cases) < count:
        fps = float(rng.choice([1.0, 2.0, 7.5, 10.0, 24000 / 1001, 25.0, 30000 / 1001, 30.0]))
        seconds = float(np.exp(rng.uniform(np.log(0.1), np.log(3000))))
        cases.append((max(1, int(seconds * fps)), fps))
    differ = 0
    for total, fps in cases[:count]:
        source = VideoSourceMetadata(total, fps, total / fps)
        # VideoMediaIO's call for this loader: its own fps default (2), no frame count.
        theirs = Qwen3VLVideoBackend.compute_frames_index_to_sample(
            source, VideoTargetMetadata(-1, 2, 300)
        )
        ours = variant.sample_indices(total, fps, vision).tolist()
        if ours != theirs:
            differ += 1
            print(f"DIFF loader {total} frames at {fps:.3f} fps: {ours[:5]} vs {theirs[:5]}")
    checked = min(count, len(cases))
    print(f"qwen3.5 loader: {checked - differ} equal, {differ} differ")
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--loaders", type=int, default=0, help="vLLM's loader instead (engine env)")
    parser.add_argument("--seed", type=int, default=20261)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.loaders:
        return 1 if check_loader(rng, args.loaders) else 0

    import torch
    from transformers import AutoProcessor

    torch.set_num_threads(1)
    model = load_model(model_dir=FOLDER)
    processor = AutoProcessor.from_pretrained(str(FOLDER))
    with tempfile.TemporaryDirectory(prefix="mmctl-qwen3_5-unseen-") as folder:
        differ = check_images(model, processor, rng, args.images, Path(folder))
        differ += check_clips(model, processor, rng, args.clips, Path(folder))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
