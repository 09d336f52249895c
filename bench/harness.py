"""Is ``mmctl bench`` itself the bottleneck? Its runner against a minimal ``grpc.aio`` loop, in one run.

    python bench/harness.py [--requests 800] [--concurrency 16] [--rounds 3]

A stub worker runs in its own process. Both contenders send the same small
prebuilt request (a synthetic 64 KB bfloat16 video, ``max_tokens`` 1, inline)
at the same concurrency:

* minimal loop — ``--concurrency`` coroutines on one ``grpc.aio`` channel,
  each sending the same serialized bytes and reading the stream; nothing else
* mmctl bench  — ``mmctl.bench.runner.run``: per request a fresh request id
  and content hash, the message built, TTFT/ITL/E2E recorded, the answer
  decoded

They run in turns (loop, bench, loop, …), ``--rounds`` each; the medians of
requests/s and their ratio are printed. Goal: bench ≥
0.8× the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _stub import stub_worker


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import grpc

    from mmctl.bench.runner import BenchConfig, run
    from mmctl.bench.workload import from_sizes, prepare
    from mmctl.choices import PixelFormat, Transport
    from mmctl.client.channel import generate_method
    from mmctl.models.model import load_model
    from mmctl.request.build import Sampling
    from mmctl.wire.proto import UNLIMITED

    size = 64_000
    sampling = Sampling(max_tokens=1)
    stub, address = stub_worker()
    try:
        model = load_model()
        item = from_sizes([size])[0]
        data = prepare(item, model, PixelFormat.BFLOAT16, None, sampling).plan.encode().data

        async def minimal() -> float:
            channel = grpc.aio.insecure_channel(address, options=UNLIMITED)
            call = generate_method(channel)
            left = args.requests

            async def worker() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    async for _ in call(data):
                        pass

            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(args.concurrency)))
            rate = args.requests / (time.perf_counter() - start)
            await channel.close()
            return rate

        cfg = BenchConfig(
            targets=(address,),
            items=tuple(from_sizes([size])),
            transports=(Transport.INLINE,),
            pixel_dtypes=(PixelFormat.BFLOAT16,),
            num_prompts=args.requests,
            max_concurrency=(args.concurrency,),
            sampling=sampling,
            floors=False,
            warmup=args.concurrency,
        )

        def harness() -> float:
            result = run(cfg)
            level = result.levels[0]
            assert all(r.ok for r in level.records), "every request answered"
            return sum(r.ok for r in level.records) / level.duration_s

        asyncio.run(minimal())  # warm-up: connections, the stub's first requests
        rates: dict[str, list[float]] = {"minimal loop": [], "mmctl bench": []}
        for _ in range(args.rounds):
            rates["minimal loop"].append(asyncio.run(minimal()))
            rates["mmctl bench"].append(harness())
    finally:
        stub.terminate()
        stub.wait(10)
    medians = {k: statistics.median(v) for k, v in rates.items()}
    ratio = medians["mmctl bench"] / medians["minimal loop"]
    doc = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "requests_per_s": {k: [round(x, 1) for x in v] for k, v in rates.items()},
        "median_requests_per_s": {k: round(v, 1) for k, v in medians.items()},
        "bench_over_minimal": round(ratio, 3),
    }
    if args.json:
        print(json.dumps(doc))
        return 0
    for name, values in rates.items():
        print(
            f"{name:<13} {medians[name]:7.1f} requests/s  (rounds: {', '.join(f'{v:.1f}' for v in values)})"
        )
    print(f"mmctl bench / minimal loop = {ratio:.3f}  (goal >= 0.8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
