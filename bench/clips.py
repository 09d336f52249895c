"""The clips the preprocessing benchmarks measure: the encodings people send.

    python bench/clips.py [--folder DIR] [--only NAME,...]   # make them, print each command

Each clip is one ``ffmpeg`` command (printed by ``--list``, run once into
the cache folder, default ``~/.cache/mmctl/bench-clips``; never committed:
encoders write different bytes on different machines, and the benchmark
needs only the kinds of stream, not the very bytes). The source is FFmpeg's
``testsrc2`` (a moving test card: every frame changes); ``noise`` adds
per-frame grain where a clip stands for a camera (high entropy: every
frame costly to decode). The set, and who writes such streams:

* ``x264-default``  — x264 at its defaults (preset medium: 3 B-frames, GOP
  up to 250), 720p30 20 s: desktop encoders, most re-encoded uploads;
* ``p-only-720p``   — H.264 without B-frames (``-bf 0``), 720p30 20 s: screen
  recorders, Baseline/Main phone recordings;
* ``grain-1080p``   — camera-like grain, P-only, 1080p30 10 s;
* ``hevc-1080p``    — x265 (veryfast, its B-frames and open GOPs), 1080p30 10 s:
  recent phones;
* ``phone-rotated`` — a portrait phone clip: 1280x720 stored, a 90° display
  matrix (shown 720x1280), Main profile, no B-frames, 1 s GOP, light grain;
* ``1080p60``       — x264 veryfast, 1080p at 60 fps, 10 s;
* ``stream-gop15``  — a live stream: MPEG-TS, ``-tune zerolatency`` (no
  B-frames), a 15-frame GOP, 720p30 20 s;
* ``long-gop``      — one IDR every 600 frames (no scene cuts), 720p30 30 s;
* ``10min``         — 640x360 at 30 fps, 10 minutes (18,000 frames);
* ``vp9``           — VP9 in WebM (libvpx realtime), 854x480 30 fps 10 s.

AV1 is not in the set: vLLM's OpenCV (opencv-python-headless 5.0, the
engine environment) opens an AV1 file but returns no frames (no dav1d), so
vLLM cannot take one through that loader.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mmctl.media.probe import dimensions  # noqa: E402  (one way to write a size)

CACHE = Path.home() / ".cache" / "mmctl" / "bench-clips"


@dataclass(frozen=True)
class Clip:
    name: str
    what: str  # who writes such a stream
    width: int
    height: int
    fps: int
    seconds: int
    encode: tuple[str, ...]  # ffmpeg's output options
    suffix: str = ".mp4"
    grain: int = 0  # FFmpeg noise strength (0: none)
    rotate: int = 0  # degrees in the display matrix (0: none)

    def commands(self, out: Path) -> list[list[str]]:
        """The ffmpeg commands that write the clip to ``out``: the encode, then (for a
        rotation) a stream copy that adds the display matrix — FFmpeg 5.1 writes the
        ``rotate`` tag as a display matrix on a copy, not on an encode."""
        encode = self._encode(
            out.with_name(f"{out.stem}.encoded{out.suffix}") if self.rotate else out
        )
        if not self.rotate:
            return [encode]
        tagged = [*encode[: encode.index("-f")], "-i", encode[-1], "-c", "copy",
                  "-metadata:s:v:0", f"rotate={self.rotate}", str(out)]  # fmt: skip
        return [encode, tagged]

    def _encode(self, out: Path) -> list[str]:
        size = dimensions(self.width, self.height)
        source = f"testsrc2=size={size}:rate={self.fps}:duration={self.seconds}"
        filters = f"noise=alls={self.grain}:allf=t+u," if self.grain else ""
        return [
            "ffmpeg", "-hide_banner", "-loglevel", "error", "-y",
            "-f", "lavfi", "-i", source,
            "-vf", f"{filters}format=yuv420p",
            *self.encode, "-an", str(out),
        ]  # fmt: skip


X264_FAST = ("-c:v", "libx264", "-preset", "veryfast")

CLIPS = [
    Clip("x264-default", "x264 defaults (B-frames)", 1280, 720, 30, 20, ("-c:v", "libx264")),
    Clip("p-only-720p", "H.264 -bf 0 (screen recorder)", 1280, 720, 30, 20, (*X264_FAST, "-bf", "0")),
    Clip("grain-1080p", "camera grain, P-only", 1920, 1080, 30, 10,
         (*X264_FAST, "-bf", "0", "-crf", "20"), grain=20),
    Clip("hevc-1080p", "HEVC (x265)", 1920, 1080, 30, 10,
         ("-c:v", "libx265", "-preset", "veryfast", "-x265-params", "log-level=error",
          "-tag:v", "hvc1")),
    Clip("phone-rotated", "portrait phone, rotate 90", 1280, 720, 30, 10,
         (*X264_FAST, "-profile:v", "main", "-bf", "0", "-g", "30"), grain=6, rotate=90),
    Clip("1080p60", "1080p 60 fps", 1920, 1080, 60, 10, X264_FAST),
    Clip("stream-gop15", "live stream, TS, GOP 15", 1280, 720, 30, 20,
         (*X264_FAST, "-tune", "zerolatency", "-g", "15", "-keyint_min", "15",
          "-sc_threshold", "0", "-f", "mpegts"), suffix=".ts"),
    Clip("long-gop", "GOP 600", 1280, 720, 30, 30,
         (*X264_FAST, "-g", "600", "-keyint_min", "600", "-sc_threshold", "0")),
    Clip("10min", "10 minutes, 360p", 640, 360, 30, 600, X264_FAST),
    Clip("vp9", "VP9 WebM", 854, 480, 30, 10,
         ("-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "1M"),
         suffix=".webm"),
]  # fmt: skip


def chosen(only: str | None) -> list[Clip]:
    if not only:
        return CLIPS
    names = only.split(",")
    picked = [c for c in CLIPS if any(c.name.startswith(n) for n in names)]
    if not picked:
        raise SystemExit(f"no clip matches {only}; the set: {', '.join(c.name for c in CLIPS)}")
    return picked


def make(clip: Clip, folder: Path = CACHE) -> Path:
    """The clip's file in ``folder``, encoded once (a half-written one is never used)."""
    path = folder / f"{clip.name}{clip.suffix}"
    if path.exists():
        return path
    if shutil.which("ffmpeg") is None:
        raise SystemExit("the benchmark clips need the ffmpeg command (apt-get install ffmpeg)")
    folder.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{clip.name}.part{clip.suffix}")
    for command in clip.commands(part):
        subprocess.run(command, check=True)
    part.with_name(f"{part.stem}.encoded{part.suffix}").unlink(missing_ok=True)
    part.rename(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=CACHE)
    parser.add_argument("--only", help="Comma-separated clip names' prefixes")
    parser.add_argument("--list", action="store_true", help="Print the commands, make nothing")
    args = parser.parse_args(argv)
    for clip in chosen(args.only):
        out = args.folder / f"{clip.name}{clip.suffix}"
        commands = "\n".join(shlex.join(c) for c in clip.commands(out))
        print(f"# {clip.name}: {clip.what}\n{commands}")
        if not args.list:
            print(f"  -> {make(clip, args.folder)} ({out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
