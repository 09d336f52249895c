"""``stub-worker --record DIR``: each accepted ``GenerateRequest``, as a file.

A peer's requests (the smg gateway's, a script's) become files that mmctl
reads like its own (``mmctl inspect``, :func:`mmctl.request.view.read_request`),
so a test can compare them with what mmctl builds for the same media. The
file holds the request as it arrived, except that every tensor is inline:
a ``/dev/shm`` file is gone once the worker has read it, so its bytes are
written in its place. Files are named ``<n>-<request id>.pb``, ``n`` counting
accepted requests from 1 (the id cut to a safe file name).
"""

from __future__ import annotations

import itertools
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from mmctl.request.view import batches, write_request

if TYPE_CHECKING:
    from mmctl.wire._gen.vllm_engine_pb2 import GenerateRequest
    from mmctl.worker.checks import ReceivedBatch

#: Request ids are the client's: anything else in a file name becomes "_".
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_ID_CHARS = 80


class Recorder:
    """Writes accepted requests into one folder, numbered in acceptance order."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._count = itertools.count(1)
        self._lock = threading.Lock()

    def write(self, req: GenerateRequest, received: list[ReceivedBatch]) -> Path:
        """Write ``req`` with the payloads of ``received`` inline; returns the file.
        Raises :class:`~mmctl.errors.InputError` when the file cannot be written."""
        with self._lock:
            n = next(self._count)
        out = inline_copy(req, received)
        name = _UNSAFE.sub("_", req.request_id)[:MAX_ID_CHARS] or "request"
        path = self.folder / f"{n:06d}-{name}.pb"
        write_request(out, path)
        return path


def inline_copy(req: GenerateRequest, received: list[ReceivedBatch]) -> GenerateRequest:
    """A copy of ``req`` whose received tensors all carry their bytes inline."""
    out = type(req)()
    out.CopyFrom(req)
    by_index = {b.index: b for b in received}
    for n, mm in enumerate(batches(out)):
        batch = by_index.get(n)
        if batch is None:  # a batch the worker did not read as media: kept as it came
            continue
        for key, payload in batch.payloads.items():
            td = mm.pixel_values if key == "pixel_values" else mm.model_specific_tensors[key]
            td.inline = bytes(payload)  # replaces an shm handle (one payload oneof)
    return out
