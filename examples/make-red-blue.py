#!/usr/bin/env python3
"""Write the example clip: 2 s of red, then 2 s of blue (H.264, 8 fps, 128x96).

    python examples/make-red-blue.py [red-blue.mp4]

The stub worker answers "red, blue" for it (the dominant colour of each
temporal patch, read back from the pixels it receives).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mmctl.media.synth import color_clip

if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "red-blue.mp4")
    print(color_clip(out))
