"""mmctl's preprocessing vs vLLM's own media path and the decoding floor, warm
and in-process, in one run, on the encodings people send (``bench/clips.py``).

    python bench/preprocess_native.py [--rounds 5] [--only x264,vp9] [--json]
    python bench/preprocess_native.py --ab             # also mmctl's decode strategies forced
    python bench/preprocess_native.py --set pattern    # the older moving-pattern sizes
    python bench/preprocess.py --native [--rounds 5]   # the same

Contenders, interleaved round by round (the order turns each round):

* mmctl  — the public API, ``mmctl.preprocess(clip, family="qwen3-vl")``
  (the checkpoint's video budget), uint8 pixels, as a default vLLM worker
  wants them; in this process (mmctl's environment);
* floor  — the decoding floor: the frames that must be decoded (every frame a
  sample depends on: from the IDR or CRA picture before a sample to the
  sample, as mmctl's decode runs; a GOP's frames after its last sample and
  unsampled non-reference pictures are left out; H.264/HEVC, elsewhere every
  frame up to the last sample) decoded once, nothing converted, two ways
  (``bench/_floor.py``): FFmpeg's automatic frame + slice threads on all
  cores (``auto``), and IDR-cut pieces on one thread each (``gops``, where
  the stream has IDRs to cut at); a round's floor is the faster of the two;
* native — what vLLM 0.33 does with a video it receives, with device
  normalization on (its default; raw uint8 pixels as mmctl's): its OpenCV
  loader from the request's bytes and the HF ``Qwen3VLVideoProcessor``
  (``bench/native_side.py``), in the engine environment's Python
  (``scripts/engine/install_env.sh``: vLLM, OpenCV, torch, transformers), one
  process kept for the whole run. Each side times its own call; the pipe
  between them is outside the times.

* gateway (``--gateway``) — the smg gateway 1.13.0 (``bench/_gateway.py``)
  preprocessing the clip itself in front of mmctl's stub worker: the seconds
  from its chat request's send to the stub's receipt of the ``GenerateRequest``
  it built (tensors inline over loopback included; mmctl's time stops at the
  tensor). Optional: without the ``smg`` executable (the dev extra) or
  ``ffmpeg``/``ffprobe`` the script says why and leaves the column out. Its grid
  must equal mmctl's; whether its pixels do is printed, not required (its own
  resize).

``--ab [NAME,...]`` adds contenders, mmctl with its decode strategy forced
(:func:`mmctl.media.video.decode_strategy`): ``pieces`` (IDR-cut GOP pieces,
one single-threaded decoder per core on threads, where the stream cuts into
pieces) and ``frames`` (one decoder, FFmpeg's frame + slice threads on all
cores); each must give mmctl's very pixel tensor before it is timed. (A third,
``uneven`` — pieces, the heaviest with FFmpeg's frame threads — was measured at
``eaf8bf5``: no gain over pieces beyond the run's noise, a loss on two
clips; BENCHMARKS.md. Not kept.)

Exactness first (load-independent): before any timing, each clip's frame
count and rate (OpenCV's against mmctl's: vLLM samples from them), grid and
every entry of the HF processor's pixel tensor are compared with mmctl's;
the script refuses to report when one differs. Rotation: OpenCV applies the
display matrix as vLLM's loader shows the frames; mmctl must match that.

Why a clip can miss the goal whatever mmctl does: ``floor / native`` (paired)
is the decoding floor against vLLM's path; where it is above 0.5, no client
decoding those frames on this machine can reach 0.5x vLLM. The native side
reports where its time goes (opening the captures, ``grab()``, ``retrieve()`` +
BGR->RGB of the sampled frames, the HF processor) and OpenCV's threads.

Every round prints the machine's load (``os.getloadavg()``) beside its
times, and the report the load averages before and after the run: on a shared machine only a quiet run's figures compare. Goals per
clip: mmctl <= 0.5x native (paired) and <= 1.25x the floor. The text plot at
the end (one group of bars per clip: mmctl / native, floor / native, mmctl /
gateway; ``|`` at 0.5) is what BENCHMARKS.md quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _floor import floor_auto, floor_gops  # noqa: E402  (one floor for both scripts)

#: mmctl's decode strategies (mmctl.media.video.decode_strategy) that --ab can force.
STRATEGIES = ("pieces", "frames")
#: The native side's phases (bench/native_side.py), in the order they run.
PHASES = ("open_s", "grab_s", "retrieve_s", "processor_s")

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


def mmctl_contender(strategy: str | None = None) -> Callable[[Path], Any]:
    """mmctl.preprocess; ``strategy`` forces mmctl's decode strategy ("pieces" or
    "frames") for the call instead of its rule."""
    import mmctl
    from mmctl.choices import PixelFormat
    from mmctl.media import video
    from mmctl.models.model import load_model

    model = load_model(family="qwen3-vl")  # the checkpoint's video budget

    def run(path: Path) -> Any:
        return mmctl.preprocess(path, model=model, pixel_dtype=PixelFormat.UINT8)

    if strategy is None:
        return run

    def forced(path: Path) -> Any:
        rule = video.decode_strategy
        video.decode_strategy = lambda *args: strategy  # type: ignore[assignment]
        try:
            return run(path)
        finally:
            video.decode_strategy = rule  # type: ignore[assignment]

    return forced


class Native:
    """``bench/native_side.py`` in the engine environment, one request at a time."""

    def __init__(self, python: str) -> None:
        self.proc = subprocess.Popen(
            [python, str(ROOT / "bench" / "native_side.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, path: Path, indices: list[int], save: Path | None = None) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        ask = {"path": str(path), "indices": indices, "save": str(save) if save else None}
        self.proc.stdin.write(json.dumps(ask) + "\n")
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


def same_pixels(ours: np.ndarray, saved: Path) -> str | None:
    """None when HF's saved tensor equals mmctl's entry for entry; else what differs."""
    theirs = np.load(saved, mmap_mode="r")
    if theirs.shape != ours.shape:
        return f"shape {ours.shape} vs HF {theirs.shape}"
    rows = 4096  # in slices: a 10-minute video's float32 tensor is gigabytes
    for at in range(0, ours.shape[0], rows):
        a, b = ours[at : at + rows], theirs[at : at + rows]
        if not np.array_equal(a.astype(np.float32), np.asarray(b, dtype=np.float32)):
            diff = np.abs(a.astype(np.float64) - np.asarray(b, dtype=np.float64))
            return f"{np.count_nonzero(diff)} entries differ from row {at} on, max {diff.max()}"
    return None


def check_gateway(name: str, path: Path, ours: Any, gateway: Any) -> bool:
    """The gateway's grid must be mmctl's (else its time is for other work; the clip
    gets no gateway column); its pixels are compared and the difference printed, not
    required. A gateway that fails on the clip leaves the column out too."""
    from _gateway import grid_and_pixels

    try:
        grid, pixels = grid_and_pixels(gateway.recorded(path))
    except RuntimeError as err:
        print(f"{name}: the gateway failed, no gateway column: {err}", file=sys.stderr)
        return False
    if grid != tuple(ours.grid_thw):
        print(f"{name}: the gateway's grid {list(grid)} is not mmctl's "
              f"{list(ours.grid_thw)}", file=sys.stderr)  # fmt: skip
        return False
    mine = np.asarray(ours.pixel_values)
    same = pixels.shape == mine.shape and np.array_equal(pixels, mine)
    differ = "equal pixels" if same else (
        f"pixels differ: {np.count_nonzero(pixels != mine)} of {mine.size} entries, max "
        f"{np.abs(pixels.astype(np.int16) - mine.astype(np.int16)).max()}"
        if pixels.shape == mine.shape else f"pixel shape {pixels.shape} vs {mine.shape}"
    )  # fmt: skip
    print(f"{name}: gateway grid {list(grid)} = mmctl's; {differ}", file=sys.stderr)
    return True


def check(name: str, path: Path, ours: Any, native: Native, folder: Path) -> list[int] | None:
    """The exactness check of one clip (module docstring): its sampled indices, None (and
    what differs, on stderr) when mmctl's result is not vLLM's."""
    indices = [int(i) for i in ours.frame_indices]
    saved = folder / f"mmctl-native-{os.getpid()}.npy"
    try:
        theirs = native.run(path, indices, save=saved)
        problems = []
        if theirs["total"] != ours.source.total_frames:
            problems.append(f"OpenCV counts {theirs['total']} frames, mmctl "
                            f"{ours.source.total_frames}")  # fmt: skip
        if abs(theirs["fps"] - ours.source.source_fps) > 1e-6:
            problems.append(f"OpenCV's rate {theirs['fps']}, mmctl's {ours.source.source_fps}")
        if tuple(theirs["grid"]) != ours.grid_thw or theirs["frames"] != len(indices):
            problems.append(f"mmctl {ours.grid_thw}, {len(indices)} frames; "
                            f"HF {theirs['grid']}, {theirs['frames']} frames")  # fmt: skip
        elif differs := same_pixels(np.asarray(ours.pixel_values), saved):
            problems.append(f"pixels: {differs}")
    finally:
        saved.unlink(missing_ok=True)
    if problems:
        print(f"{name}: NOT EXACT: " + "; ".join(problems), file=sys.stderr)
        return None
    print(f"{name}: exact (grid {list(ours.grid_thw)}, {len(indices)} frames of "
          f"{ours.source.total_frames}, rotation {ours.source.rotation})", file=sys.stderr)  # fmt: skip
    return indices


def commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip() or "unknown"


def plot(report: dict) -> list[str]:
    """The ratios per clip as text bars, one group per clip (``|`` = 0.5, 40 cells = 1.0)."""
    rows = [("mmctl / vLLM", "mmctl_over_native_paired"),
            ("floor / vLLM", "floor_over_native_paired"),
            ("mmctl / gateway", "mmctl_over_gateway_paired")]  # fmt: skip
    lines = ["ratios per encoding, paired medians (| = 0.5; 40 cells = 1.0)"]
    for c in report["mmctl_over_native_paired"]:
        for n, (label, key) in enumerate(rows):
            if c in report.get(key, {}):
                ratio = report[key][c]
                lines.append(
                    f"  {c if n == 0 else '':14s} {label:16s}{ratio:6.3f} {bar(ratio, 0.5)}"
                )
    return lines


def bar(ratio: float, goal: float, scale: float = 40.0) -> str:
    """A text bar of ``ratio``, with ``|`` at the goal."""
    cells = min(round(ratio * scale), int(scale * 1.5))
    mark = round(goal * scale)
    return "".join(
        "|" if i == mark else ("#" if i < cells else " ") for i in range(max(cells, mark + 1))
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="0: the exactness check only")
    parser.add_argument("--set", choices=["real", "pattern"], default="real",
                        help="real: bench/clips.py's encodings (default); pattern: the "
                        "older moving-pattern sizes")  # fmt: skip
    parser.add_argument("--folder", type=Path, help="Where the clips are cached (default: "
                        "bench/clips.py's; the pattern set: the temporary folder)")  # fmt: skip
    parser.add_argument("--only", help="Comma-separated clip names' prefixes, e.g. x264,vp9")
    parser.add_argument("--reference-python", help="The native side's Python (default: the "
                        "engine environment's)")  # fmt: skip
    parser.add_argument("--small", action="store_true", help="Also 50 small clips (clips/s).")
    parser.add_argument("--ab", nargs="?", const=",".join(STRATEGIES), help="Also mmctl "
                        "with its decode strategy forced, each of these (default: both: "
                        "GOP pieces, FFmpeg frame threads)")  # fmt: skip
    parser.add_argument("--gateway", action="store_true", help="Also the smg gateway "
                        "(bench/_gateway.py; left out, with the reason, where smg is absent)")  # fmt: skip
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", type=Path, help="Also write the JSON report there")
    args = parser.parse_args(argv)

    import clips as clip_set

    import mmctl

    load_before = os.getloadavg()
    mmctl_run = mmctl_contender()
    forced = {w: mmctl_contender(w) for w in args.ab.split(",")} if args.ab else {}
    if unknown := set(forced) - set(STRATEGIES):
        raise SystemExit(f"--ab: no strategy {', '.join(unknown)}; they are {STRATEGIES}")
    clip_paths: dict[str, Path] = {}
    if args.set == "real":
        for c in clip_set.chosen(args.only):
            clip_paths[c.name] = clip_set.make(c, args.folder or clip_set.CACHE)
    else:
        folder = args.folder or Path(tempfile.gettempdir())
        for name, spec in SIZES.items():
            if not args.only or any(name.startswith(o) for o in args.only.split(",")):
                clip_paths[name] = clip(folder, name, *spec)
    gateway = None
    if args.gateway:
        from _gateway import Gateway, missing

        if (why := missing()) is not None:
            print(f"gateway: left out: {why}", file=sys.stderr)
        else:
            gateway = Gateway()
    native = Native(args.reference_python or engine_python())
    indices: dict[str, list[int]] = {}
    anchor = ("gateway",) if gateway is not None else ()
    who = ("mmctl", *forced, "floor-auto", "floor-gops", "native", *anchor)
    times: dict[str, dict[str, list[float]]] = {
        c: {w: [] for w in (*who, "floor", *PHASES, "load")} for c in clip_paths
    }
    threads: dict[str, Any] = {}
    rates: dict[str, float] = {}
    try:
        # Clip by clip (a long run cut short keeps whole clips): the exactness check (it
        # warms up too), then the rounds, each contender in a turning order.
        for name, path in clip_paths.items():
            ours = mmctl_run(path)
            picked = check(name, path, ours, native, Path(tempfile.gettempdir()))
            if picked is None:
                raise SystemExit(f"{name}: not exact; no timings reported")
            for w, run in forced.items():  # a strategy must not change a pixel
                if not np.array_equal(np.asarray(run(path).pixel_values), ours.pixel_values):
                    raise SystemExit(f"{name}: mmctl's {w} strategy changes pixels")
            anchored = gateway is not None and check_gateway(name, path, ours, gateway)
            indices[name] = picked
            if args.rounds == 0:
                continue
            body = gateway.body(path) if gateway is not None and anchored else b""
            t = times[name]
            order = [w for w in who if w != "floor-gops" or floor_gops(path, picked) is not None]
            order = [w for w in order if w != "gateway" or anchored]
            for r in range(args.rounds):
                t["load"].append(os.getloadavg()[0])
                for w in order[r % len(order) :] + order[: r % len(order)]:
                    if w == "native":
                        answer = native.run(path, picked)
                        t[w].append(answer["seconds"])
                        for phase in PHASES:
                            t[phase].append(answer[phase])
                        threads = answer["threads"]
                    elif w == "gateway":
                        assert gateway is not None
                        try:
                            t[w].append(gateway.run(path, body))
                        except RuntimeError as err:  # the clip loses its gateway column
                            print(f"{name}: the gateway failed: {err}", file=sys.stderr)
                            order.remove(w)
                            t[w].clear()
                    elif w == "mmctl":
                        t[w].append(timed(mmctl_run, path))
                    elif w in forced:
                        t[w].append(timed(forced[w], path))
                    else:
                        fn = floor_auto if w == "floor-auto" else floor_gops
                        start = time.perf_counter()
                        fn(path, picked)
                        t[w].append(time.perf_counter() - start)
                t["floor"].append(min([t["floor-auto"][-1], *t["floor-gops"][-1:]]))
                if not args.json:
                    print(f"round {r + 1} {name:14s} load {t['load'][-1]:5.2f}  " + "  ".join(
                        f"{w} {t[w][-1] * 1000:.1f}" for w in who if t[w]
                    ) + " ms", file=sys.stderr)  # fmt: skip
        if args.rounds == 0:
            print(f"exact: {', '.join(indices)} (no timings: --rounds 0)")
            return 0
        if args.small:
            smalls = small_clips(Path(tempfile.gettempdir()))
            picked = {p: [int(i) for i in mmctl_run(p).frame_indices] for p in smalls}
            start = time.perf_counter()
            for path in smalls:
                mmctl_run(path)
            rates["mmctl"] = len(smalls) / (time.perf_counter() - start)
            took = sum(native.run(p, picked[p])["seconds"] for p in smalls)
            rates["native"] = len(smalls) / took
    finally:
        native.close()
        if gateway is not None:
            gateway.close()

    def paired(t: dict[str, list[float]], a: str, b: str) -> float:
        # Rounds are interleaved: round i of each contender ran under about the same load.
        return statistics.median(x / y for x, y in zip(t[a], t[b], strict=True))

    medians = {c: {w: statistics.median(ts) for w, ts in t.items() if ts} for c, t in times.items()}
    report: dict = {
        "mmctl": mmctl.__version__,
        "commit": commit(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "exact": sorted(clip_paths),
        "median_s": medians,
        "runs_s": times,
        "mmctl_over_native": {c: m["mmctl"] / m["native"] for c, m in medians.items()},
        "mmctl_over_native_paired": {c: paired(t, "mmctl", "native") for c, t in times.items()},
        "mmctl_over_floor_paired": {c: paired(t, "mmctl", "floor") for c, t in times.items()},
        # Above 0.5, no client decoding those frames here reaches 0.5x vLLM's path.
        "floor_over_native_paired": {c: paired(t, "floor", "native") for c, t in times.items()},
        "load_before_after": [list(load_before), list(os.getloadavg())],
        # Where native's time goes: its HF processor, the rest is OpenCV's decoding.
        "native_processor_share": {c: m["processor_s"] / m["native"] for c, m in medians.items()},
        "native_phases_s": {c: {p: m[p] for p in PHASES} for c, m in medians.items()},
        "native_threads": threads,
    }
    if gateway is not None:
        report["mmctl_over_gateway_paired"] = {
            c: paired(t, "mmctl", "gateway") for c, t in times.items() if t["gateway"]
        }
    for w in forced:
        report[f"{w}_over_native_paired"] = {c: paired(t, w, "native") for c, t in times.items()}
        report[f"{w}_over_floor_paired"] = {c: paired(t, w, "floor") for c, t in times.items()}
    if rates:
        report["small_clips_per_s"] = rates
    if args.save:
        args.save.write_text(json.dumps(report, indent=1) + "\n")
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"commit {report['commit']}, {report['date']}, {os.cpu_count()} CPUs, "
          f"{args.rounds} rounds; every clip exact (grid, frames, pixels)")  # fmt: skip
    shown = ("mmctl", "floor", "native", *anchor)
    print(f"{'clip':15s}" + "".join(f"{w:>10s}" for w in shown) + f"{'/native':>9s}"
          f"{'/floor':>8s}{'floor/nat':>10s}" + ("  /gateway" if anchor else "")
          + "  floor by   load (min-max)")  # fmt: skip
    for c, m in medians.items():
        t = times[c]
        by = "gops" if t["floor-gops"] and m["floor-gops"] < m["floor-auto"] else "auto"
        floor_native = report["floor_over_native_paired"][c]
        gateway_ratio = report.get("mmctl_over_gateway_paired", {}).get(c)
        print(
            f"{c:15s}"
            + "".join(f"{m[w] * 1000:8.1f}ms" if w in m else f"{'-':>10s}" for w in shown)
            + f"{report['mmctl_over_native_paired'][c]:9.3f}"
            + f"{report['mmctl_over_floor_paired'][c]:8.3f}"
            + f"{floor_native:9.3f}{'!' if floor_native > 0.5 else ' '}"
            + (f"{gateway_ratio:10.3f}" if gateway_ratio else f"{'-':>10s}" if anchor else "")
            + f"  {by:8s} {m['load']:5.2f} ({min(t['load']):.2f}-{max(t['load']):.2f})"
        )  # fmt: skip
    print(
        "! floor / native > 0.5: decoding the frames alone, at FFmpeg's fastest here, "
        "takes more than half of vLLM's whole path"
    )
    print(f"\nvLLM's path, where its time goes (medians, ms; threads: {threads})")
    print(f"{'clip':15s}{'open':>9s}{'grab':>9s}{'retrieve':>9s}{'processor':>10s}")
    for c, m in medians.items():
        print(f"{c:15s}" + "".join(f"{m[p] * 1000:9.1f}" for p in PHASES[:3])
              + f"{m['processor_s'] * 1000:10.1f}")  # fmt: skip
    if forced:
        print(f"\n{'forced':15s}" + "".join(f"{w + ' /native':>16s}{w + ' /floor':>15s}"
                                          for w in forced))  # fmt: skip
        for c in medians:
            print(f"{c:15s}" + "".join(
                f"{report[f'{w}_over_native_paired'][c]:16.3f}"
                f"{report[f'{w}_over_floor_paired'][c]:15.3f}" for w in forced
            ))  # fmt: skip
    before, after = report["load_before_after"]
    print(f"load averages (1, 5, 15 min) before {' '.join(f'{x:.2f}' for x in before)}, "
          f"after {' '.join(f'{x:.2f}' for x in after)}")  # fmt: skip
    print("\n" + "\n".join(plot(report)))
    print("mmctl / floor, paired (| = the goal, 1.25):")
    for c, ratio in report["mmctl_over_floor_paired"].items():
        print(f"  {c:15s}{ratio:6.3f} {bar(ratio, 1.25, 20.0)}")
    if rates:
        print(f"50 small clips: mmctl {rates['mmctl']:.1f} clips/s, native "
              f"{rates['native']:.1f} clips/s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
