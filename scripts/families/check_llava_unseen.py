"""mmctl's LLaVA-1.5 / LLaVA-NeXT / LLaVA-OneVision pixels against HF on media the goldens never saw.

Runs in the reference environment (torch, transformers 5.20.2; never in CI)::

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/families/check_llava_unseen.py --images 200 --clips 12

Random-size, random-content images (noise, gradients, flat colour; sides from 1
to ~2000 px, extreme aspect ratios up to 1:60, the pinpoints and their
boundaries) go through HF's ``AutoImageProcessor`` loaded from
tests/fixtures/families/<type>/ (the fast/torchvision processors, as vLLM
uses them) and through mmctl's pure functions; the float32 tensors must be
equal bit for bit, ``image_sizes`` equal, and mmctl's token count equal to
the HF processor's ``_get_num_multimodal_tokens``. LLaVA-NeXT/OneVision are
also checked on multi-image calls (the zero-padded patch axis). OneVision
videos are random numpy clips, sampled with ``sample_indices`` and compared
through ``AutoVideoProcessor`` on the same frames (no encoding: codecs differ
by machine). Prints "N equal, M differ" per family; exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mmctl.media.probe import dimensions  # noqa: E402
from mmctl.models import llava, llava_next  # noqa: E402
from mmctl.models import llava_onevision as onevision  # noqa: E402

FAMILIES = ROOT / "tests" / "fixtures" / "families"
MODULES: dict[str, Any] = {
    "llava": llava,
    "llava_next": llava_next,
    "llava_onevision": onevision,
}


def _json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def vision_for(family: str) -> Any:
    folder = FAMILIES / family
    args = [
        _json(folder / "preprocessor_config.json"),
        _json(folder / "processor_config.json"),
        _json(folder / "config.json"),
    ]
    if family == "llava_onevision":
        args.append(_json(folder / "video_preprocessor_config.json"))
    return MODULES[family].Vision.from_files(*args)


def sizes(rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    """(h, w): fixed edge cases first, then random ones."""
    fixed = [
        (1, 1), (1, 2), (2, 1), (3, 3), (1, 60), (60, 1), (7, 400), (400, 7),
        (100, 300), (300, 100), (336, 336), (336, 672), (672, 336), (672, 672),
        (1008, 336), (336, 1008), (335, 671), (337, 673), (384, 384), (384, 768),
        (768, 384), (1152, 1152), (2000, 2000), (2000, 34), (34, 2000), (961, 1441),
        (500, 1000), (1000, 500), (1000, 501), (501, 1000), (2304, 2304), (1, 2000),
    ]  # fmt: skip
    # llava resizes the short side to 336: beyond 1:60 the long side gets huge
    out = [(h, w) for h, w in fixed if max(h, w) / min(h, w) <= 60]
    while len(out) < count:
        kind = rng.integers(4)
        if kind == 0:  # anything, log-uniform
            h, w = (int(np.exp(rng.uniform(0, np.log(2000)))) for _ in range(2))
        elif kind == 1:  # extreme aspect
            short = int(rng.integers(1, 80))
            long = int(min(2000, short * rng.uniform(5, 60)))
            h, w = (short, long) if rng.integers(2) else (long, short)
        elif kind == 2:  # near a pinpoint's aspect
            base = [(336, 672), (672, 336), (384, 1152), (1152, 384), (768, 768)][rng.integers(5)]
            f = rng.uniform(0.3, 2.5)
            h, w = int(base[0] * f + rng.integers(-2, 3)), int(base[1] * f + rng.integers(-2, 3))
        else:  # photo-like
            h, w = int(rng.integers(200, 2000)), int(rng.integers(200, 2000))
        h, w = max(1, h), max(1, w)
        if max(h, w) / min(h, w) <= 60:
            out.append((h, w))
    return out[:count]


def content(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    kind = rng.integers(3)
    if kind == 0:
        return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    if kind == 1:
        yy, xx = np.meshgrid(np.linspace(0, 255, h), np.linspace(0, 255, w), indexing="ij")
        noise = rng.integers(-20, 21, size=(h, w, 3))
        grad = np.stack([yy, xx, (yy + xx) / 2], axis=-1) + noise
        return np.clip(grad, 0, 255).astype(np.uint8)
    frame = np.empty((h, w, 3), dtype=np.uint8)
    frame[...] = rng.integers(0, 256, size=3, dtype=np.uint8)
    return frame


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--clips", type=int, default=12)
    parser.add_argument("--batches", type=int, default=25)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()

    import torch
    from PIL import Image
    from transformers import AutoImageProcessor, AutoProcessor, AutoVideoProcessor
    from transformers.utils import logging

    logging.set_verbosity_error()  # "channel dimension is ambiguous" on 1-3 px images: HF picks right
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    frames = [content(rng, h, w) for h, w in sizes(rng, args.images)]
    pils = [Image.fromarray(f) for f in frames]
    failed = False

    for family, module in MODULES.items():
        folder = FAMILIES / family
        vision = vision_for(family)
        hf = AutoImageProcessor.from_pretrained(folder)
        counter = AutoProcessor.from_pretrained(folder)
        equal = differ = 0
        notes: list[str] = []
        for frame, pil in zip(frames, pils, strict=True):
            h, w = frame.shape[:2]
            ref = hf(images=[pil], return_tensors="pt")
            mine = module.image_pixels(frame, vision)
            mine = llava.batch_pixels([mine]) if family == "llava" else module.batch_pixels([mine])
            want = ref["pixel_values"].numpy()
            ok = mine.shape == want.shape and mine.tobytes() == want.tobytes()
            if family != "llava":
                ok = ok and np.array_equal(module.image_sizes([frame]), ref["image_sizes"].numpy())
            hf_tokens = counter._get_num_multimodal_tokens(image_sizes=[(h, w)])[
                "num_image_tokens"
            ][0]
            tokens_ok = module.image_tokens(h, w, vision) == hf_tokens
            if ok and tokens_ok:
                equal += 1
            else:
                differ += 1
                notes.append(
                    f"{dimensions(w, h)}: pixels {'ok' if ok else 'DIFFER'}, tokens "
                    f"{module.image_tokens(h, w, vision)} vs HF {hf_tokens}"
                )
        batch_equal = batch_differ = 0
        if family != "llava":
            for _ in range(args.batches):
                pick = rng.choice(len(frames), size=int(rng.integers(2, 4)), replace=False)
                ref = hf(images=[pils[i] for i in pick], return_tensors="pt")
                mine = module.batch_pixels([module.image_pixels(frames[i], vision) for i in pick])
                want = ref["pixel_values"].numpy()
                if mine.shape == want.shape and mine.tobytes() == want.tobytes():
                    batch_equal += 1
                else:
                    batch_differ += 1
                    notes.append(f"batch {[frames[i].shape[:2] for i in pick]} DIFFER")
        print(
            f"{family}: images {equal} equal, {differ} differ"
            + (f"; batches {batch_equal} equal, {batch_differ} differ" if family != "llava" else "")
        )
        for note in notes[:20]:
            print("   ", note)
        failed |= bool(differ or batch_differ)

    hf_video = AutoVideoProcessor.from_pretrained(FAMILIES / "llava_onevision")
    vision = vision_for("llava_onevision")
    equal = differ = 0
    for _ in range(args.clips):
        total = int(rng.integers(1, 80))
        h, w = int(rng.integers(1, 700)), int(rng.integers(1, 700))
        clip = np.stack([content(rng, h, w) for _ in range(total)])
        indices = onevision.sample_indices(total)
        sampled = clip[indices]
        ref = hf_video(
            videos=[torch.from_numpy(sampled).permute(0, 3, 1, 2).contiguous()],
            do_sample_frames=False,
            return_tensors="pt",
        )["pixel_values_videos"].numpy()
        mine = onevision.video_pixels(sampled, vision)[None]
        ok = mine.shape == ref.shape and mine.tobytes() == ref.tobytes()
        expected_count = min(total, onevision.NUM_FRAMES)
        ok = ok and len(indices) == expected_count
        if ok:
            equal += 1
        else:
            differ += 1
            print(f"    clip {total} frames {dimensions(w, h)} DIFFER")
    print(f"llava_onevision video: clips {equal} equal, {differ} differ")
    failed |= bool(differ)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
