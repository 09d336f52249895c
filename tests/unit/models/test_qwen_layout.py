"""Placeholder expansion: the three Qwen3-VL video layouts, images, Qwen2.5-VL, errors."""

from __future__ import annotations

import pytest

from mmctl.choices import LayoutKind
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models.qwen_vl import qwen2_vl, qwen3_vl
from mmctl.models.qwen_vl.layout import expand
from mmctl.models.qwen_vl.settings import TokenIds
from mmctl.values.items import ItemFacts


def qwen_item(
    kind: MediaKind, grid: tuple[int, int, int], times: tuple[float, ...] = ()
) -> ItemFacts:
    """A Qwen item of ``grid`` (merge size 2)."""
    t, h, w = grid
    return ItemFacts(kind, t * h * w // 4, grid, times, rows=t * h * w)


IDS = TokenIds()
VS, VE = IDS.vision_start_token_id, IDS.vision_end_token_id
VPAD, IPAD = IDS.video_token_id, IDS.image_token_id


class FakeTokenizer:
    """Timestamp text → one token per character (enough to see where labels go)."""

    def encode_cached(self, text: str) -> tuple[int, ...]:
        return tuple(ord(c) for c in text)


def _label(t: float) -> list[int]:
    return [ord(c) for c in f"<{t:.1f} seconds>"]


VIDEO = qwen_item(MediaKind.VIDEO, (2, 4, 4), (0.25, 1.5))
PROMPT = [1, 2, VS, VPAD, VE, 3]


def _expand(items, prompt=PROMPT, kind=LayoutKind.VLLM, spec=qwen3_vl.VARIANT):
    return expand(
        prompt, items, spec=spec, token_ids=IDS, tokenizer=FakeTokenizer(), merge_size=2, kind=kind
    )


def _frame(t: float) -> list[int]:
    return [*_label(t), VS, *[VPAD] * 4, VE]


def test_vllm_keeps_the_outer_pair_and_expands_the_bare_pad():
    layout = _expand([VIDEO])
    body = _frame(0.25) + _frame(1.5)
    assert layout.id_list() == [1, 2, VS, *body, VE, 3]
    (span,) = layout.spans
    assert (span.offset, span.length) == (3, len(body))  # starts on the first timestamp


def test_hf_legacy_replaces_the_whole_triple():
    layout = _expand([VIDEO], kind=LayoutKind.HF_LEGACY)
    body = _frame(0.25) + _frame(1.5)
    assert layout.id_list() == [1, 2, *body, 3]
    assert (layout.spans[0].offset, layout.spans[0].length) == (2, len(body))


def test_image_expands_to_pads_only():
    prompt = [VS, IPAD, VE, 7]
    layout = _expand([qwen_item(MediaKind.IMAGE, (1, 6, 4))], prompt=prompt)
    assert layout.id_list() == [VS, *[IPAD] * 6, VE, 7]
    assert (layout.spans[0].offset, layout.spans[0].length) == (1, 6)


def test_qwen25_video_is_one_flat_run_in_every_layout():
    for kind in LayoutKind:
        layout = _expand([VIDEO], kind=kind, spec=qwen2_vl.VARIANT)
        assert layout.id_list() == [1, 2, VS, *[VPAD] * 8, VE, 3]


def test_items_follow_prompt_order():
    prompt = [VS, IPAD, VE, VS, VPAD, VE]
    layout = _expand([qwen_item(MediaKind.IMAGE, (1, 2, 2)), VIDEO], prompt=prompt)
    assert [s.kind for s in layout.spans] == [MediaKind.IMAGE, MediaKind.VIDEO]
    assert layout.spans[0].end < layout.spans[1].offset


def test_count_and_kind_mismatches_are_input_errors():
    with pytest.raises(InputError, match="1 media placeholder"):
        _expand([VIDEO, VIDEO])
    with pytest.raises(InputError, match="is video but placeholder 1"):
        _expand([qwen_item(MediaKind.VIDEO, (1, 2, 2), (0.0,))], prompt=[VS, IPAD, VE])
