"""mmctl's GLM-5-Next processing against HF (and vLLM's loader) on unseen media.

Runs in the reference environment (torch, transformers 5.20.2; never in CI)::

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/families/check_glm5_next_unseen.py --images 300 --clips 16

mmctl's side is its real path: the GLM-5-Next folder (tests/fixtures/families/glm5_next/)
loaded with ``load_model``, each item through ``model.spec.processor.preprocess`` from
a file, in both pixel forms vLLM 0.33 can ask for (float32; uint8, which a default
worker takes: vLLM calls HF with ``do_rescale=False, do_normalize=False``). Random
images (1 px to 3000 px, aspect ratios to 1:120, under and over both token budgets)
go through the folder's image processor as vLLM calls it (one PIL image); rows and
grid must be equal bit for bit. Random clips (noise, random frame count and rate,
written losslessly) go to the folder's video processor as vLLM drives it: its video
budget capped at 30000 tokens, the frames ``Glm5NextVideoBackend`` decodes (ported in
glm5_next_golden.py), ``do_sample_frames`` when that was every frame; rows, grid, the
frames kept and each temporal patch's second (``_get_video_second_idx_glm46v``) must
equal mmctl's.

With ``--loaders N`` in a Python that has vLLM (the engine environment), it instead
compares mmctl's frame choice with vLLM's own ``Glm5NextVideoBackend`` and with the
processor's ``sample_frames`` on N (frame count, fps) pairs. Prints "N equal, M
differ"; exit 1 on any difference.
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
sys.path[:0] = [str(HERE), str(HERE.parent)]

from check_glm4v_unseen import (  # noqa: E402
    ROOT,
    _sha,
    content,
    decoded_frames,
    image_sizes,
    write_clip,
)
from glm5_next_golden import MAX_VIDEO_TOKENS, loader_indices, seconds  # noqa: E402

from mmctl.choices import PixelFormat  # noqa: E402
from mmctl.errors import InputError  # noqa: E402
from mmctl.media.probe import MediaKind, dimensions  # noqa: E402
from mmctl.models import glm5_next  # noqa: E402
from mmctl.models.model import Model, load_model  # noqa: E402
from mmctl.values.items import DEFAULT_OPTIONS  # noqa: E402

FOLDER = ROOT / "tests" / "fixtures" / "families" / "glm5_next"
FORMS = (PixelFormat.FLOAT32, PixelFormat.UINT8)
RAW = {"do_rescale": False, "do_normalize": False}  # what vLLM passes a device-normalizing worker


def _preprocess(model: Model, path: Path, kind: MediaKind, form: PixelFormat) -> Any:
    try:
        return model.spec.processor.preprocess(path, kind, model.params, form, DEFAULT_OPTIONS)
    except InputError as err:
        return err


def _hf_pixels(values: Any, form: PixelFormat) -> np.ndarray:
    array = values.numpy()
    return array.astype(np.uint8) if form is PixelFormat.UINT8 else array


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
            elif _sha(_hf_pixels(hf["pixel_values"], form)) != _sha(pre.pixel_values):
                problems.append(f"{form.value}: pixels")
        if problems:
            differ += 1
            print(f"DIFF image {dimensions(w, h)}: {'; '.join(problems)}")
        path.unlink()
    print(f"glm5-next images: {count - differ} equal, {differ} differ (float32 and uint8 each)")
    return differ


def check_clips(
    model: Model, processor: Any, rng: np.random.Generator, count: int, tmp: Path
) -> int:
    from transformers.video_utils import VideoMetadata

    differ = 0
    rates = [Fraction(1), Fraction(2), Fraction(5), Fraction(8), Fraction(10),
             Fraction(24000, 1001), Fraction(30)]  # fmt: skip
    for n in range(count):
        rate = rates[int(rng.integers(len(rates)))]
        total = int(rng.integers(int(rate) // 2 + 1, int(rate * 30)))
        h, w = int(rng.integers(20, 200)), int(rng.integers(20, 200))
        clip = rng.integers(0, 256, (total, h, w, 3), dtype=np.uint8)
        path = tmp / f"{n}.avi"
        write_clip(path, clip, rate)
        valid = sorted(set(loader_indices(total, float(rate), total / float(rate))))
        metadata = {
            "total_num_frames": total,
            "fps": float(rate),
            "duration": total / float(rate),
            "video_backend": "opencv",
            "frames_indices": valid,
            "do_sample_frames": len(valid) == total,
        }
        problems = []
        for form in FORMS:
            pre = _preprocess(model, path, MediaKind.VIDEO, form)
            if isinstance(pre, Exception):
                problems.append(f"{form.value}: mmctl refused ({pre})")
                continue
            kept = pre.frame_indices.tolist()
            if form is FORMS[0] and not np.array_equal(decoded_frames(path, kept), clip[kept]):
                problems.append("the codec was not lossless here (not a difference of mmctl's)")
                break
            meta = {k: v for k, v in metadata.items() if k != "do_sample_frames"}
            out = processor.video_processor(
                videos=[clip[valid]],
                video_metadata=[VideoMetadata(**meta)],
                do_sample_frames=metadata["do_sample_frames"],
                return_metadata=True,
                return_tensors="pt",
                **(RAW if form is PixelFormat.UINT8 else {}),
            )
            grid = tuple(out["video_grid_thw"][0].tolist())
            theirs = [valid[i] for i in out["video_metadata"][0].frames_indices] if (
                metadata["do_sample_frames"]) else valid  # fmt: skip
            stamps = seconds(metadata, len(valid), processor)
            if kept != [int(i) for i in theirs]:
                problems.append(f"frames {kept[:6]} vs {list(theirs)[:6]}")
            elif grid != pre.grid_thw:
                problems.append(f"{form.value}: grid {list(grid)} vs {list(pre.grid_thw)}")
            elif _sha(_hf_pixels(out["pixel_values_videos"], form)) != _sha(pre.pixel_values):
                problems.append(f"{form.value}: pixels")
            if [int(t) for t in pre.patch_times] != stamps:
                problems.append(f"seconds {list(pre.patch_times)[:4]} vs {stamps[:4]}")
        if problems:
            differ += 1
            print(f"DIFF clip {total} frames at {float(rate):.3f} fps {dimensions(w, h)}: "
                  f"{'; '.join(problems)}")  # fmt: skip
        path.unlink()
    print(f"glm5-next clips: {count - differ} equal, {differ} differ (float32 and uint8 each)")
    return differ


def check_loaders(rng: np.random.Generator, count: int) -> int:
    from transformers import AutoProcessor
    from transformers.video_utils import VideoMetadata
    from vllm.multimodal.video import Glm5NextVideoBackend
    from vllm.multimodal.video_decoders import VideoSourceMetadata, VideoTargetMetadata

    vision = load_model(model_dir=FOLDER).params
    sampler = AutoProcessor.from_pretrained(str(FOLDER)).video_processor
    cases = [(1, 30.0), (3, 10.0), (6, 10.0), (7, 2.0), (41, 24000 / 1001), (1600, 4.0),
             (72000, 30.0), (10, 1.0)]  # fmt: skip
    while len(cases) < count:
        fps = float(rng.choice([1.0, 2.0, 7.5, 10.0, 24000 / 1001, 25.0, 30000 / 1001, 60.0]))
        duration = float(np.exp(rng.uniform(np.log(0.1), np.log(3000))))
        cases.append((max(1, int(duration * fps)), fps))
    differ = 0
    for total, fps in cases[:count]:
        source = VideoSourceMetadata(total, fps, total / fps)
        # VideoMediaIO's call: no fps of its own (-1), so the backend's 2.0.
        loader = Glm5NextVideoBackend.compute_frames_index_to_sample(
            source, VideoTargetMetadata(-1, -1, 300)
        )
        meta = VideoMetadata(total_num_frames=total, fps=fps, duration=total / fps)
        want = (sorted(set(loader)), [int(i) for i in sampler.sample_frames(meta)])
        got = (
            glm5_next.loader_indices(total, fps),
            glm5_next.processor_indices(total, fps, vision),
        )
        if got != want:
            differ += 1
            print(f"DIFF {total} frames at {fps:.3f} fps: {got[0][:5]}… vs {want[0][:5]}…")
    checked = min(count, len(cases))
    print(f"glm5-next loader and sampler: {checked - differ} equal, {differ} differ")
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--loaders", type=int, default=0, help="vLLM's loader instead (engine env)")
    parser.add_argument("--seed", type=int, default=20262)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.loaders:
        return 1 if check_loaders(rng, args.loaders) else 0

    import torch
    from transformers import AutoProcessor

    torch.set_num_threads(1)
    model = load_model(model_dir=FOLDER)
    processor = AutoProcessor.from_pretrained(str(FOLDER))
    vp = processor.video_processor
    vp.max_image_tokens = min(vp.max_image_tokens, MAX_VIDEO_TOKENS)  # get_hf_processor's cap
    with tempfile.TemporaryDirectory(prefix="mmctl-glm5_next-unseen-") as folder:
        differ = check_images(model, processor, rng, args.images, Path(folder))
        differ += check_clips(model, processor, rng, args.clips, Path(folder))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
