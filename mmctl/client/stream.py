"""The answer's token ids from a ``Generate`` stream, one rule for every caller.

smg-grpc-servicer 0.14.1 (``vllm/servicer.py`` ``Generate``): a streaming
request gets one ``chunk`` per engine step with that step's new tokens, then a
``complete`` whose ``output_ids`` repeat only the *last* delta (vLLM's DELTA
mode); a non-streaming request gets no chunks and one ``complete`` holding
every token. So the ids are the chunks' when the request streams, and the
completion's when it does not — appending both would count the last step
twice. ``Client.send``, the batch fleet and the load tester all read answers
through :class:`TokenStream`.
"""

from __future__ import annotations

from typing import Any


class TokenStream:
    """Feed it each ``GenerateResponse`` (already checked by ``channel.response``)."""

    def __init__(self, stream: bool) -> None:
        self.stream = stream
        self.ids: list[int] = []
        self.complete: Any = None

    def feed(self, resp: Any) -> str | None:
        """The response's kind (``chunk``, ``complete``, or a newer one, skipped)."""
        kind = resp.WhichOneof("response")
        if kind == "chunk":
            self.ids.extend(resp.chunk.token_ids)
        elif kind == "complete":
            self.complete = resp.complete
            if not self.stream:
                self.ids.extend(resp.complete.output_ids)
        return kind
