"""The client-side mrope walk: accepts the real layouts, names the first bad frame."""

from __future__ import annotations

from mmctl.choices import LayoutKind
from mmctl.media.probe import MediaKind
from mmctl.models.qwen_vl import qwen3_vl
from mmctl.models.qwen_vl.layout import expand
from mmctl.models.qwen_vl.settings import TokenIds
from mmctl.prompt.mrope import walk
from mmctl.values.items import ItemFacts
from mmctl.values.layout import Span


def qwen_item(
    kind: MediaKind, grid: tuple[int, int, int], times: tuple[float, ...] = ()
) -> ItemFacts:
    """A Qwen item of ``grid`` (merge size 2)."""
    t, h, w = grid
    return ItemFacts(kind, t * h * w // 4, grid, times, rows=t * h * w)


IDS = TokenIds()
VS, VE, VPAD = IDS.vision_start_token_id, IDS.vision_end_token_id, IDS.video_token_id
GRID = (3, 4, 4)


class FakeTokenizer:
    def encode_cached(self, text: str) -> tuple[int, ...]:
        return (9, 9)


def _layout(kind=LayoutKind.VLLM):
    return expand(
        [5, VS, VPAD, VE, 6],
        [qwen_item(MediaKind.VIDEO, GRID, (0.0, 1.0, 2.0))],
        spec=qwen3_vl.VARIANT,
        token_ids=IDS,
        tokenizer=FakeTokenizer(),
        merge_size=2,
        kind=kind,
    )


def _walk(ids, spans):
    return walk(ids, spans, [GRID], IDS, 2)


def test_every_real_layout_passes():
    for kind in LayoutKind:
        layout = _layout(kind)
        result = _walk(layout.ids, layout.spans)
        assert result.ok, (kind, result.reason)
        assert result.frames_checked == 3


def test_missing_vision_start_in_frame_two_is_reported_for_frame_two():
    layout = _layout()
    ids = layout.id_list()
    starts = [i for i, t in enumerate(ids) if t == VS]
    # starts[0] is the outer one, starts[1] frame 1, starts[2] frame 2
    del ids[starts[2]]
    span = Span(0, MediaKind.VIDEO, layout.spans[0].offset, layout.spans[0].length - 1)
    result = _walk(ids, [span])
    assert not result.ok
    assert result.frame == 2
    assert "frame 2/3" in result.reason and "<|vision_start|> is missing" in result.reason


def test_missing_vision_end_in_frame_one_is_reported_for_frame_one():
    layout = _layout()
    ids = layout.id_list()
    ends = [i for i, t in enumerate(ids) if t == VE]
    del ids[ends[0]]
    span = type(layout.spans[0])(
        0, MediaKind.VIDEO, layout.spans[0].offset, layout.spans[0].length - 1
    )
    result = _walk(ids, [span])
    assert not result.ok and result.frame == 1
    assert "<|vision_end|> is missing" in result.reason


def test_missing_last_vision_end_is_an_engine_failure():
    ids = [VS, 9, VS, VPAD, VPAD, VPAD, VPAD, VE, 9, VS, *[VPAD] * 4]
    result = walk(ids, [Span(0, MediaKind.VIDEO, 1, len(ids) - 1)], [(2, 4, 4)], IDS, 2)
    assert not result.ok and result.frame == 2
    assert "not in list" in result.reason


def test_pad_count_off_by_one_names_frame_and_counts():
    layout = _layout()
    ids = layout.id_list()
    pads = [i for i, t in enumerate(ids) if t == VPAD]
    ids.insert(pads[5], VPAD)  # frame 2 gets 5 pads, the span 13
    span = Span(0, MediaKind.VIDEO, layout.spans[0].offset, layout.spans[0].length + 1)
    result = _walk(ids, [span])
    assert not result.ok
    assert "holds 13 video pad tokens" in result.reason


def test_pads_moved_between_frames_are_caught_by_the_walk():
    layout = _layout()
    ids = layout.id_list()
    pads = [i for i, t in enumerate(ids) if t == VPAD]
    del ids[pads[4]]  # frame 2 loses one…
    ids.insert(pads[0], VPAD)  # …frame 1 gains one: the span total still fits
    result = _walk(ids, layout.spans)
    assert not result.ok and result.frame == 1
    assert "5 <|video_pad|> tokens" in result.reason
