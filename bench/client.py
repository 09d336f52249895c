"""One set-up, many requests: ``mmctl.Client`` against the same work by hand, in one run.

    python bench/client.py [--requests 100] [--seconds 4]

A stub worker runs in its own process (``mmctl stub-worker``); the clip is
a generated 128x96 red/blue video (8 fps). Timed per request, interleaved
(client, by hand, fresh client, client, …), medians:

* client      — ``client.send(clip, prompt, transport="inline")`` on one
  ``mmctl.Client``: check the file, decode + preprocess, hash, tokenize and
  lay out, check, build, serialize, ``Generate``, decode the answer
* by hand     — the floor for the same answer: ``preprocess`` the clip (decode
  + preprocess), then one raw ``Generate`` of a request built once beforehand
* fresh       — a new ``mmctl.Client`` per request (connect, probe, model files
  from the cache, tokenizer), which is what every ``send()`` paid before the
  client existed

Then ``mmctl.AsyncClient`` throughput: ``--requests`` sends at concurrency
1, 8 and 32, requests/s. Goals: client ≤ 1.3x by
hand, and ≤ 1/5 of fresh.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _stub import stub_worker

PROMPT = "Which colours appear, in order?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import grpc

    import mmctl
    from mmctl.choices import PixelFormat
    from mmctl.media import synth
    from mmctl.media.probe import MediaKind
    from mmctl.models.model import load_model
    from mmctl.request.compose import compose
    from mmctl.wire import proto

    work = Path(tempfile.mkdtemp(prefix="mmctl-bench-"))
    os.environ["MMCTL_CACHE_DIR"] = str(work / "cache")
    half = args.seconds / 2
    clip = synth.color_clip(work / "clip.mp4", (("red", half), ("blue", half)))
    stub, address = stub_worker()
    try:
        model = load_model()
        prebuilt = compose([clip], PROMPT, model, pixel_format=PixelFormat.BFLOAT16)
        data = prebuilt.plan.to_proto().SerializeToString()
        channel = grpc.insecure_channel(address)
        generate = channel.unary_stream(
            "/vllm.grpc.engine.VllmEngine/Generate",
            request_serializer=None,
            response_deserializer=proto.engine_pb2.GenerateResponse.FromString,
        )

        def by_hand() -> str:
            model.spec.processor.preprocess(
                clip, MediaKind.VIDEO, model.params, PixelFormat.BFLOAT16
            )
            tokens = []
            for resp in generate(data):
                tokens.extend(resp.chunk.token_ids if resp.HasField("chunk") else [])
            return model.tokenizer.decode(tokens, skip_special_tokens=True)

        client = mmctl.Client(address)

        def with_client() -> str:
            return client.send(clip, PROMPT, transport="inline").answer

        def fresh() -> str:
            with mmctl.Client(address) as once:
                return once.send(clip, PROMPT, transport="inline").answer

        for fn in (by_hand, with_client, fresh):  # warm-up: imports, caches, the bundle
            assert fn() == "red, blue", fn.__name__
        times: dict[str, list[float]] = {"client": [], "by hand": [], "fresh": []}
        fresh_every = max(1, args.requests // 20)  # fresh is slow: a sample is enough
        for i in range(args.requests):
            order = [("client", with_client), ("by hand", by_hand)]
            if i % fresh_every == 0:
                order.append(("fresh", fresh))
            for name, fn in order:
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
        medians = {name: statistics.median(v) for name, v in times.items()}
        client.close()
        channel.close()

        async def throughput(concurrency: int) -> float:
            async with mmctl.AsyncClient(address) as aclient:
                await aclient.send(clip, PROMPT)  # set-up outside the clock
                gate = asyncio.Semaphore(concurrency)

                async def one() -> None:
                    async with gate:
                        await aclient.send(clip, PROMPT, transport="inline")

                start = time.perf_counter()
                await asyncio.gather(*(one() for _ in range(args.requests)))
                return args.requests / (time.perf_counter() - start)

        rates = {c: asyncio.run(throughput(c)) for c in (1, 8, 32)}
    finally:
        stub.terminate()
        stub.wait(10)

    doc = {
        "requests": args.requests,
        "clip_s": args.seconds,
        "median_ms": {k: round(v * 1000, 2) for k, v in medians.items()},
        "samples": {k: len(v) for k, v in times.items()},
        "client_over_by_hand": round(medians["client"] / medians["by hand"], 3),
        "client_over_fresh": round(medians["client"] / medians["fresh"], 3),
        "async_requests_per_s": {str(c): round(r, 1) for c, r in rates.items()},
    }
    if args.json:
        print(json.dumps(doc))
        return 0
    for name, value in medians.items():
        print(f"{name:<8} {value * 1000:8.2f} ms  (median of {len(times[name])})")
    print(f"client / by hand = {doc['client_over_by_hand']}  (goal <= 1.3)")
    print(f"client / fresh   = {doc['client_over_fresh']}  (goal <= 0.2)")
    for c, r in rates.items():
        print(f"AsyncClient concurrency {c:>2}: {r:7.1f} requests/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
