"""The client-side version of vLLM's mrope frame walk (ARCHITECTURE §5.5).

vLLM derives Qwen3-VL's 3-D positions by walking each video's span: for each
of ``grid_t`` frames it finds the next ``<|vision_start|>`` from the current
offset, then the next ``<|vision_end|>``, and takes the ``<|video_pad|>``
tokens between them as that frame's ``h·w/M²`` positions. A missing marker
raises inside the engine ("… is not in list"); a wrong pad count silently
shifts every later position. Checking it here, before anything is sent,
turns both into one clear sentence naming the item and frame.

The same pass checks what the worker's embedding scatter relies on for
every item: the span holds exactly ``t·h·w/M²`` pad tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from mmctl.media.probe import MediaKind
from mmctl.values.layout import LayoutCheck, Span, span_outside
from mmctl.values.pruning import NO_PRUNING, VideoPruning


class FrameMarkers(Protocol):
    """The ids the walk looks for (the Qwen-VL families' ``TokenIds``)."""

    @property
    def vision_start_token_id(self) -> int: ...

    @property
    def vision_end_token_id(self) -> int: ...

    def placeholder(self, kind: MediaKind) -> int: ...


def walk(
    ids: Sequence[int] | np.ndarray,
    spans: Sequence[Span],
    grids: Sequence[tuple[int, int, int]],
    token_ids: FrameMarkers,
    merge_size: int,
    per_frame_markers: bool = True,
    pruning: VideoPruning = NO_PRUNING,
) -> LayoutCheck:
    """Check every span; the first problem found is the result. A video's pads
    are counted as a worker pruning with ``pruning`` expects them (all retained
    ones in the first frame's block: vLLM's walk skips the empty frames)."""
    arr = np.asarray(ids, dtype=np.int64)
    n = len(arr)
    vs_at = np.flatnonzero(arr == token_ids.vision_start_token_id)
    ve_at = np.flatnonzero(arr == token_ids.vision_end_token_id)
    checked = 0
    for span, (t, h, w) in zip(spans, grids, strict=True):
        item = span.item + 1
        outside = span_outside(span, n)
        if outside is not None:
            return outside
        per_frame = h * w // (merge_size * merge_size)
        pad = token_ids.placeholder(span.kind)
        video = span.kind is MediaKind.VIDEO
        runs = (
            pruning.frame_runs(per_frame, t, per_frame=per_frame_markers)
            if video
            else [t * per_frame]
        )
        inside = int(np.count_nonzero(arr[span.offset : span.end] == pad))
        if inside != sum(runs):
            return LayoutCheck(
                False,
                f"item {item}: its span holds {inside} {span.kind.value} pad tokens, grid "
                f"{t}x{h}x{w} needs {_needs(t * per_frame, sum(runs), merge_size, pruning)}"
                + (_pruning_note(pruning, t * per_frame, inside) if video else ""),
                item,
                frames_checked=checked,
            )
        if span.kind is not MediaKind.VIDEO or not per_frame_markers:
            continue
        cursor = span.offset
        for frame in range(t):
            k = np.searchsorted(vs_at, cursor)
            if k == len(vs_at):
                return LayoutCheck(
                    False,
                    f"item {item} frame {frame + 1}/{t}: no <|vision_start|> at or after token "
                    f"{cursor} (vLLM fails in the engine: 'vision_start_token_id is not in list')",
                    item,
                    frame + 1,
                    checked,
                )
            start = int(vs_at[k])
            skipped = int(np.count_nonzero(arr[cursor:start] == pad))
            if skipped:
                return LayoutCheck(
                    False,
                    f"item {item} frame {frame + 1}/{t}: {skipped} <|video_pad|> tokens before "
                    f"the next <|vision_start|> (token {start}) — this frame's "
                    "<|vision_start|> is missing",
                    item,
                    frame + 1,
                    checked,
                )
            k = np.searchsorted(ve_at, start + 1)
            if k == len(ve_at):
                return LayoutCheck(
                    False,
                    f"item {item} frame {frame + 1}/{t}: no <|vision_end|> after the "
                    f"<|vision_start|> at token {start} (vLLM fails in the engine: "
                    "'vision_end_token_id is not in list')",
                    item,
                    frame + 1,
                    checked,
                )
            end = int(ve_at[k])
            k = np.searchsorted(vs_at, start + 1)
            if k < len(vs_at) and vs_at[k] < end:
                return LayoutCheck(
                    False,
                    f"item {item} frame {frame + 1}/{t}: another <|vision_start|> (token "
                    f"{int(vs_at[k])}) before its <|vision_end|> — this frame's "
                    "<|vision_end|> is missing",
                    item,
                    frame + 1,
                    checked,
                )
            if end > span.end:  # the closer may sit right after the span (smg)
                return LayoutCheck(
                    False,
                    f"item {item} frame {frame + 1}/{t}: its <|vision_end|> at token {end} lies "
                    f"past the placeholder span [{span.offset}, {span.end})",
                    item,
                    frame + 1,
                    checked,
                )
            count = int(np.count_nonzero(arr[start + 1 : end] == pad))
            if count != runs[frame]:
                needs = (
                    f"video pruning ({pruning.describe()}) puts {runs[frame]} in this frame"
                    if pruning.enabled
                    else f"grid needs h*w/{merge_size**2} = {per_frame}"
                )
                return LayoutCheck(
                    False,
                    f"item {item} frame {frame + 1}/{t}: {count} <|video_pad|> tokens between "
                    f"tokens {start} and {end}, {needs} "
                    "(vLLM would misplace every later position)",
                    item,
                    frame + 1,
                    checked,
                )
            checked += 1
            cursor = end + 1
    return LayoutCheck(True, frames_checked=checked)


def _needs(whole: int, kept: int, merge_size: int, pruning: VideoPruning) -> str:
    if kept == whole:
        return f"t*h*w/{merge_size**2} = {whole}"
    return f"{kept} of its {whole} after video pruning at {pruning.describe()}"


def _pruning_note(pruning: VideoPruning, whole: int, inside: int) -> str:
    """Which worker the count that arrived was laid out for, when it is not
    this one: the flag that tells mmctl the worker's pruning."""
    if not pruning.enabled:
        return (
            " (laid out for a worker that prunes video; this one does not: --video-pruning-rate 0)"
        )
    if inside == whole:
        return (
            f" (laid out for a worker that does not prune video; this one prunes at "
            f"{pruning.describe()}: --video-pruning-rate {pruning.rate:g})"
        )
    return f" (laid out for another --video-pruning-rate; this worker's is {pruning.rate:g})"
