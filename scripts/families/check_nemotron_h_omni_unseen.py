"""Unseen images: vLLM's own Nemotron-3-Nano-Omni processing against mmctl's functions.

Two halves, two environments (vLLM is not in mmctl's; torch never is):

    flock /tmp/mmctl-heavy.lock env HF_HUB_OFFLINE=1 \\
        ~/.cache/mmctl/engine-env-*/bin/python scripts/families/check_nemotron_h_omni_unseen.py \\
        --vllm DIR [--count N]
    .venv/bin/python scripts/families/check_nemotron_h_omni_unseen.py --mmctl DIR

The first writes N seeded random images of random sizes (and six large ones, which
shrink: over 13312 patches) as PNGs into DIR, runs vLLM's processor for the published
folder on each (scripts/families/nemotron_golden.py's ``processor``) and writes each one's
``imgs_sizes`` and the sha256 of its bfloat16 pixel bits to DIR/vllm.json. The second
loads the PNGs with mmctl's loader and prints how many of mmctl's grids and pixel bits
(:mod:`mmctl.models.nemotron_h_omni`) equal vLLM's. Exit 1 if any differ. Writes only
under DIR.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
LARGE = [(2000, 1500), (3000, 400), (1900, 1900), (2500, 2600), (120, 2900), (4000, 3000)]


def run_vllm(out: Path, count: int) -> int:
    import torch
    from PIL import Image
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    sys.path.insert(0, str(ROOT / "scripts" / "families"))
    import nemotron_golden

    proc, _ = nemotron_golden.processor()
    tok = proc.info.get_tokenizer()
    prompt = tok.encode("<|im_start|>user\n<image>\nHi<|im_end|>\n", add_special_tokens=False)
    rng = np.random.default_rng(7)
    sizes = [(int(rng.integers(8, 900)), int(rng.integers(8, 900))) for _ in range(count)]
    records = {}
    for n, (h, w) in enumerate([*sizes, *LARGE]):
        # Structure, not noise: a small random image enlarged, so the filters see edges.
        small = rng.integers(0, 256, size=(max(2, h // 8), max(2, w // 8), 3), dtype=np.uint8)
        image = Image.fromarray(small).resize((w, h), Image.BILINEAR)
        image.save(out / f"{n:03d}.png")
        items = proc.info.parse_mm_data({"image": [image]})
        result = proc.apply(ProcessorInputs(prompt=prompt, mm_data_items=items), TimingContext())
        item = result["mm_kwargs"]["image"][0]
        bits = item["pixel_values_flat"].data.contiguous().view(torch.int16).numpy()
        records[f"{n:03d}"] = {
            "hw": [h, w],
            "imgs_sizes": [int(x) for x in item["imgs_sizes"].data],
            "sha256": hashlib.sha256(bits.tobytes()).hexdigest(),
        }
    (out / "vllm.json").write_text(json.dumps(records, indent=1) + "\n")
    print(f"{len(records)} images through vLLM's processor into {out}")
    return 0


def run_mmctl(out: Path) -> int:
    from mmctl.media.image import load_image
    from mmctl.models import nemotron_h_omni as nemo

    records = json.loads((out / "vllm.json").read_text())
    differ = []
    for name, record in sorted(records.items()):
        rgb = load_image(out / f"{name}.png")[1]
        (grid,) = nemo.image_grids([rgb.shape[:2]], 0)
        sizes = [grid[0] * 16, grid[1] * 16]
        sha = hashlib.sha256(nemo.image_pixels(rgb, grid).tobytes()).hexdigest()
        if sizes != record["imgs_sizes"] or sha != record["sha256"]:
            differ.append(f"{name} {record['hw']}: {sizes} vs {record['imgs_sizes']}")
    print(f"{len(records) - len(differ)} equal, {len(differ)} differ")
    for line in differ:
        print(f"  {line}")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    side = parser.add_mutually_exclusive_group(required=True)
    side.add_argument("--vllm", type=Path, metavar="DIR")
    side.add_argument("--mmctl", type=Path, metavar="DIR")
    parser.add_argument("--count", type=int, default=30, help="random images (plus 6 large)")
    args = parser.parse_args()
    if args.vllm:
        args.vllm.mkdir(parents=True, exist_ok=True)
        return run_vllm(args.vllm, args.count)
    return run_mmctl(args.mmctl)


if __name__ == "__main__":
    sys.exit(main())
