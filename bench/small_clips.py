"""Throughput on many small phone-style clips: clips/s for mmctl vs vLLM's own media path.

    python bench/small_clips.py [--count 100] [--list] [--make-only]

The clips: ``--count`` (100) clips of 2–10 s, each one ``ffmpeg`` command (``--list``
prints them all), made once into ``~/.cache/mmctl/bench-clips/small`` and never
committed. A seeded choice per clip of: the size (640x360, 854x480, 1280x720, stored
landscape), portrait or not (a 90° display matrix, as phones write a portrait clip), the
frame rate (30, or 60 for one in eight), the encoding — H.264 Baseline without B-frames
(``-profile:v baseline``, older phones, messaging apps), H.264 Main without B-frames
(``-bf 0``, screen recorders), H.264 High with x264's B-frames, HEVC (x265: recent
phones) — and light camera grain for half of them. The source is FFmpeg's ``testsrc2``.

Contenders, one after another over the same clips (each warmed on the first clip first):

* ``mmctl preprocess`` — ``mmctl.preprocess`` per clip, in this process, uint8 pixels;
* ``mmctl batch``      — ``mmctl.batch(engine="local")`` sending every clip with a prompt
  to a stub worker (``mmctl stub-worker``, its own process, on the same cores): the
  local engine's process pool preprocessing while the event loop sends; its own pixel
  cache folder, empty (nothing is answered from a cache);
* ``vLLM's path``      — ``bench/native_side.py`` in the engine environment (vLLM's OpenCV
  loader from the request's bytes, OpenCV's decode threads on every core, the HF
  processor, device normalization on), one process, one clip at a time, as
  ``bench/preprocess_native.py``'s native side; it takes mmctl's sampled indices (the
  exactness of those is ``preprocess_native.py``'s check; here each clip's grid is
  compared).

Prints clips/s for each and mmctl / vLLM's rate, with the load averages before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from preprocess_native import Native, commit, engine_python, mmctl_contender  # noqa: E402

from mmctl.media.probe import dimensions  # noqa: E402

FOLDER = Path.home() / ".cache" / "mmctl" / "bench-clips" / "small"
SIZES = ((640, 360), (854, 480), (1280, 720))
ENCODINGS = {
    "baseline": ("-c:v", "libx264", "-preset", "veryfast", "-profile:v", "baseline"),
    "main-bf0": ("-c:v", "libx264", "-preset", "veryfast", "-profile:v", "main", "-bf", "0"),
    "high": ("-c:v", "libx264", "-preset", "veryfast"),
    "hevc": ("-c:v", "libx265", "-preset", "veryfast", "-x265-params", "log-level=error",
             "-tag:v", "hvc1"),
}  # fmt: skip
PROMPT = "What happens in this clip?"


def plan(count: int, seed: int = 0, folder: Path = FOLDER) -> list[tuple[str, list[list[str]]]]:
    """(file name, the ffmpeg commands that write it into ``folder``) per clip, seeded."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        width, height = rng.choice(SIZES)
        fps = 60 if rng.random() < 0.125 else 30
        seconds = rng.randint(2, 10)
        kind = rng.choice(sorted(ENCODINGS))
        grain = rng.choice([0, 8])
        portrait = rng.random() < 0.5
        name = f"{n:03d}-{kind}-{dimensions(width, height)}-{fps}fps-{seconds}s" + (
            "-grain" if grain else ""
        ) + ("-portrait" if portrait else "") + ".mp4"  # fmt: skip
        final = folder / name
        encoded = final.with_name(final.stem + ".encoded.mp4") if portrait else final
        noise = f"noise=alls={grain}:allf=t+u," if grain else ""
        encode = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                  f"testsrc2=size={dimensions(width, height)}:rate={fps}:duration={seconds}",
                  "-vf", f"{noise}format=yuv420p", *ENCODINGS[kind], "-an", str(encoded)]  # fmt: skip
        commands = [encode]
        if portrait:  # FFmpeg writes the display matrix on a stream copy, not on an encode
            commands.append(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i",
                             str(encoded), "-c", "copy", "-metadata:s:v:0", "rotate=90",
                             str(final)])  # fmt: skip
        out.append((name, commands))
    return out


