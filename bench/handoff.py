"""Tensor hand-off: shared memory and inline against a plain memcpy, in one run.

    python bench/handoff.py [--mib 100] [--runs 7]

For a pixel tensor of ``--mib`` MiB (bfloat16 rows of 1536):

* memcpy      — ``np.copyto`` into a preallocated, already-touched buffer: the floor
* memcpy new  — ``np.copyto`` into a fresh ``np.empty`` buffer (what any new
  buffer costs: the kernel faults in and zeroes every page)
* shm put     — ``ShmArena.put``: create, preallocate, one copy by ``pwrite``, close
* shm direct  — what ``mmctl send`` does for a one-item modality: the segment is
  created before preprocessing, which writes the pixels into the mapping; the
  hand-off itself copies nothing (timed: create + map; the write is the
  preprocessing's own)
* inline msg  — ``TensorData`` with the bytes inline in the message, request
  serialized (what mmctl did before the splice: two copies)
* inline      — what mmctl does now (``RequestPlan.encode``): the message
  without the tensor, the tensor's own buffer appended as a second
  ``mm_inputs`` occurrence (``mmctl.wire.splice``): one copy

Prints medians and each one's ratio to memcpy. Every shm file is removed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    from mmctl.request import tensors
    from mmctl.transport.shm import ShmArena
    from mmctl.wire import proto, splice

    rows = args.mib * 2**20 // (1536 * 2)
    pixels = np.random.default_rng(0).integers(0, 2**16, (rows, 1536), dtype=np.uint16)
    target = np.empty_like(pixels)
    np.copyto(target, pixels)  # touch every page once
    engine = proto.engine_pb2

    def memcpy():
        np.copyto(target, pixels)

    def memcpy_new():
        np.copyto(np.empty_like(pixels), pixels)

    def shm_put():
        with ShmArena() as arena:
            arena.put(pixels)

    def shm_direct():
        with ShmArena() as arena:
            segment = arena.create(pixels.nbytes)
            segment.array(pixels.dtype, pixels.shape)

    def inline_message():
        req = engine.GenerateRequest(request_id="bench")
        req.mm_inputs.pixel_values.CopyFrom(tensors.inline(pixels, "bfloat16"))
        req.SerializeToString()

    def inline():
        req = engine.GenerateRequest(request_id="bench")
        req.mm_inputs.pixel_values.CopyFrom(
            engine.TensorData(shape=list(pixels.shape), dtype="bfloat16")
        )
        payload = pixels.data.cast("B")
        b"".join([req.SerializeToString(), splice.pixels_prefix(len(payload)), payload])

    contenders = {
        "memcpy": memcpy,
        "memcpy new": memcpy_new,
        "shm put": shm_put,
        "shm direct": shm_direct,
        "inline msg": inline_message,
        "inline": inline,
    }
    times = {k: [] for k in contenders}
    for _ in range(args.runs):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"tensor {pixels.nbytes / 2**20:.0f} MiB ({rows} x 1536 bfloat16), median of {args.runs}")
    for name, seconds in med.items():
        rate = pixels.nbytes / seconds / 2**30
        print(
            f"{name:11s} {seconds * 1000:8.1f} ms  {rate:6.2f} GiB/s  x{seconds / med['memcpy']:.2f} memcpy"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
