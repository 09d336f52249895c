"""Compare mmctl's Llama 4 functions with HF on media the goldens never saw.

Runs in the reference environment (torch, torchvision, transformers 5.20.2),
never in CI:

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/families/check_llama4_unseen.py [--images 240] [--pairs 600]

1. ``--images`` random images (noise, blocks, gradients; sides from 1 px to
   ~2000 px, a share of them extreme strips) through HF's image processor built
   from tests/fixtures/families/llama4/ and through ``mmctl.models.llama4``:
   the bfloat16 tiles (widened to float32) must be equal bit for bit, the
   aspect ratio equal to vLLM's (``get_best_fit`` as ``_postprocess_hf_mm_data``
   calls it), the prompt ids equal to HF's ``_prompt_split_image`` tokenized.
2. The canvas and resized size alone on ``--sizes`` random (h, w) pairs, HF's
   ``_preprocess`` lines against ``llama4.resized_size`` (cheap: no pixels).
3. ``resize_rgb(filter="bilinear")`` (compiled and numpy passes) against
   torchvision's uint8 antialiased bilinear on ``--pairs`` random
   (source, target) size pairs. torch 2.14's AVX kernel asserts on a 1x1
   target (``UpSampleKernelAVXAntialias.h``); such pairs are listed as refused
   and not counted (Llama 4 never resizes to 1x1: one side always fills).

Prints "N equal, M differ" per part; exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mmctl.media.probe import dimensions  # noqa: E402

FOLDER = ROOT / "tests" / "fixtures" / "families" / "llama4"


def random_side(rng: np.random.Generator, top: int = 2000) -> int:
    return int(np.clip(round(math.exp(rng.uniform(0, math.log(top)))), 1, top))


def random_size(rng: np.random.Generator) -> tuple[int, int]:
    kind = rng.random()
    if kind < 0.15:  # extreme strips
        long, short = int(rng.integers(300, 2001)), int(rng.integers(1, 12))
        return (long, short) if rng.random() < 0.5 else (short, long)
    if kind < 0.25:  # tiny
        return int(rng.integers(1, 40)), int(rng.integers(1, 40))
    return random_side(rng), random_side(rng)


def random_image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    kind = rng.integers(0, 3)
    if kind == 0:
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    if kind == 1:
        cell = int(rng.integers(1, 17))
        blocks = rng.integers(0, 256, (h // cell + 1, w // cell + 1, 3), dtype=np.uint8)
        return np.ascontiguousarray(np.repeat(np.repeat(blocks, cell, 0), cell, 1)[:h, :w])
    y = np.linspace(0, 255, h, dtype=np.float32)[:, None, None]
    x = np.linspace(0, 255, w, dtype=np.float32)[None, :, None]
    mix = rng.random(3).astype(np.float32)
    image = (y * mix + x * (1 - mix)) % 256
    noise = rng.integers(-8, 9, (h, w, 3))
    return np.clip(image + noise, 0, 255).astype(np.uint8)


def check_images(count: int, rng: np.random.Generator) -> tuple[int, int]:
    import torch
    from PIL import Image
    from transformers import AutoProcessor
    from transformers.models.llama4.image_processing_llama4 import (
        SizeDict,
        find_supported_resolutions,
        get_best_fit,
    )

    from mmctl.models import llama4

    processor = AutoProcessor.from_pretrained(str(FOLDER))
    ip = processor.image_processor
    vision = llama4.Vision.from_files(
        _json("preprocessor_config.json"), _json("processor_config.json"), _json("config.json")
    )
    tokens = llama4.Llama4Tokens.from_vocab(
        processor.tokenizer.convert_tokens_to_ids, image_token=vision.image_token
    )
    tile = 336
    resolutions = torch.tensor(
        find_supported_resolutions(
            max_num_chunks=ip.max_patches, patch_size=SizeDict(height=tile, width=tile)
        )
    )
    equal = differ = 0
    for n in range(count):
        h, w = random_size(rng)
        rgb = random_image(rng, h, w)
        ref = ip(images=[Image.fromarray(rgb)], return_tensors="pt")["pixel_values"]
        ref_f32 = ref.to(torch.float32).numpy()
        best = get_best_fit((h, w), resolutions, resize_to_max_canvas=ip.resize_to_max_canvas)
        ref_ratio = (int(best[0]) // tile, int(best[1]) // tile)
        text = processor._prompt_split_image(aspect_ratio=ref_ratio, num_patches_per_chunk=144)
        ref_ids = processor.tokenizer(text, add_special_tokens=False)["input_ids"]

        tiles, ratio = llama4.image_tiles(rgb, vision)
        ids = llama4.image_token_ids(ratio, tokens, patches_per_tile=vision.patches_per_tile)
        same = (
            str(ref.dtype) == "torch.bfloat16"
            and tiles.shape == ref_f32.shape
            and tiles.tobytes() == np.ascontiguousarray(ref_f32).tobytes()
            and ratio == ref_ratio
            and llama4.patches_per_image(ratio) == ref.shape[0]
            and ids == ref_ids
        )
        if same:
            equal += 1
        else:
            differ += 1
            detail = ""
            if tiles.shape == ref_f32.shape:
                detail = f"max |diff| {np.abs(tiles - ref_f32).max()}"
            print(
                f"  image {n}: {dimensions(w, h)} differs: shape {tiles.shape} vs {tuple(ref_f32.shape)}, "
                f"ratio {ratio} vs {ref_ratio}, ids equal {ids == ref_ids} {detail}"
            )
    return equal, differ


def check_sizes(count: int, rng: np.random.Generator) -> tuple[int, int]:
    """HF's ``_preprocess`` size lines, verbatim in effect, against resized_size."""
    import torch
    from transformers.models.llama4.image_processing_llama4 import (
        SizeDict,
        find_supported_resolutions,
        get_best_fit,
        get_max_res_without_distortion,
    )

    from mmctl.models import llama4

    size = SizeDict(height=336, width=336)
    resolutions = torch.tensor(find_supported_resolutions(max_num_chunks=16, patch_size=size))
    equal = differ = 0
    pairs = [random_size(rng) for _ in range(count)]
    pairs += [(h, w) for h in range(1, 60) for w in range(1, 60)]
    # where float64 throughout would be one pixel off HF's float32 tensors
    pairs += [(1420, 1065), (1700, 1275), (1775, 1065), (1868, 1401), (1920, 1450), (2065, 1121)]
    for resize_to_max_canvas in (False, True):
        vision = llama4.Vision(resize_to_max_canvas=resize_to_max_canvas)
        for h, w in pairs:
            target = get_best_fit((h, w), resolutions, resize_to_max_canvas=resize_to_max_canvas)
            cap = None if resize_to_max_canvas else size.height
            if cap is not None:
                bound = (min(max(h, cap), target[0]), min(max(w, cap), target[1]))
            else:
                bound = target
            new = get_max_res_without_distortion((h, w), bound)
            ref = ((int(target[0]), int(target[1])), (max(int(new[0]), 1), max(int(new[1]), 1)))
            if llama4.resized_size(h, w, vision) == ref:
                equal += 1
            else:
                differ += 1
                print(
                    f"  size {dimensions(w, h)} (max canvas {resize_to_max_canvas}): "
                    f"{llama4.resized_size(h, w, vision)} vs HF {ref}"
                )
    return equal, differ


