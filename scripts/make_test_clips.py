"""Write the small clips some tests cut or damage, under tests/fixtures/clips/.

Committed, like the parity media, because an encoder's bytes differ between
machines and these tests depend on where a cut lands:

    .venv/bin/python scripts/make_test_clips.py

``faststart.mp4``: 60 frames of 128x96 at 30 fps with the MP4 index (moov)
first, as streamed files have it; cut in half it still opens and decodes
to fewer frames than its header announces.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mmctl.media import synth  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "clips"


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    path = synth.pattern_clip(OUT / "faststart.mp4", 60, 30, 96, 128, faststart=True)
    print(f"{path.stat().st_size:,}  {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
