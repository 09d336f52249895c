"""Write tests/fixtures/resize/bilinear_exact.npz: torchvision's uint8 antialiased
bilinear (Llama 4's ``resample=2``) on seeded random images; the test
regenerates the inputs from the seeds (``make_resize_fixtures.case_image``).

    "$(bash scripts/reference/install_env.sh)/bin/python" scripts/make_bilinear_fixtures.py   # needs torch + torchvision
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "resize" / "bilinear_exact.npz"

# (seed, source h, w, target h, w): enlarging, shrinking, mixed, one axis only,
# single rows and columns, Llama 4's own sizes (a tile, a padded canvas side).
CASES = [
    (1, 90, 130, 96, 128),
    (2, 48, 96, 56, 112),
    (3, 20, 28, 64, 64),
    (4, 161, 97, 80, 200),
    (5, 300, 17, 150, 40),
    (6, 7, 9, 33, 45),
    (7, 100, 120, 99, 121),
    (8, 200, 310, 99, 153),
    (9, 180, 320, 105, 189),
    (10, 64, 1200, 32, 300),
    (11, 40, 30, 160, 120),
    (12, 61, 97, 106, 168),
    (13, 900, 1400, 84, 84),
    (14, 160, 250, 160, 84),
    (15, 1, 50, 1, 7),
    (16, 50, 1, 336, 2),
    (17, 1, 1, 40, 40),
    (18, 33, 25, 100, 76),
]


def main() -> int:
    import torch
    import torchvision
    from make_resize_fixtures import case_image
    from torchvision.transforms.v2 import functional as F

    torch.set_num_threads(1)
    record = {"cases": np.asarray(CASES, dtype=np.int64)}
    for n, (seed, h, w, th, tw) in enumerate(CASES):
        t = torch.from_numpy(case_image(seed, h, w)).permute(2, 0, 1).contiguous()
        out = F.resize(t, [th, tw], interpolation=F.InterpolationMode.BILINEAR, antialias=True)
        record[f"out{n}"] = out.permute(1, 2, 0).numpy()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **record)
    print(OUT, json.dumps({"torch": torch.__version__, "torchvision": torchvision.__version__}))
    return 0


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
    sys.exit(main())
