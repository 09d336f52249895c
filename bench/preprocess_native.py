"""mmctl's preprocessing vs vLLM's own media path, warm and in-process, in one
run: the issue's sizes (160x120, 854x480, 1280x720) and a 10-minute 640x360 video.

    python bench/preprocess_native.py [--rounds 5] [--json] [--only 160x120,854x480]
    python bench/preprocess.py --native [--rounds 5]            # the same

Contenders, each warm in its own process, interleaved round by round:

* mmctl  — ``mmctl.models.qwen_vl.pipeline.preprocess`` (Qwen3-VL, the
  checkpoint's video budget), uint8 pixels, as a default vLLM worker wants
  them; in this process (mmctl's environment);
* floor  — PyAV decoding the whole stream, converting only the sampled
  frames; in this process;
* native — what vLLM 0.33 does with a video it receives, with device
  normalization on (its default; raw uint8 pixels as mmctl's): its OpenCV
  loader and the HF ``Qwen3VLVideoProcessor`` (``bench/native_side.py``),
  in the engine environment's Python (``scripts/engine/install_env.sh``:
  vLLM, OpenCV, torch, transformers), one process kept for the whole run.
  Each side times its own call; the pipe between them is outside the times.

The script refuses to report when mmctl's grid or frame count differs from
HF's. Clips (generated once into ``--folder``, moving pattern, H.264 x264
veryfast, 30 fps): 160x120 4 s, 854x480 10 s, 1280x720 20 s, 640x360 10 min.
Goal: mmctl <= 0.5x native at every size and on the long video.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = {  # name: (frames, fps, height, width)
    "160x120 4s": (120, 30.0, 120, 160),
    "854x480 10s": (300, 30.0, 480, 854),
    "1280x720 20s": (600, 30.0, 720, 1280),
    "640x360 10min": (18000, 30.0, 360, 640),
}


def clip(folder: Path, name: str, frames: int, fps: float, height: int, width: int) -> Path:
    from mmctl.media import synth

    path = folder / f"mmctl-native-{name.replace(' ', '-')}.mp4"
    if not path.exists():
        tmp = path.with_suffix(".part.mp4")
        synth.pattern_clip(tmp, frames, fps, height, width)
        tmp.rename(path)
    return path


def small_clips(folder: Path, count: int = 50, seed: int = 0) -> list[Path]:
    rng = random.Random(seed)
    sides = [(96, 128), (144, 256), (240, 320), (270, 480), (360, 640)]
    paths = []
    for n in range(count):
        height, width = rng.choice(sides)
        seconds = rng.uniform(2, 6)
        paths.append(clip(folder, f"small-{seed}-{n}", round(seconds * 30), 30.0, height, width))
    return paths


def mmctl_contender() -> Callable[[Path], Any]:
    from mmctl.choices import PixelFormat
    from mmctl.models.qwen_vl import qwen3_vl
    from mmctl.models.qwen_vl.pipeline import preprocess

    return lambda path: preprocess(
        path, qwen3_vl.VARIANT, qwen3_vl.FAMILY.settings(), PixelFormat.UINT8
    )


def floor_contender() -> Callable[[Path], object]:
    from _floor import floor_frames  # one floor for both preprocessing scripts

    return floor_frames


class Native:
    """``bench/native_side.py`` in the engine environment, one request at a time."""

    def __init__(self, python: str) -> None:
        self.proc = subprocess.Popen(
            [python, str(ROOT / "bench" / "native_side.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, path: Path, indices: list[int]) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"path": str(path), "indices": indices}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the native side stopped (exit {self.proc.wait()})")
        return dict(json.loads(line))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.close()
        self.proc.wait(30)


def engine_python() -> str:
    """The engine environment's Python (built once, cached: scripts/engine/install_env.sh)."""
    folder = subprocess.run(
        ["bash", str(ROOT / "scripts" / "engine" / "install_env.sh"),
         str(Path.home() / ".cache" / "mmctl")],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return str(Path(folder) / "bin" / "python")


def timed(fn: Callable[[Path], object], path: Path) -> float:
    start = time.perf_counter()
    fn(path)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--only", help="Comma-separated clip names' prefixes, e.g. 160x120")
    parser.add_argument("--reference-python", help="The native side's Python (default: the "
                        "engine environment's)")  # fmt: skip
    parser.add_argument("--small", action="store_true", help="Also 50 small clips (clips/s).")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    import mmctl

    mmctl_run = mmctl_contender()
    floor = floor_contender()
    sizes = {
        name: spec
        for name, spec in SIZES.items()
        if not args.only or any(name.startswith(o) for o in args.only.split(","))
    }
    clips = {name: clip(args.folder, name, *spec) for name, spec in sizes.items()}
    native = Native(args.reference_python or engine_python())
    indices: dict[str, list[int]] = {}
    try:
        for name, path in clips.items():  # warm-up, and the same work on both sides
            ours = mmctl_run(path)
            floor(path)
            indices[name] = [int(i) for i in ours.frame_indices]
            theirs = native.run(path, indices[name])
            if tuple(theirs["grid"]) != ours.grid_thw or theirs["frames"] != len(indices[name]):
                raise SystemExit(
                    f"{name}: mmctl {ours.grid_thw}, {len(indices[name])} frames; "
                    f"HF {theirs['grid']}, {theirs['frames']} frames"
                )
            if theirs["total"] != ours.source.total_frames:
                raise SystemExit(f"{name}: OpenCV counts {theirs['total']} frames, mmctl "
                                 f"{ours.source.total_frames}")  # fmt: skip
        times: dict[str, dict[str, list[float]]] = {
            c: {w: [] for w in ("mmctl", "mmctl-busy", "floor", "native", "native-processor")}
            for c in clips
        }
        for r in range(args.rounds):
            for name, path in clips.items():
                order = ["mmctl", "floor", "native"]
                for who in order if r % 2 == 0 else reversed(order):
                    if who == "native":
                        answer = native.run(path, indices[name])
                        times[name][who].append(answer["seconds"])
                        times[name]["native-processor"].append(answer["processor_s"])
                    elif who == "mmctl":
                        start = time.perf_counter()
                        pre = mmctl_run(path)
                        times[name][who].append(time.perf_counter() - start)
                        # Resize + patchify, overlapped with decoding (the rest).
                        times[name]["mmctl-busy"].append(pre.timings.overlapped_s)
                    else:
                        times[name][who].append(timed(floor, path))
        rates: dict[str, float] = {}
        if args.small:
            smalls = small_clips(args.folder)
            picked = {p: [int(i) for i in mmctl_run(p).frame_indices] for p in smalls}
            start = time.perf_counter()
            for path in smalls:
                mmctl_run(path)
            rates["mmctl"] = len(smalls) / (time.perf_counter() - start)
            took = sum(native.run(p, picked[p])["seconds"] for p in smalls)
            rates["native"] = len(smalls) / took
    finally:
        native.close()
    medians = {c: {w: statistics.median(t) for w, t in ts.items()} for c, ts in times.items()}
    report: dict = {
        "mmctl": mmctl.__version__,
        "rounds": args.rounds,
        "median_s": medians,
        "runs_s": times,
        "mmctl_over_native": {c: m["mmctl"] / m["native"] for c, m in medians.items()},
        # Rounds are interleaved: round i of each side ran under the same load.
        "mmctl_over_native_paired": {
            c: statistics.median(a / b for a, b in zip(t["mmctl"], t["native"], strict=True))
            for c, t in times.items()
        },
        # Where native's time goes: its HF processor, the rest is OpenCV's decoding.
        "native_processor_share": {
            c: m["native-processor"] / m["native"] for c, m in medians.items()
        },
        "mmctl_over_floor": {c: m["mmctl"] / m["floor"] for c, m in medians.items()},
    }
    if rates:
        report["small_clips_per_s"] = rates
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{'clip':15s}{'mmctl':>11s}{'floor':>11s}{'native':>11s}"
          f"{'mmctl/native':>14s}{'paired':>8s}{'mmctl/floor':>13s}")  # fmt: skip
    for c, m in medians.items():
        print(
            f"{c:15s}" + "".join(f"{m[w] * 1000:9.1f}ms" for w in ("mmctl", "floor", "native"))
            + f"{report['mmctl_over_native'][c]:14.3f}{report['mmctl_over_native_paired'][c]:8.3f}"
            + f"{report['mmctl_over_floor'][c]:13.3f}"
        )  # fmt: skip
    if rates:
        print(f"50 small clips: mmctl {rates['mmctl']:.1f} clips/s, native "
              f"{rates['native']:.1f} clips/s")  # fmt: skip
    print("goal: mmctl/native <= 0.5 at every size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