def check_resize(count: int, rng: np.random.Generator) -> tuple[int, int]:
    import torch
    from torchvision.transforms.v2 import functional as F

    from mmctl.preprocessing import resize

    equal = differ = 0
    refused: list[str] = []
    native = resize._native
    for n in range(count):
        top = 700 if n % 5 else 2000
        h, w = random_side(rng, top), random_side(rng, top)
        th, tw = random_side(rng, top), random_side(rng, top)
        if n % 7 == 0:
            th = h  # one axis only
        rgb = random_image(rng, h, w)
        tensor = torch.from_numpy(rgb).permute(2, 0, 1).contiguous()
        try:
            ref = F.resize(
                tensor, [th, tw], interpolation=F.InterpolationMode.BILINEAR, antialias=True
            )
        except RuntimeError as exc:  # torch's own internal asserts (reported, not counted)
            refused.append(
                f"{dimensions(w, h)} -> {dimensions(tw, th)}: {str(exc).splitlines()[0][:120]}"
            )
            continue
        ref_hwc = ref.permute(1, 2, 0).numpy()
        ours = resize.resize_rgb(rgb, th, tw, filter="bilinear")
        resize._native = None
        try:
            ours_numpy = resize.resize_rgb(rgb, th, tw, filter="bilinear")
        finally:
            resize._native = native
        if np.array_equal(ours, ref_hwc) and np.array_equal(ours_numpy, ref_hwc):
            equal += 1
        else:
            differ += 1
            print(f"  resize {dimensions(w, h)} -> {dimensions(tw, th)} differs")
    for line in refused:
        print(f"  torch refused {line}")
    return equal, differ


def _json(name: str) -> dict:
    import json

    return json.loads((FOLDER / name).read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=240)
    parser.add_argument("--sizes", type=int, default=20000)
    parser.add_argument("--pairs", type=int, default=600)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args()

    import torch
    import torchvision
    import transformers

    from mmctl.preprocessing import resize

    torch.set_num_threads(1)
    print(
        f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
        f"transformers {transformers.__version__}; mmctl compiled passes: {resize.native()}"
    )
    rng = np.random.default_rng(args.seed)
    failed = False
    for label, check, count in (
        ("images (tiles, aspect ratio, prompt ids)", check_images, args.images),
        ("sizes (canvas, resized size)", check_sizes, args.sizes),
        ("bilinear resize (compiled and numpy) vs torchvision", check_resize, args.pairs),
    ):
        equal, differ = check(count, rng)
        print(f"{label}: {equal} equal, {differ} differ", flush=True)
        failed |= differ > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
