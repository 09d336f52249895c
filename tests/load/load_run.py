"""1,000 video requests at concurrency 32 through ``mmctl.AsyncClient``.
Run by ``test_load.py`` in a process of its own,
so the peak RSS it reports is the client's alone:

    python -m tests.load.load_run ADDRESS FOLDER [--requests N] [--concurrency C]

Prints one JSON document: counts, wrong answers, fds and mmctl /dev/shm files
before and after, peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path

import mmctl
from mmctl.media.synth import color_clip
from mmctl.transport.shm import own_files

CLIPS = {
    "red, blue": (("red", 2.0), ("blue", 2.0)),
    "green, red, blue": (("green", 2.0), ("red", 1.0), ("blue", 1.0)),
}


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _shm_files() -> int:
    return len(own_files())


async def run(address: str, folder: Path, requests: int, concurrency: int) -> dict:
    clips = {
        answer: color_clip(folder / f"{n}.mp4", seg)
        for n, (answer, seg) in enumerate(CLIPS.items())
    }
    async with mmctl.AsyncClient(address, timeout=60) as client:
        built = {
            answer: (await client.build(path, "Which colours?")).request
            for answer, path in clips.items()
        }
        await client.send_request(built["red, blue"])  # warm: channel, tokenizer
        fds, shm = _fds(), _shm_files()
        rss_warm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        slots = asyncio.Semaphore(concurrency)
        answers = list(clips)
        wrong: list[str] = []
        errors: list[str] = []

        async def one(n: int) -> None:
            want = answers[n % len(answers)]
            transport = "shm" if n % 2 else "inline"
            async with slots:
                try:
                    if n % 10 == 0:  # one in ten preprocesses its clip anew
                        result = await client.send(
                            clips[want], "Which colours?", transport=transport
                        )
                    else:
                        result = await client.send_request(built[want], transport=transport)
                except mmctl.MmctlError as err:
                    errors.append(f"#{n}: {err}")
                    return
            if result.answer != want or result.finish_reason != "stop":
                wrong.append(f"#{n}: {result.answer!r} ({result.finish_reason})")

        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(requests)))
        took = time.perf_counter() - started
    return {
        "requests": requests,
        "concurrency": concurrency,
        "seconds": round(took, 2),
        "errors": errors[:5],
        "error_count": len(errors),
        "wrong": wrong[:5],
        "wrong_count": len(wrong),
        "fds": [fds, _fds()],
        "shm_files": [shm, _shm_files()],
        "rss_warm_mb": round(rss_warm),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    doc = asyncio.run(run(args.address, args.folder, args.requests, args.concurrency))
    json.dump(doc, sys.stdout)


if __name__ == "__main__":
    main()
