"""Write tests/fixtures/hf/resize_exact.npz: torchvision's uint8 antialiased bicubic
on seeded random images (the test regenerates the inputs from the seeds).

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/make_resize_fixtures.py   # needs torch + torchvision
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "hf" / "resize_exact.npz"

# (seed, source h, w, target h, w): enlarging, shrinking, mixed, tiny, blocky.
CASES = [
    (1, 90, 130, 96, 128),
    (2, 48, 96, 56, 112),
    (3, 20, 28, 64, 64),
    (4, 161, 97, 80, 200),
    (5, 300, 17, 150, 40),
    (6, 7, 9, 33, 45),
    (7, 200, 240, 199, 241),
    # Both axes shrink: where two Pillow passes were 2 levels off.
    (8, 400, 620, 198, 307),
    (9, 360, 640, 210, 378),
    (10, 64, 1200, 32, 300),
    (11, 40, 30, 160, 120),
]


def case_image(seed: int, h: int, w: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (h // 4 + 1, w // 4 + 1, 3), dtype=np.uint8)
    noise = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    image = np.repeat(np.repeat(blocks, 4, 0), 4, 1)[:h, :w]
    return np.where(rng.random((h, w, 1)) < 0.2, noise, image).astype(np.uint8)


def main() -> int:
    import torch
    import torchvision
    from torchvision.transforms.v2 import functional as F

    record = {"cases": np.asarray(CASES, dtype=np.int64)}
    for n, (seed, h, w, th, tw) in enumerate(CASES):
        t = torch.from_numpy(case_image(seed, h, w)).permute(2, 0, 1).contiguous()
        out = F.resize(t, [th, tw], interpolation=F.InterpolationMode.BICUBIC, antialias=True)
        record[f"out{n}"] = out.permute(1, 2, 0).numpy()
    np.savez_compressed(OUT, **record)
    print(OUT, json.dumps({"torch": torch.__version__, "torchvision": torchvision.__version__}))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
