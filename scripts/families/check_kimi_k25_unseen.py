"""mmctl's Kimi-K2.5 pure functions against vLLM's own processor on random images.

Runs where vLLM (with numba) is installed, e.g. the engine environment:

    ENV/bin/python scripts/families/check_kimi_k25_unseen.py [--count 300] [--seed 0] [--control]

For each random image (sizes from 1 px to past the 16384-patch budget and the 512-patch side
limit, random pixels) it compares ``mmctl.models.kimi_k25`` with vLLM's
``KimiK25FusedVisionProcessor`` (what vLLM 0.33 runs for Kimi): the uint8 patches (device
normalization on, vLLM's default), the float32 patches (off), ``grid_thws`` and the token
count (``media_tokens_calculator``), bit for bit. ``--control`` shifts mmctl's table by one
float32 step: every image must then differ. Prints "N equal, M differ"; exit 1 on any
difference (or, with ``--control``, on any equal).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mmctl.media.probe import dimensions  # noqa: E402
from mmctl.models import kimi_k25  # noqa: E402

MEDIA_PROC_CFG = {
    "in_patch_limit": 16384,
    "patch_size": 14,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "merge_kernel_size": 2,
    "fixed_output_tokens": None,
    "patch_limit_on_one_side": 512,
    "in_patch_limit_each_frame": 4096,
    "in_patch_limit_video": None,
    "temporal_merge_kernel_size": 4,
}


def sizes(rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    fixed = [(1, 1), (1, 700), (700, 1), (13, 15), (28, 28), (29, 27), (2000, 1800), (64, 9000)]
    out = fixed[:count]
    while len(out) < count:
        kind = rng.integers(4)
        if kind == 0:  # small, odd
            out.append((int(rng.integers(1, 120)), int(rng.integers(1, 120))))
        elif kind == 1:  # typical
            out.append((int(rng.integers(100, 1400)), int(rng.integers(100, 1400))))
        elif kind == 2:  # past the patch budget
            out.append((int(rng.integers(1500, 2600)), int(rng.integers(1500, 2600))))
        else:  # long and thin: the per-side limit
            side = int(rng.integers(7200, 9000))
            thin = int(rng.integers(20, 200))
            out.append((side, thin) if rng.integers(2) else (thin, side))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--control", action="store_true")
    args = parser.parse_args()

    from PIL import Image
    from vllm.transformers_utils.processors.kimi_k25_vision_fused import (
        KimiK25FusedVisionProcessor,
    )

    vllm_proc = KimiK25FusedVisionProcessor(media_proc_cfg=MEDIA_PROC_CFG)
    settings = kimi_k25.KimiK25Settings()
    table = kimi_k25.normalize_table(settings)
    if args.control:
        table = np.nextafter(table, np.float32(np.inf))
    rng = np.random.default_rng(args.seed)
    equal = differ = 0
    for height, width in sizes(rng, args.count):
        rgb = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        media = {"type": "image", "image": Image.fromarray(rgb, mode="RGB")}
        tokens = vllm_proc.media_tokens_calculator(dict(media))
        raw_v = vllm_proc.preprocess([dict(media)], do_rescale=False, do_normalize=False)
        norm_v = vllm_proc.preprocess([dict(media)])
        raw, grid = kimi_k25.image_pixels(rgb, settings, normalize=False)
        norm = table[raw, np.arange(3)[None, :, None, None]]
        problems = []
        if tokens != len(kimi_k25.replacement_ids(height, width, settings)):
            problems.append(f"tokens {tokens}")
        if raw_v["grid_thws"].tolist() != [list(grid)]:
            problems.append(f"grid {raw_v['grid_thws'].tolist()} != {grid}")
        if not np.array_equal(raw_v["pixel_values"].numpy(), raw):
            problems.append("uint8 patches")
        got = norm_v["pixel_values"].numpy()
        if got.dtype != norm.dtype or got.tobytes() != norm.tobytes():
            problems.append("float32 patches")
        if problems:
            differ += 1
            if not args.control:
                print(f"DIFF {dimensions(width, height)}: {', '.join(problems)}", flush=True)
        else:
            equal += 1
    print(f"{equal} equal, {differ} differ")
    if args.control:
        return 1 if equal else 0
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
