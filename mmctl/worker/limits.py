"""The stub worker's resource bounds (RELIABILITY.md): defaults, and why these values."""

from __future__ import annotations

#: Default ``--max-message-mb``: a 30 s 720p Qwen3-VL clip at the checkpoint
#: budget is ~290 MB of float32 pixels inline (the largest request mmctl's
#: own bench sends); 1 GiB leaves room for 3x that and stays well under
#: gRPC's 2 GiB ceiling. Peak memory per admitted request is ~2x its size.
MAX_MESSAGE_MB = 1024
#: Default ``--max-concurrent-requests``: Generates admitted at once (the
#: load tests run 32); beyond it ``RESOURCE_EXHAUSTED``.
MAX_CONCURRENT_REQUESTS = 64
#: A request at least this large is followed by ``malloc_trim``: its pages
#: go back to the system instead of staying in glibc's arenas.
TRIM_BYTES = 32 * 1024 * 1024
