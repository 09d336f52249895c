"""How much of each kind of Ray work a batch runs at once, from the cluster it finds (pure).

Measured on the first Ray engine (``BENCHMARKS.md``): autoscaling actor
pools that start at one actor, and one blocking request per send actor,
left the concurrency asked for unused — the send stage averaged ~2
requests in flight out of 8 — and every actor started (a process, Ray
Data's imports, the model files, the tokenizer) inside the run, after the
set-up. So:

* **preprocess**: plain Ray tasks, one per CPU the cluster has (or
  ``--workers``, when given) at a time, each holding one CPU — decoding
  is CPU-bound, so more than the CPUs only queue. Tasks run in worker
  processes that a warm-up task per CPU has already started and filled
  with the imports while the set-up ran; each process loads the model's
  vision settings once;
* **send**: one sender per node — on the driver's node a thread of the
  driver (it holds the tokenizer already), on every other node an actor
  pinned to it, holding no CPU, started before the set-up — each an
  asyncio loop with up to ``ceil(max_concurrency / nodes)`` requests in
  flight: the local engine's ``grpc.aio`` fleet, one tokenizer per node.
  A preprocessed item goes to the sender of the node that holds it, so it
  crosses no network before the gRPC send.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    preprocess_tasks: int
    #: One per node (the driver's node's is a thread of the driver).
    senders: int
    #: Requests in flight per sender (its asyncio concurrency).
    calls_per_sender: int

    @property
    def in_flight(self) -> int:
        return self.senders * self.calls_per_sender


def plan(cluster_cpus: float, nodes: int, workers: int | None, max_concurrency: int) -> Plan:
    """The pools for a cluster of ``nodes`` nodes and ``cluster_cpus`` CPUs.

    ``workers`` (``--workers``) caps the preprocessing tasks when given;
    in flight stays within ``max_concurrency`` rounded up to a multiple of
    the send actors (at most ``nodes - 1`` over)."""
    cpus = max(1, int(cluster_cpus))
    preprocess = min(workers, cpus) if workers else cpus
    send = max(1, min(nodes, max_concurrency))
    return Plan(preprocess, send, math.ceil(max_concurrency / send))
