"""Per-request limits, checked before anything is shipped: ``mm_item_limits``
("image=8,video=2"), the per-item feature-token budget (``mm_encoder_budget``)
and the context (``max_context_length``: prompt tokens plus the tokens asked
for), the last one first from the prompt's length alone, before tokenizing it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mmctl.errors import CheckFailed, InputError, UsageError


@dataclass(frozen=True)
class WorkerLimits:
    """What one request to a set of workers may carry: the least of theirs
    (0 or empty where none advertises a limit)."""

    encoder_budget: int = 0
    item_limits: dict[str, int] = field(default_factory=dict)
    context_length: int = 0

    @classmethod
    def of(cls, facts: Iterable[Any]) -> WorkerLimits:
        """From the workers' facts (``.server``: ``GetServerInfo``, ``.model``: ``GetModelInfo``)."""
        budgets, contexts = [], []
        limits: dict[str, int] = {}
        for f in facts:
            for kind, count in parse_item_limits(f.server.mm_item_limits or "").items():
                limits[kind] = min(count, limits.get(kind, count))
            if f.server.mm_encoder_budget:
                budgets.append(int(f.server.mm_encoder_budget))
            if f.model.max_context_length:
                contexts.append(int(f.model.max_context_length))
        return cls(min(budgets, default=0), limits, min(contexts, default=0))


#: The modalities of smg's ``Modality`` enum that a limit can name.
MODALITIES = ("image", "video", "audio")


def parse_item_limits(label: str) -> dict[str, int]:
    """``"image=8,video=2"`` → ``{"image": 8, "video": 2}``; empty means no limits."""
    limits: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in label.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit():
            raise UsageError(f"media limit {part!r} is not MODALITY=COUNT (e.g. image=8,video=2)")
        name = name.strip().lower()
        if name not in MODALITIES:
            raise UsageError(
                f"media limit {part!r}: the modality is one of {', '.join(MODALITIES)}"
            )
        limits[name] = int(value)
    return limits


def check_item_limits(kinds: Iterable[str], limits: dict[str, int], origin: str) -> None:
    counts = Counter(kinds)
    for kind, count in counts.items():
        if kind in limits and count > limits[kind]:
            raise InputError(
                f"{count} {kind} item(s) in one request, {origin} allows {limits[kind]} "
                f"(mm_item_limits {format_limits(limits)})",
                hint="send fewer items per request",
            )


def check_encoder_budget(tokens: list[tuple[str, int]], budget: int, origin: str) -> None:
    """``tokens``: (label, feature tokens) per item; ``budget`` 0 means none."""
    if budget <= 0:
        return
    for label, count in tokens:
        if count > budget:
            raise InputError(
                f"{label} carries {count} feature tokens, {origin} takes at most {budget} "
                "per item (mm_encoder_budget)",
                hint="lower --max-pixels (or --fps / --max-frames for video)",
            )


def format_limits(limits: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in limits.items())


def check_context(prompt_tokens: int, max_tokens: int, context: int) -> None:
    """The prompt's tokens and the tokens asked for must fit the worker's
    context (0: unknown): vLLM refuses the request only after the pixels were
    shipped."""
    if context and prompt_tokens + max_tokens > context:
        room = context - prompt_tokens
        raise CheckFailed(
            f"the prompt's {prompt_tokens:,} tokens and --max-tokens {max_tokens:,} exceed the "
            f"worker's max_context_length {context:,}",
            hint=f"--max-tokens {room:,} or less" if room > 0 else "fewer or smaller media",
        )


def check_prompt_length(least_tokens: int | None, max_tokens: int, context: int) -> None:
    """Refuse a prompt whose text alone cannot fit the context, from its length:
    ``least_tokens`` is what the tokenizer can promise without encoding it
    (:meth:`~mmctl.prompt.tokenizer.Tokenizer.least_tokens`; None: no promise).
    A 50 MB prompt takes minutes and gigabytes to tokenize, only to be refused."""
    if context and least_tokens is not None and least_tokens + max_tokens > context:
        raise CheckFailed(
            f"the prompt is too long for the worker's max_context_length {context:,}: its text "
            f"alone is at least {least_tokens:,} tokens (refused before tokenizing it)",
            hint="a shorter prompt",
        )
