"""`mmctl batch`: the local and Ray engines against a sequential loop over one Client, in one run.

    python bench/batch.py [--clips 24] [--rounds 1] [--rss-items 200] [--no-ray]

A stub worker runs in its own process. The clips are generated here: 24
clips of 2–8 s at 24 fps, from 128x96 to 640x360 (seeded), written once into
a temporary folder — two colour halves under per-frame noise, so decoding
costs what camera footage of that size costs rather than what a flat colour
does. Contenders, each over the same input, in turns
(``--rounds``):

* loop  — one ``mmctl.Client`` in this process, ``client.send`` per clip,
  one after another (decode, preprocess and send never overlap)
* local — ``mmctl.batch(engine="local")``: a process pool of the cores'
  count preprocessing while the event loop sends (``--max-concurrency 8``)
* ray   — ``mmctl.batch(engine="ray")`` on a local Ray instance with two
  CPUs; its start-up (``ray.init``) is reported apart and left out of the
  wall time compared

Every contender's answers must be identical. Then memory: ``mmctl batch``
in a child process over ``--rss-items`` items and over the clips alone; the
child's peak RSS must not grow with the item count (it is bounded by the
items in flight, not the dataset).

Goals: local ≤ 0.6x loop; ray (start-up excluded)
≤ 1.5x local.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _stub import stub_worker

PROMPT = "Which colours appear, in order?"
SIZES = ((96, 128), (180, 320), (240, 426), (360, 640))


def _clips(folder: Path, count: int) -> list[Path]:
    import numpy as np

    from mmctl.media import synth

    rng = np.random.default_rng(0)
    colours = ["red", "green", "blue", "yellow"]
    paths = []
    for n in range(count):
        height, width = SIZES[n % len(SIZES)]
        frames = int(rng.uniform(2, 8) * 24)
        first, second = (synth.COLORS[c] for c in rng.choice(colours, 2, replace=False))

        def frame_at(i: int, h: int = height, w: int = width, f: int = frames, a=first, b=second):
            base = np.asarray(a if i < f // 2 else b, dtype=np.int16)
            noise = np.random.default_rng(i).integers(-40, 41, (h, w, 3), dtype=np.int16)
            return np.clip(base + noise, 0, 255).astype(np.uint8)

        path = folder / f"clip{n:02d}.mp4"
        synth.write_video(path, frame_at, frames, 24)
        paths.append(path)
    return paths


def _dataset(path: Path, clips: list[Path], count: int) -> Path:
    with path.open("w") as f:
        for n in range(count):
            clip = clips[n % len(clips)]
            f.write(json.dumps({"id": f"item{n}", "prompt": PROMPT, "media": [str(clip)]}) + "\n")
    return path


def _answers(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        doc = json.loads(line)
        out[doc["custom_id"]] = doc["response"]["body"]["choices"][0]["message"]["content"]
    return out


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _child_peak_rss_mb(args: list[str], env: dict[str, str]) -> float:
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, args
    return usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--rss-items", type=int, default=200)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import mmctl

    work = Path(tempfile.mkdtemp(prefix="mmctl-bench-batch-"))
    env = {**os.environ, "MMCTL_CACHE_DIR": str(work / "cache")}
    os.environ.update(env)
    clips = _clips(work, args.clips)
    data = _dataset(work / "in.jsonl", clips, args.clips)
    stub, address = stub_worker()
    times: dict[str, list[float]] = {"loop": [], "local": []}
    loop_cores: list[float] = []
    startup: list[float] = []
    answers: dict[str, dict[str, str]] = {}
    try:
        with mmctl.Client(address) as client:
            client.send(clips[0], PROMPT)  # set-up outside the clock, as the engines get

            def loop() -> dict[str, str]:
                return {
                    f"item{n}": client.send(clip, PROMPT, transport="auto").answer
                    for n, clip in enumerate(clips)
                }

            contenders = {"loop": None, "local": "local"} | ({} if args.no_ray else {"ray": "ray"})
            if not args.no_ray:
                times["ray"] = []
            for _ in range(args.rounds):
                for name, engine in contenders.items():
                    start = time.perf_counter()
                    if engine is None:
                        cpu = _cpu()
                        answers[name] = loop()
                        times[name].append(time.perf_counter() - start)
                        loop_cores.append((_cpu() - cpu) / times[name][-1])
                        continue
                    out = work / f"out-{name}.jsonl"
                    counts = mmctl.batch(
                        data, out, targets=address, engine=engine, workers=2 if engine == "ray"
                        else None, max_concurrency=8, overwrite=True,
                    )  # fmt: skip
                    assert counts.succeeded == args.clips, counts
                    wall = time.perf_counter() - start - counts.startup_s
                    times[name].append(wall)
                    if engine == "ray":
                        startup.append(counts.startup_s)
                    answers[name] = _answers(out)
        assert all(a == answers["loop"] for a in answers.values()), "answers differ"
        big = _dataset(work / "big.jsonl", clips, args.rss_items)
        cmd = [sys.executable, "-m", "mmctl", "batch", "-t", address, "--overwrite"]
        rss_small = _child_peak_rss_mb([*cmd, str(data), "-o", str(work / "s.jsonl")], env)
        rss_big = _child_peak_rss_mb([*cmd, str(big), "-o", str(work / "b.jsonl")], env)
    finally:
        stub.terminate()
        stub.wait(10)
    medians = {k: statistics.median(v) for k, v in times.items()}
    doc = {
        "clips": args.clips,
        "cores": os.cpu_count(),
        "wall_s": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "median_wall_s": {k: round(v, 3) for k, v in medians.items()},
        "local_over_loop": round(medians["local"] / medians["loop"], 3),
        "loop_cores_busy": round(statistics.median(loop_cores), 2),
        "identical_answers": True,
        "peak_rss_mb": {
            f"{args.clips} items": round(rss_small),
            f"{args.rss_items} items": round(rss_big),
        },
        "this_process_peak_rss_mb": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ),
    }
    if "ray" in medians:
        doc["ray_over_local"] = round(medians["ray"] / medians["local"], 3)
        doc["ray_startup_s"] = [round(s, 2) for s in startup]
    if args.json:
        print(json.dumps(doc))
        return 0
    for name, value in medians.items():
        extra = f"  (+ Ray start-up {statistics.median(startup):.1f} s)" if name == "ray" else ""
        print(f"{name:<6} {value:7.2f} s for {args.clips} clips{extra}")
    print(f"local / loop = {doc['local_over_loop']}  (goal <= 0.6)")
    print(f"the loop itself kept {doc['loop_cores_busy']} of {os.cpu_count()} cores busy")
    if "ray_over_local" in doc:
        print(f"ray / local  = {doc['ray_over_local']}  (goal <= 1.5, start-up excluded)")
    print("answers identical across contenders")
    print(
        f"mmctl batch peak RSS: {rss_small:.0f} MB for {args.clips} items, {rss_big:.0f} MB for {args.rss_items}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
