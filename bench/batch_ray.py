"""`mmctl batch --engine ray` against the local engine and a loop, same items, same workers, one run.

    python bench/batch_ray.py [--items 24] [--delay-ms 200] [--rounds 1] [--stream 0]

A Ray head is started here for the run (``ray start --head`` on 127.0.0.1
with two CPUs, Ray's single-host switch on, its workers at niceness 0 like
the local engine's processes rather than Ray's default 15, in a temporary
folder; its processes are stopped at the end by that folder, never by
name), so the
Ray contenders connect to a running cluster and its start-up is not in
their time. Two scenes:

* **worker time dominates** — ``--items`` clips of 2–4 s, 320x240 (flat
  colour halves: cheap to decode), two stub workers that wait
  ``--delay-ms`` before each token (the GPU's time; their answers are 4–6
  tokens, so ~1 s each at 200 ms), ``--max-concurrency 8``. Contenders:
  *loop* (one ``mmctl.Client``, ``send`` after ``send``), *local*
  (``mmctl.batch``), *ray* (``mmctl.batch(engine="ray")`` on the running
  head), *ray-own* (the same with no address: mmctl starts and stops a
  local instance; its ``startup_s`` is printed apart and left out of its
  wall).
* **CPU-bound** — the 24 noisy clips of ``bench/batch.py`` (2–8 s,
  128x96 to 640x360, per-frame noise), one stub worker answering at once:
  *local* and *ray* (running head).

Every contender's answers must be identical within a scene. ``--stream N``
then runs ``mmctl batch`` (``--engine ray`` on the head, and ``local``) in a
child process over 1,000 and over N items, each naming one of the 24 flat
clips at random (seeded), a stub answering at once, the pixel cache at
``--stream-cache-mb`` (16: room for about two thirds of the clips, so it
hits, misses and evicts all the way), and prints the child's peak RSS and
the cache's peak bytes for each: memory holds the budget, not the dataset.

Goals: worker-bound ray ≤ 1.3x local, local ≤ 0.35x loop;
CPU-bound ray ≤ 1.3x local; a local instance's start-up < 10 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PROMPT = "Which colours appear, in order?"
SINGLE_HOST = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
#: Ray starts its workers at niceness 15 unless told; the local engine's run at 0.
SAME_PRIORITY = {"RAY_worker_niceness": "0"}


def _stub(delay_ms: int, log: Path) -> tuple[subprocess.Popen[str], str]:
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mmctl", "stub-worker", "--port", "0", "--json",
             "--delay-ms", str(delay_ms)],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())["address"]


def _flat_clips(folder: Path, count: int) -> list[Path]:
    import numpy as np

    from mmctl.media import synth

    rng = np.random.default_rng(1)
    colours = ["red", "green", "blue", "yellow"]
    paths = []
    for n in range(count):
        frames = int(rng.uniform(2, 4) * 24)
        a, b = (synth.COLORS[c] for c in rng.choice(colours, 2, replace=False))
        path = folder / f"flat{n:02d}.mp4"
        synth.write_video(
            path,
            lambda i, f=frames, a=a, b=b: synth.color_frame(a if i < f // 2 else b, 240, 320),
            frames,
            24,
        )
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Head:
    """``ray start --head`` on 127.0.0.1 in a folder of its own; stopped by that folder."""

    def __init__(self, folder: Path, cpus: int) -> None:
        self.folder = folder
        port = _free_port()
        env = {**os.environ, **SINGLE_HOST, **SAME_PRIORITY}
        subprocess.run(
            [str(Path(sys.executable).with_name("ray")), "start", "--head",
             "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", str(cpus),
             "--temp-dir", str(folder), "--include-dashboard", "false",
             "--disable-usage-stats"],
            env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.address = f"127.0.0.1:{port}"

    def stop(self) -> None:
        from mmctl.run_batch.children import _using

        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in _using(str(self.folder)):
                if pid != os.getpid():
                    with contextlib.suppress(OSError):
                        os.kill(pid, sig)
            time.sleep(2)


def _timed_batch(data: Path, out: Path, targets: list[str], engine: str, address: str | None,
                 workers: int | None = None) -> tuple[float, float, dict[str, int]]:  # fmt: skip
    import mmctl

    start = time.perf_counter()
    counts = mmctl.batch(
        data, out, targets=targets, engine=engine, ray_address=address, workers=workers,
        max_concurrency=8, overwrite=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    assert counts.failed == 0 and counts.succeeded > 0, counts
    return wall - counts.startup_s, counts.startup_s, counts.pools


def _peak_rss_mb(args: list[str], env: dict[str, str], out: Path) -> float:
    """The child's own peak RSS (``VmHWM``, sampled until it exits: ``ru_maxrss``
    of a child starts from its parent's peak, so it told this script's)."""
    peak = 0
    with out.open("w") as stdout:
        proc = subprocess.Popen(args, stdout=stdout, stderr=subprocess.DEVNULL, env=env)
        status = Path(f"/proc/{proc.pid}/status")
        while proc.poll() is None:
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.1)
    assert proc.returncode == 0, args
    return peak / 1024


def _random_dataset(path: Path, clips: list[Path], count: int) -> Path:
    import random

    rng = random.Random(34)
    with path.open("w") as f:
        for n in range(count):
            clip = rng.choice(clips)
            f.write(json.dumps({"id": f"item{n}", "prompt": PROMPT, "media": [str(clip)]}) + "\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=24)
    parser.add_argument("--delay-ms", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--stream", type=int, default=0, metavar="N")
    parser.add_argument("--stream-cache-mb", type=int, default=16, metavar="MIB")
    parser.add_argument("--stream-only", action="store_true", help="Only the --stream runs.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from batch import _clips as noisy_clips

    import mmctl

    work = Path(tempfile.mkdtemp(prefix="mmctl-bench-ray-"))
    os.environ["MMCTL_CACHE_DIR"] = str(work / "cache")
    os.environ.pop("RAY_ADDRESS", None)
    # The head has token authentication on (Ray's default for `ray start`); an
    # explicit address presents the token only in token mode (docs/commands/batch.md: Ray clusters).
    os.environ["RAY_AUTH_MODE"] = "token"
    flat = _flat_clips(work, min(args.items, 24))
    worker_bound = _dataset(work / "worker-bound.jsonl", flat, args.items)
    noisy = noisy_clips(work, 24)
    cpu_bound = _dataset(work / "cpu-bound.jsonl", noisy, 24)
    slow = [_stub(args.delay_ms, work / f"stub{n}.log") for n in (1, 2)]
    fast = _stub(0, work / "stub-fast.log")
    head = Head(Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp")), cpus=2)
    walls: dict[str, list[float]] = {}
    startups: list[float] = []
    pools: dict[str, dict[str, int]] = {}
    answers: dict[str, dict[str, str]] = {}
    rss: dict[str, float] = {}
    cached: dict[str, dict[str, int]] = {}

    def note(name: str, wall: float) -> None:
        walls.setdefault(name, []).append(wall)
        print(f"  ({name} {wall:.2f} s)", file=sys.stderr, flush=True)

    try:
        targets = [address for _, address in slow]
        with mmctl.Client(targets[0]) as client:
            client.send(flat[0], PROMPT)  # its set-up outside the clock
            for _ in range(0 if args.stream_only else args.rounds):
                start = time.perf_counter()
                answers["loop"] = {
                    f"item{n}": client.send(flat[n % len(flat)], PROMPT).answer
                    for n in range(args.items)
                }
                note("loop", time.perf_counter() - start)
                for name, engine, address in (
                    ("local", "local", None), ("ray", "ray", head.address),
                    ("ray-own", "ray", None),
                ):  # fmt: skip
                    out = work / f"{name}.jsonl"
                    wall, startup, pools[name] = _timed_batch(
                        worker_bound, out, targets, engine, address,
                        workers=2 if name == "ray-own" else None,
                    )  # fmt: skip
                    note(name, wall)
                    if name == "ray-own":
                        startups.append(startup)
                    answers[name] = _answers(out)
                for name, engine, address in (
                    ("cpu-local", "local", None), ("cpu-ray", "ray", head.address),
                ):  # fmt: skip
                    out = work / f"{name}.jsonl"
                    wall, _, pools[name] = _timed_batch(cpu_bound, out, [fast[1]], engine, address)
                    note(name, wall)
                    answers[name] = _answers(out)
        if not args.stream_only:
            scene = ("loop", "local", "ray", "ray-own")
            assert all(answers[k] == answers["loop"] for k in scene), "answers differ"
            assert answers["cpu-ray"] == answers["cpu-local"], "answers differ (CPU-bound)"
        if args.stream:
            env = {**os.environ, **SINGLE_HOST}
            for engine in ("ray", "local"):
                for n in (1000, args.stream):
                    data = _random_dataset(work / f"stream{n}.jsonl", flat, n)
                    summary = work / f"stream-{engine}-{n}.json"
                    cmd = [sys.executable, "-m", "mmctl", "batch", str(data), "-o",
                           str(work / f"stream{n}.out"), "-t", fast[1], "--engine", engine,
                           "--overwrite", "--json",
                           "--pixel-cache-mb", str(args.stream_cache_mb)]  # fmt: skip
                    if engine == "ray":
                        cmd += ["--ray-address", head.address]
                    key = f"{engine}, {n} items"
                    rss[key] = _peak_rss_mb(cmd, env, summary)
                    counts = json.loads(summary.read_text())
                    assert counts["succeeded"] == n, counts
                    cached[key] = counts["pixel_cache"]
    finally:
        head.stop()
        for proc, _ in (*slow, fast):
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(head.folder, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)  # the generated clips and outputs
    if args.stream_only:
        doc: dict = {"peak_rss_mb": {k: round(v) for k, v in rss.items()},
                     "stream_pixel_cache": cached}  # fmt: skip
        if args.json:
            print(json.dumps(doc))
        else:
            _print_stream(rss, cached)
        return 0
    med = {k: statistics.median(v) for k, v in walls.items()}
    doc = {
        "items": args.items,
        "delay_ms": args.delay_ms,
        "cores": os.cpu_count(),
        "wall_s": {k: [round(x, 2) for x in v] for k, v in walls.items()},
        "local_over_loop": round(med["local"] / med["loop"], 3),
        "ray_over_local": round(med["ray"] / med["local"], 3),
        "ray_own_over_local": round(med["ray-own"] / med["local"], 3),
        "ray_own_startup_s": [round(s, 2) for s in startups],
        "cpu_ray_over_local": round(med["cpu-ray"] / med["cpu-local"], 3),
        "pools": pools,
        "identical_answers": True,
        "peak_rss_mb": {k: round(v) for k, v in rss.items()},
        "stream_pixel_cache": cached,
    }
    if args.json:
        print(json.dumps(doc))
        return 0
    print(f"worker time dominates: {args.items} clips, 2 stub workers at {args.delay_ms} ms/token")
    for name in ("loop", "local", "ray", "ray-own"):
        extra = (
            f"  (+ start-up {statistics.median(startups):.1f} s of its own Ray instance)"
            if name == "ray-own" else ""
        )  # fmt: skip
        print(f"  {name:<8} {med[name]:7.2f} s{extra}")
    print(f"  local / loop      = {doc['local_over_loop']}  (goal <= 0.35)")
    print(f"  ray / local       = {doc['ray_over_local']}  (goal <= 1.3, running head)")
    print(f"  ray-own / local   = {doc['ray_own_over_local']}  (start-up excluded)")
    print("CPU-bound: the 24 noisy clips of bench/batch.py, 1 stub worker answering at once")
    print(f"  local    {med['cpu-local']:7.2f} s")
    print(f"  ray      {med['cpu-ray']:7.2f} s")
    print(f"  ray / local       = {doc['cpu_ray_over_local']}  (goal <= 1.3)")
    print(f"Ray pools: {pools['ray']}")
    print("answers identical across contenders")
    _print_stream(rss, cached)
    return 0


def _print_stream(rss: dict[str, float], cached: dict[str, dict[str, int]]) -> None:
    for k, v in rss.items():
        c = cached[k]
        print(f"mmctl batch --engine {k}: peak RSS {v:.0f} MB; pixel cache peak "
              f"{c['peak_bytes'] / 2**20:.1f} of {c['budget_bytes'] / 2**20:.0f} MiB, "
              f"{c['hits'] + c['shared']} hits, {c['misses']} misses, "
              f"{c['evictions']} evictions")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
