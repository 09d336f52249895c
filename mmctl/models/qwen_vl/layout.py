"""The Qwen-VL prompt layouts: each bare pad token expanded for its item.

The rendered prompt holds one ``<|vision_start|><|X_pad|><|vision_end|>``
triple per item. Two layouts exist in the wild for Qwen3-VL video
(ARCHITECTURE §5.4):

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
every layout. A worker that prunes video (ARCHITECTURE §5.6) expects only the
retained pads: Qwen2.5-VL's one run shorter, Qwen3-VL's all in the first
frame's block, the later blocks empty (their times and markers stay). What differs by family (per-frame markers, the timestamp text)
comes from its :class:`~mmctl.models.qwen_vl.variant.QwenVariant`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mmctl.choices import LayoutKind
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models.qwen_vl.settings import TokenIds
from mmctl.models.qwen_vl.variant import QwenVariant
from mmctl.prompt.layout import placeholders_for
from mmctl.prompt.tokenizer import Tokenizer
from mmctl.values.items import ItemFacts
from mmctl.values.layout import Layout, Span
from mmctl.values.pruning import NO_PRUNING, VideoPruning


def expand(
    prompt_ids: Sequence[int],
    items: Sequence[ItemFacts],
    *,
    spec: QwenVariant,
    token_ids: TokenIds,
    tokenizer: Tokenizer,
    merge_size: int,
    kind: LayoutKind = LayoutKind.VLLM,
    pruning: VideoPruning = NO_PRUNING,
) -> Layout:
    """Expand the k-th bare pad token of ``prompt_ids`` for the k-th item; a
    video's pads as a worker pruning with ``pruning`` expects them
    (:meth:`~mmctl.values.pruning.VideoPruning.frame_runs`)."""
    ids = list(prompt_ids)
    where = placeholders_for(ids, items, token_ids)
    out: list[int] = []
    spans: list[Span] = []
    cursor = 0
    for n, (pos, item) in enumerate(zip(where, items, strict=True)):
        assert item.grid_thw is not None, "Qwen items carry their grid"
        t, h, w = item.grid_thw
        per_frame = h * w // (merge_size * merge_size)
        pad = token_ids.placeholder(item.kind)
        if item.kind is MediaKind.IMAGE or not spec.per_frame_markers:
            count = t * per_frame
            if item.kind is MediaKind.VIDEO:
                (count,) = pruning.frame_runs(per_frame, t, per_frame=False)
            out.extend(ids[cursor:pos])
            spans.append(Span(n, item.kind, len(out), count))
            out.extend([pad] * count)
            cursor = pos + 1
            continue
        if len(item.patch_times) != t:
            raise InputError(
                f"video item {n + 1}: {len(item.patch_times)} timestamps for {t} frames"
            )
        labels = [list(tokenizer.encode_cached(spec.frame_label(s))) for s in item.patch_times]
        vs, ve = token_ids.vision_start_token_id, token_ids.vision_end_token_id
        block: list[int] = []
        for label, run in zip(
            labels, pruning.frame_runs(per_frame, t, per_frame=True), strict=True
        ):
            block.extend(label)
            block.append(vs)
            block.extend([pad] * run)
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
        spans.append(Span(n, item.kind, len(out), len(block), embeds_all=pruning.enabled))
        out.extend(block)
    out.extend(ids[cursor:])
    return Layout(kind=kind, ids=np.asarray(out, dtype=np.int64), spans=tuple(spans))
