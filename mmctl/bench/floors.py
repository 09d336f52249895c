"""The machine's floors for moving a payload, measured in the same run as the requests.

* ``memcpy``: ``np.copyto`` of the bytes into a buffer already touched — the
  fastest any copy can be;
* ``fresh_shm_file``: a new ``/dev/shm`` file written once and removed —
  creating, allocating the pages and one copy. This, not memcpy, is the floor
  of a shared-memory hand-off: the worker unlinks every file it reads, so
  each request's file gets fresh pages from the kernel;
* ``grpc_unary``: a bare grpcio unary call carrying the bytes to a sink
  server in another process on 127.0.0.1 (:mod:`mmctl.bench.sink`) — the
  transfer floor of inline, without protobuf or any check.

Each is run ``runs`` times in turns, medians reported.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from mmctl.transport.shm import ShmArena


class Sink:
    """The sink server in a child process (stopped by closing its stdin)."""

    def __init__(self) -> None:
        import grpc

        from mmctl.bench.sink import METHOD
        from mmctl.client import proxy
        from mmctl.wire.proto import UNLIMITED

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mmctl.bench.sink"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        port = int(self.proc.stdout.readline())
        address = f"127.0.0.1:{port}"
        options = [*UNLIMITED, *proxy.choose(address).channel_options()]
        self.channel = grpc.insecure_channel(address, options=options)
        self.put: grpc.UnaryUnaryMultiCallable[bytes, bytes] = self.channel.unary_unary(
            METHOD, request_serializer=None, response_deserializer=None
        )
        self.put(b"", timeout=30)  # connected

    def close(self) -> None:
        self.channel.close()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def measure(nbytes: int, runs: int, sink: Sink | None) -> dict[str, Any]:
    """Median seconds of each floor for ``nbytes``, the floors taken in turns."""
    payload = np.frombuffer(np.random.default_rng(0).bytes(nbytes), dtype=np.uint8)
    target = np.empty_like(payload)
    np.copyto(target, payload)  # touch every page once
    data = payload.tobytes() if sink is not None else b""

    def fresh_file() -> None:
        with ShmArena() as arena:
            arena.put(payload)

    floors: dict[str, Callable[[], Any]] = {
        "memcpy": lambda: np.copyto(target, payload),
        "fresh_shm_file": fresh_file,
    }
    if sink is not None:
        floors["grpc_unary"] = lambda: sink.put(data, timeout=600)
    times: dict[str, list[float]] = {k: [] for k in floors}
    for _ in range(runs):
        for name, fn in floors.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {
        "bytes": nbytes,
        "runs": runs,
        **{f"{k}_s": statistics.median(v) for k, v in times.items()},
    }
