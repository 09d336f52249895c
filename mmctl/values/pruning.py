"""A worker's video pruning: the rate and method its vLLM was started with
(``--video-pruning-rate``, ``--video-pruning-method``; ARCHITECTURE §5.6).

Pruning drops video tokens after the vision encoder, so the prompt holds only
the retained ones: how many is a pure function of the grid and the rate
(``vllm/multimodal/video_prune/evs.py`` and ``vidcom2.py``,
``compute_retained_tokens_count``); which ones is the model's choice at run
time and never reaches the prompt.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mmctl.choices import DEFAULT_PRUNING_METHOD, DEFAULT_PRUNING_RATE, PruningMethod
from mmctl.errors import UsageError
from mmctl.media.probe import MediaKind
from mmctl.values.items import ItemFacts
from mmctl.values.layout import Layout


@dataclass(frozen=True)
class VideoPruning:
    """``rate``: the fraction of a video's tokens the worker drops, in [0, 1)
    (vLLM's bounds); 0 is off. ``method``: which algorithm picks them."""

    rate: float = DEFAULT_PRUNING_RATE
    method: PruningMethod = DEFAULT_PRUNING_METHOD

    def __post_init__(self) -> None:
        try:
            rate = float(self.rate)
        except (TypeError, ValueError):
            raise UsageError(f"--video-pruning-rate must be a number, got {self.rate!r}") from None
        if not (math.isfinite(rate) and 0.0 <= rate < 1.0):
            raise UsageError(
                f"--video-pruning-rate must be in [0, 1) as vLLM's is, got {self.rate}"
            )
        object.__setattr__(self, "rate", rate)
        try:
            object.__setattr__(self, "method", PruningMethod(self.method))
        except ValueError:
            names = ", ".join(m.value for m in PruningMethod)
            raise UsageError(
                f"--video-pruning-method must be one of {names}, got {self.method!r}"
            ) from None

    @property
    def enabled(self) -> bool:
        """vLLM's ``is_multimodal_pruning_enabled``: a rate above 0."""
        return self.rate > 0.0

    def retained(self, tokens_per_frame: int, frames: int) -> int:
        """The video's tokens after pruning (its whole count when off).

        EVS keeps at least the first frame's tokens; VidCom2 at least one token
        per frame; both ``int(total * (1 - rate))`` otherwise — Python's float
        arithmetic, as vLLM's."""
        total = tokens_per_frame * frames
        if not self.enabled:
            return total
        kept = int(total * (1 - self.rate))
        if self.method is PruningMethod.VIDCOM2:
            return max(frames, min(kept, total))
        return max(tokens_per_frame, kept)

    def frame_runs(self, tokens_per_frame: int, frames: int, per_frame: bool) -> list[int]:
        """A video's pad runs as vLLM lays its prompt out: one per frame
        (``per_frame``: Qwen3-VL's blocks) or one for the video (Qwen2.5-VL).

        Pruned, every retained token sits in the first frame's run and the
        later frames' runs are empty (``Qwen3VLMultiModalProcessor``'s
        ``tokens_per_frame = [num_tokens] + [0] * (num_frames - 1)``): which
        tokens survive is known only after the encoder."""
        if not per_frame:
            return [self.retained(tokens_per_frame, frames)]
        if not self.enabled:
            return [tokens_per_frame] * frames
        return [self.retained(tokens_per_frame, frames)] + [0] * (frames - 1)

    def describe(self) -> str:
        """``rate 0.75 (evs)``, or ``off``."""
        return f"rate {self.rate:g} ({self.method.value})" if self.enabled else "off"

    def as_dict(self) -> dict[str, object]:
        return {"rate": self.rate, "method": self.method.value, "enabled": self.enabled}


#: No pruning: what a worker started without ``--video-pruning-rate`` does.
NO_PRUNING = VideoPruning()


def video_tokens(layout: Layout, facts: Sequence[ItemFacts], pad: int) -> tuple[int, int]:
    """The videos' embedding tokens before pruning and those ``layout`` keeps
    (its ``pad`` tokens inside the videos' spans): what pruning saves."""
    whole = kept = 0
    for span, item in zip(layout.spans, facts, strict=True):
        if span.kind is MediaKind.VIDEO:
            whole += int(item.extra.get("unpruned_tokens", item.tokens))
            kept += int(np.count_nonzero(layout.ids[span.offset : span.end] == pad))
    return whole, kept
