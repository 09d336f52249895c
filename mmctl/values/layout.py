"""A prompt with its media laid out: the ids, each item's placeholder span, and
the result of checking it the way vLLM's model reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mmctl.choices import LayoutKind
from mmctl.media.probe import MediaKind


@dataclass(frozen=True)
class Span:
    """One item's placeholder span (what ``mm_placeholders`` carries)."""

    item: int
    kind: MediaKind
    offset: int
    length: int
    #: Every position of the span receives the item's embeddings, its text
    #: included (vLLM's ``PromptUpdateDetails.from_seq``: a pruned Qwen3-VL
    #: video, whose model embeds the frames' times and markers itself). The
    #: batch then leaves ``im_token_id`` unset, so the servicer marks the whole
    #: span; otherwise only the embedding token's positions receive them.
    embeds_all: bool = False

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(frozen=True)
class Layout:
    kind: LayoutKind
    ids: np.ndarray  # int64, the whole prompt
    spans: tuple[Span, ...]

    def id_list(self) -> list[int]:
        return self.ids.tolist()


@dataclass(frozen=True)
class LayoutCheck:
    """A family's check of a laid-out prompt (the mrope walk for Qwen; "every span
    is its item's replacement" for the others): the first problem found, if any."""

    ok: bool
    reason: str = ""
    item: int | None = None  # 1-based, as shown to users
    frame: int | None = None  # 1-based
    frames_checked: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reason": self.reason or None,
            "item": self.item,
            "frame": self.frame,
            "frames_checked": self.frames_checked,
        }


def span_outside(span: Span, length: int) -> LayoutCheck | None:
    """The failed check of a span that does not lie inside a prompt of ``length``
    tokens (a request read back may say anything), else ``None``."""
    if span.offset >= 0 and span.end <= length:
        return None
    n = span.item + 1
    return LayoutCheck(
        False,
        f"item {n}: placeholder span [{span.offset}, {span.end}) lies outside the prompt of "
        f"{length} tokens",
        n,
    )
