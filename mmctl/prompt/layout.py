"""Placeholder expansion: the prompt's token ids with each media item laid out.

The rendered prompt holds one ``<|vision_start|><|X_pad|><|vision_end|>``
triple per item. Expansion replaces it with the tokens the model embeds, and
records each item's placeholder span (what ``mm_placeholders`` carries).

Two layouts exist in the wild for Qwen3-VL video (ARCHITECTURE §5.4):

``vllm``
    vLLM 0.33 with transformers ≥ 5.10 (and HF's ``Qwen3VLProcessor`` today):
    the outer pair stays and the bare ``<|video_pad|>`` becomes, per temporal
    patch, ``<t seconds>`` + ``<|vision_start|>`` + pads + ``<|vision_end|>``.
    The span is that expansion.
``hf-legacy``
    Older transformers: the whole outer triple is replaced by the same
    per-frame blocks (no outer pair); the span is the expansion.

Routers older than the smg gateway 1.13.0 had a third (the outer pair reused
as the first frame's start and the last frame's end); 1.13.0 sends the
``vllm`` layout, token for token (``tests/compat/test_smg_gateway.py``).

Images, and Qwen2.5-VL video, expand the bare pad to ``t·h·w/M²`` pads in
every layout. Family knowledge (per-frame markers, the timestamp text) comes
from the :class:`~mmctl.models.base.ModelSpec`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mmctl.choices import LayoutKind
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models.base import ModelSpec, TokenIds
from mmctl.prompt.tokenizer import Tokenizer


@dataclass(frozen=True)
class LayoutItem:
    """What expansion needs to know about one media item."""

    kind: MediaKind
    grid_thw: tuple[int, int, int]
    patch_times: tuple[float, ...] = ()  # one per temporal patch (video)


@dataclass(frozen=True)
class Span:
    item: int
    kind: MediaKind
    offset: int
    length: int

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


def pad_id(kind: MediaKind, token_ids: TokenIds) -> int:
    return token_ids.video_token_id if kind is MediaKind.VIDEO else token_ids.image_token_id


def expand(
    prompt_ids: Sequence[int],
    items: Sequence[LayoutItem],
    *,
    spec: ModelSpec,
    token_ids: TokenIds,
    tokenizer: Tokenizer,
    merge_size: int,
    kind: LayoutKind = LayoutKind.VLLM,
) -> Layout:
    """Expand the k-th bare pad token of ``prompt_ids`` for the k-th item."""
    pads = {token_ids.image_token_id: MediaKind.IMAGE, token_ids.video_token_id: MediaKind.VIDEO}
    ids = list(prompt_ids)
    where = [i for i, t in enumerate(ids) if t in pads]
    if len(where) != len(items):
        raise InputError(
            f"the prompt holds {len(where)} media placeholder(s) for {len(items)} media item(s)"
        )
    out: list[int] = []
    spans: list[Span] = []
    cursor = 0
    for n, (pos, item) in enumerate(zip(where, items, strict=True)):
        found = pads[ids[pos]]
        if found is not item.kind:
            raise InputError(
                f"media item {n + 1} is {item.kind.value} but placeholder {n + 1} in the prompt "
                f"is for {found.value}"
            )
        t, h, w = item.grid_thw
        per_frame = h * w // (merge_size * merge_size)
        pad = pad_id(item.kind, token_ids)
        if item.kind is MediaKind.IMAGE or not spec.per_frame_markers:
            out.extend(ids[cursor:pos])
            spans.append(Span(n, item.kind, len(out), t * per_frame))
            out.extend([pad] * (t * per_frame))
            cursor = pos + 1
            continue
        if len(item.patch_times) != t:
            raise InputError(
                f"video item {n + 1}: {len(item.patch_times)} timestamps for {t} frames"
            )
        labels = [list(tokenizer.encode_cached(spec.frame_label(s))) for s in item.patch_times]
        vs, ve = token_ids.vision_start_token_id, token_ids.vision_end_token_id
        block: list[int] = []
        for label in labels:
            block.extend(label)
            block.append(vs)
            block.extend([pad] * per_frame)
            block.append(ve)
        if kind is LayoutKind.HF_LEGACY:
            if not (0 < pos < len(ids) - 1 and ids[pos - 1] == vs and ids[pos + 1] == ve):
                raise InputError(
                    "hf-legacy layout needs the <|vision_start|><|video_pad|><|vision_end|> triple"
                )
            out.extend(ids[cursor : pos - 1])
            cursor = pos + 2
        else:
            out.extend(ids[cursor:pos])
            cursor = pos + 1
        spans.append(Span(n, item.kind, len(out), len(block)))
        out.extend(block)
    out.extend(ids[cursor:])
    return Layout(kind=kind, ids=np.asarray(out, dtype=np.int64), spans=tuple(spans))
