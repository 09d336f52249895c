"""Write tests/fixtures/opencv/frames.json: what vLLM's OpenCV video loader sees in
each committed video — its frame count and rate (vLLM samples from them), the
frame size and every frame's RGB digest — so a unit test can hold mmctl's
decoding (rotation included) to OpenCV's without OpenCV:

    "$(bash scripts/engine/install_env.sh ~/.cache/mmctl)/bin/python" scripts/make_opencv_fixtures.py

Run by the engine environment's Python (vLLM's OpenCV: opencv-python-headless;
no PyAV, no mmctl). Each file is read as vLLM 0.33's
``video_decoders/opencv.py`` reads a request's video: its bytes through
``cv2.VideoCapture(BytesIO)`` on the stream-buffered backend (OpenCV applies
the display matrix: ``CAP_PROP_ORIENTATION_AUTO``), ``grab()`` +
``retrieve()`` + BGR→RGB every frame.
"""

from __future__ import annotations

import hashlib
import json
import sys
from io import BytesIO
from pathlib import Path

import cv2
from cv2 import videoio_registry as vr

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
OUT = FIXTURES / "opencv" / "frames.json"
#: The committed videos: the parity media and the GOP clips (one packet, one frame:
#: H.264 and HEVC in MP4/MOV/TS, and VP9 in WebM).
VIDEOS = sorted(
    [p for p in (FIXTURES / "media").iterdir() if p.suffix in {".mp4", ".mov", ".webm"}]
    + [p for p in (FIXTURES / "clips").iterdir() if p.name.startswith("gop_")]
)


def digest(rgb: object) -> str:
    return hashlib.sha256(memoryview(rgb)).hexdigest()[:16]  # type: ignore[arg-type]


def read(path: Path) -> dict:
    backend = next(b for b in vr.getStreamBufferedBackends() if vr.hasBackend(b))
    cap = cv2.VideoCapture(BytesIO(path.read_bytes()), backend, [])
    if not cap.isOpened():
        raise SystemExit(f"OpenCV cannot open {path}")
    doc: dict = {
        "count": int(cap.get(cv2.CAP_PROP_FRAME_COUNT)),
        "fps": cap.get(cv2.CAP_PROP_FPS),
        "width": int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
        "height": int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
        "frames": [],
    }
    while cap.grab():
        ok, frame = cap.retrieve()
        if not ok:
            break
        rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        if rgb.shape[:2] != (doc["height"], doc["width"]):
            raise SystemExit(f"{path}: a frame's (height, width) is {rgb.shape[:2]}, the "
                             f"capture's {(doc['height'], doc['width'])}")  # fmt: skip
        doc["frames"].append(digest(rgb))
    return doc


def main() -> int:
    docs = {str(p.relative_to(FIXTURES)): read(p) for p in VIDEOS}
    docs["_made_by"] = f"scripts/make_opencv_fixtures.py, OpenCV {cv2.__version__}"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(docs, indent=1, sort_keys=True) + "\n")
    for name, doc in sorted(docs.items()):
        if isinstance(doc, dict):
            print(f"{name:32s} {doc['count']:4d} frames ({len(doc['frames'])} read) "
                  f"{doc['fps']:.3f} fps, width {doc['width']}, height {doc['height']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
