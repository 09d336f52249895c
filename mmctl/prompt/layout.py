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
from the family (:class:`~mmctl.models.qwen.QwenFamily`).

Families whose placeholder simply becomes the item's run of tokens (the LLaVA
families, Llama 4's tiles) use :func:`replace_placeholders`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mmctl.choices import LayoutKind
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models.base import TokenIds
from mmctl.models.family import ItemFacts, Tokens
from mmctl.prompt.tokenizer import Tokenizer

if TYPE_CHECKING:
    from mmctl.models.qwen import QwenFamily


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


def expand(
    prompt_ids: Sequence[int],
    items: Sequence[ItemFacts],
    *,
    spec: QwenFamily,
    token_ids: TokenIds,
    tokenizer: Tokenizer,
    merge_size: int,
    kind: LayoutKind = LayoutKind.VLLM,
) -> Layout:
    """Expand the k-th bare pad token of ``prompt_ids`` for the k-th item."""
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


def placeholders_for(ids: Sequence[int], items: Sequence[ItemFacts], tokens: Tokens) -> list[int]:
    """Where the template put each item's placeholder, checked against the items' kinds."""
    kinds = {k for k in MediaKind if any(it.kind is k for it in items)}
    by_id: dict[int, MediaKind] = {}
    for kind in MediaKind:
        try:
            by_id[tokens.placeholder(kind)] = kind
        except InputError:
            if kind in kinds:
                raise
    where = [i for i, t in enumerate(ids) if t in by_id]
    if len(where) != len(items):
        raise InputError(
            f"the prompt holds {len(where)} media placeholder(s) for {len(items)} media item(s)"
        )
    for n, (pos, item) in enumerate(zip(where, items, strict=True)):
        found = by_id[ids[pos]]
        if found is not item.kind:
            raise InputError(
                f"media item {n + 1} is {item.kind.value} but placeholder {n + 1} in the prompt "
                f"is for {found.value}"
            )
    return where


def replace_placeholders(
    prompt_ids: Sequence[int],
    items: Sequence[ItemFacts],
    tokens: Tokens,
    replacement: Callable[[ItemFacts], Sequence[int]],
) -> Layout:
    """vLLM's ``PromptReplacement``: the k-th placeholder of a modality becomes
    ``replacement`` of the k-th item of that modality (a template may write all
    images before the videos, as OneVision's does); each span is its replacement.
    Spans are in item order."""
    ids = list(prompt_ids)
    where: dict[int, int] = {}  # prompt position -> item
    for kind in MediaKind:
        members = [n for n, it in enumerate(items) if it.kind is kind]
        if not members:
            continue
        token = tokens.placeholder(kind)
        found = [i for i, t in enumerate(ids) if t == token]
        if len(found) != len(members):
            raise InputError(
                f"the prompt holds {len(found)} {kind.value} placeholder(s) for "
                f"{len(members)} {kind.value} item(s)"
            )
        where.update(zip(found, members, strict=True))
    out: list[int] = []
    spans: dict[int, Span] = {}
    cursor = 0
    for pos in sorted(where):
        n = where[pos]
        out.extend(ids[cursor:pos])
        block = list(replacement(items[n]))
        spans[n] = Span(n, items[n].kind, len(out), len(block))
        out.extend(block)
        cursor = pos + 1
    out.extend(ids[cursor:])
    return Layout(
        kind=LayoutKind.VLLM,
        ids=np.asarray(out, dtype=np.int64),
        spans=tuple(spans[n] for n in range(len(items))),
    )
