"""Write the small clips some tests cut or damage, under tests/fixtures/clips/.

Committed, like the parity media, because an encoder's bytes differ between
machines and these tests depend on where a cut lands:

    .venv/bin/python scripts/make_test_clips.py

``faststart.mp4``: 60 frames of 128x96 at 30 fps with the MP4 index (moov)
first, as streamed files have it; cut in half it still opens and decodes
to fewer frames than its header announces.

``gop_*``: 120 frames of 64x48 at 30 fps with a keyframe every 15 frames
(no scene cuts), to test where decoding may start: ``gop_closed.mp4`` and
``gop_closed_hevc.mp4`` start every GOP with an IDR picture, ``gop_closed.ts``
is the same H.264 stream in MPEG-TS (Annex B start codes instead of length
prefixes), ``gop_open.mp4`` and ``gop_open_hevc.mp4`` are open GOPs: their
later keyframes are flagged in the container but are not IDR pictures (an
H.264 I slice with a recovery point, an HEVC CRA).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mmctl.media import synth  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "clips"
GOP = "keyint=15:min-keyint=15:scenecut=0"
GOPS = [  # name, encoder, its parameters
    ("gop_closed.mp4", "libx264", GOP),
    ("gop_closed.ts", "libx264", GOP),
    ("gop_open.mp4", "libx264", f"{GOP}:open-gop=1"),
    ("gop_closed_hevc.mp4", "libx265", f"log-level=0:{GOP}:open-gop=0"),
    ("gop_open_hevc.mp4", "libx265", f"log-level=0:{GOP}:open-gop=1"),
]


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    path = synth.pattern_clip(OUT / "faststart.mp4", 60, 30, 96, 128, faststart=True)
    print(f"{path.stat().st_size:,}  {path.relative_to(ROOT)}")
    for name, codec, params in GOPS:
        options = {f"{codec.removeprefix('lib')}-params": params}
        path = synth.pattern_clip(OUT / name, 120, 30, 48, 64, codec=codec, encoder_options=options)
        print(f"{path.stat().st_size:,}  {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
