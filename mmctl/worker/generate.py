"""Turning an answer into output tokens the way vLLM finishes a sequence.

``max_tokens`` cuts with finish_reason "length"; a stop token id or EOS ends
with "stop" and ``matched_token_id``; a stop string ends with "stop" and
``matched_stop_str``, the text up to it kept (vLLM's default
``include_stop_str_in_output=False``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Finished:
    tokens: list[int]
    finish_reason: str
    matched_token_id: int | None = None
    matched_stop_str: str | None = None


def finish(
    answer: Sequence[int],
    *,
    eos_ids: Sequence[int],
    max_tokens: int | None,
    stop_token_ids: Sequence[int] = (),
    stop: Sequence[str] = (),
    ignore_eos: bool = False,
    decode: Callable[[Sequence[int]], str],
) -> Finished:
    tokens = list(answer)
    if eos_ids and not ignore_eos:
        tokens.append(eos_ids[0])
    out: list[int] = []
    limit = max_tokens if max_tokens is not None else len(tokens)
    for token in tokens:
        if len(out) >= limit:
            return Finished(out, "length")
        out.append(token)
        if token in stop_token_ids or (token in eos_ids and not ignore_eos):
            return Finished(out, "stop", matched_token_id=token)
        if stop:
            text = decode(out)
            for s in stop:
                if s and s in text:
                    # Keep the tokens whose text ends before the stop string.
                    while out and s in decode(out):
                        out.pop()
                    return Finished(out, "stop", matched_stop_str=s)
    return Finished(out, "length" if len(out) >= limit else "stop")