def make(count: int) -> list[Path]:
    if shutil.which("ffmpeg") is None:
        raise SystemExit("the clips need the ffmpeg command (apt-get install ffmpeg)")
    FOLDER.mkdir(parents=True, exist_ok=True)
    paths = []
    part = FOLDER / f"part-{os.getpid()}"  # a half-written clip is never used
    for (name, _), (_, commands) in zip(plan(count), plan(count, folder=part), strict=True):
        path = FOLDER / name
        if not path.exists():
            part.mkdir(exist_ok=True)
            for command in commands:
                subprocess.run(command, check=True)
            (part / name).rename(path)
        paths.append(path)
    shutil.rmtree(part, ignore_errors=True)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--list", action="store_true", help="Print the commands, make nothing")
    parser.add_argument("--make-only", action="store_true", help="Make the clips, time nothing")
    parser.add_argument("--reference-python", help="The native side's Python")
    args = parser.parse_args(argv)
    if args.list:
        for name, commands in plan(args.count):
            print(f"# {name}\n" + "\n".join(shlex.join(c) for c in commands))
        return 0
    clips = make(args.count)
    if args.make_only:
        return 0

    from _stub import stub_worker

    import mmctl

    load_before = os.getloadavg()
    rates: dict[str, float] = {}
    run = mmctl_contender()
    ours = {p: run(p) for p in clips[:1]}
    start = time.perf_counter()
    for p in clips:
        ours[p] = run(p)
    rates["mmctl preprocess"] = len(clips) / (time.perf_counter() - start)

    work = Path(tempfile.mkdtemp(prefix="mmctl-bench-small-"))
    os.environ["MMCTL_CACHE_DIR"] = str(work / "cache")  # an empty pixel cache
    data = work / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"c{n}", "prompt": PROMPT, "media": [str(p)]})
                            + "\n" for n, p in enumerate(clips)))  # fmt: skip
    stub, address = stub_worker()
    try:
        with mmctl.Client(address) as client:
            client.send(clips[0], PROMPT)  # the worker warm, as the others are
        start = time.perf_counter()
        counts = mmctl.batch(data, work / "out.jsonl", targets=address, engine="local",
                             max_concurrency=8, overwrite=True)  # fmt: skip
        took = time.perf_counter() - start - counts.startup_s
        if counts.succeeded != len(clips):
            raise SystemExit(f"batch: {counts}")
        rates["mmctl batch"] = len(clips) / took
    finally:
        stub.terminate()
        stub.wait(10)
        shutil.rmtree(work, ignore_errors=True)

    native = Native(args.reference_python or engine_python())
    try:
        picked = {p: [int(i) for i in r.frame_indices] for p, r in ours.items()}
        native.run(clips[0], picked[clips[0]])  # warm
        took = 0.0
        for p in clips:
            answer = native.run(p, picked[p])
            if tuple(answer["grid"]) != ours[p].grid_thw:
                raise SystemExit(f"{p.name}: grid {answer['grid']} vs mmctl {ours[p].grid_thw}")
            took += answer["seconds"]
        rates["vLLM's path"] = len(clips) / took
    finally:
        native.close()
    load_after = os.getloadavg()
    print(f"commit {commit()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} CPUs, {len(clips)} clips (every grid equal)")  # fmt: skip
    theirs = rates["vLLM's path"]
    for who, rate in rates.items():
        print(f"{who:18s}{rate:8.2f} clips/s  ({rate / theirs:.2f}x vLLM's rate)")
    print(f"load averages (1, 5, 15 min) before {' '.join(f'{x:.2f}' for x in load_before)}, "
          f"after {' '.join(f'{x:.2f}' for x in load_after)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
