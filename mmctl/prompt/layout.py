"""Placeholder expansion: the prompt's token ids with each media item laid out.

The chat template writes one placeholder token per media item; vLLM's
processor replaces it (its ``PromptReplacement``, each model's
``_get_prompt_updates``) with the tokens the model embeds, and each item's
placeholder span is its replacement (what ``mm_placeholders`` carries).
:func:`replace_placeholders` does that for any family given the replacement
of one item; :func:`placeholders_for` finds where a template put them. The
Qwen-VL families' own layouts (and the variants of older routers) are in
:mod:`mmctl.models.qwen_vl.layout`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from mmctl.choices import LayoutKind
from mmctl.errors import InputError
from mmctl.media.probe import PIXEL_KINDS, MediaKind
from mmctl.values.items import ItemFacts
from mmctl.values.layout import Layout, Span
from mmctl.values.tokens import Tokens


def placeholders_for(ids: Sequence[int], items: Sequence[ItemFacts], tokens: Tokens) -> list[int]:
    """Where the template put each item's placeholder, checked against the items' kinds."""
    kinds = {k for k in PIXEL_KINDS if any(it.kind is k for it in items)}
    by_id: dict[int, MediaKind] = {}
    for kind in PIXEL_KINDS:
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
    targets: Mapping[MediaKind, Sequence[int]] | None = None,
) -> Layout:
    """vLLM's ``PromptReplacement``: the k-th placeholder of a modality becomes
    ``replacement`` of the k-th item of that modality (a template may write all
    images before the videos, as OneVision's does); each span is its replacement.
    ``targets``: where vLLM's target for a modality is more than its placeholder
    token (GLM's ``<|begin_of_video|><|video|><|end_of_video|>``), the token
    sequence matched and replaced whole. Spans are in item order."""
    ids = list(prompt_ids)
    where: dict[int, tuple[int, int]] = {}  # prompt position -> (item, target length)
    for kind in PIXEL_KINDS:
        members = [n for n, it in enumerate(items) if it.kind is kind]
        if not members:
            continue
        target = list((targets or {}).get(kind) or [tokens.placeholder(kind)])
        found = _matches(ids, target)
        if len(found) != len(members):
            raise InputError(
                f"the prompt holds {len(found)} {kind.value} placeholder(s) for "
                f"{len(members)} {kind.value} item(s)"
                + (
                    f" (vLLM's target is the {len(target)} tokens {target})"
                    if len(target) > 1
                    else ""
                )
            )
        where.update((pos, (n, len(target))) for pos, n in zip(found, members, strict=True))
    out: list[int] = []
    spans: dict[int, Span] = {}
    cursor = 0
    for pos in sorted(where):
        n, length = where[pos]
        out.extend(ids[cursor:pos])
        block = list(replacement(items[n]))
        spans[n] = Span(n, items[n].kind, len(out), len(block))
        out.extend(block)
        cursor = pos + length
    out.extend(ids[cursor:])
    return Layout(
        kind=LayoutKind.VLLM,
        ids=np.asarray(out, dtype=np.int64),
        spans=tuple(spans[n] for n in range(len(items))),
    )


def _matches(ids: list[int], target: list[int]) -> list[int]:
    """Where ``target`` occurs in ``ids``, left to right, not overlapping."""
    if len(target) == 1:
        return [i for i, t in enumerate(ids) if t == target[0]]
    found, i = [], 0
    while i <= len(ids) - len(target):
        if ids[i : i + len(target)] == target:
            found.append(i)
            i += len(target)
        else:
            i += 1
    return found
