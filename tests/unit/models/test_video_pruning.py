"""Video pruning (ARCHITECTURE §5.6): the kept counts, the layouts a pruning
worker expects, which models may prune, and the batch a pruned video travels in."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mmctl.choices import LayoutKind, PixelFormat, PruningMethod
from mmctl.errors import UsageError
from mmctl.media.probe import MediaKind
from mmctl.models.qwen_vl import qwen2_vl, qwen3_vl
from mmctl.models.qwen_vl.layout import expand
from mmctl.prompt.mrope import walk
from mmctl.values.pruning import NO_PRUNING, VideoPruning
from tests.unit.models.test_qwen_layout import (
    IDS,
    PROMPT,
    VE,
    VPAD,
    VS,
    FakeTokenizer,
    _label,
    qwen_item,
)

EVS, VIDCOM2 = PruningMethod.EVS, PruningMethod.VIDCOM2


@pytest.mark.parametrize(
    ("rate", "method", "per_frame", "frames", "kept"),
    [
        # evs.compute_retained_tokens_count: max(per_frame, int(total * (1 - q)))
        (0.5, EVS, 6, 4, 12),
        (0.25, EVS, 6, 4, 18),
        (0.75, EVS, 6, 4, 6),
        (0.9, EVS, 6, 4, 6),  # never fewer than the first frame's
        (0.7, EVS, 6, 4, 7),  # int(24 * 0.30000000000000004) = 7, as Python has it
        # vidcom2.compute_retained_tokens_count: max(frames, min(int(...), total))
        (0.5, VIDCOM2, 6, 4, 12),
        (0.9, VIDCOM2, 6, 4, 4),  # one per frame at least: fewer than EVS keeps
        (0.99, VIDCOM2, 180, 10, 18),
        (0.0, EVS, 6, 4, 24),  # off: the whole video
    ],
)
def test_kept_tokens_are_vllms_counts(rate, method, per_frame, frames, kept):
    assert VideoPruning(rate, method).retained(per_frame, frames) == kept


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5, float("nan"), float("inf"), "half"])
def test_a_rate_outside_vllms_bounds_is_a_usage_error(rate):
    with pytest.raises(UsageError, match="--video-pruning-rate"):
        VideoPruning(rate)


def test_a_method_vllm_lacks_is_a_usage_error():
    with pytest.raises(UsageError, match="--video-pruning-method must be one of evs, vidcom2"):
        VideoPruning(0.5, "topk")  # type: ignore[arg-type]
    assert VideoPruning(0.5, "vidcom2").method is VIDCOM2  # type: ignore[arg-type]


def test_runs_put_every_kept_token_in_the_first_frame():
    pruning = VideoPruning(0.5)
    assert pruning.frame_runs(6, 4, per_frame=True) == [12, 0, 0, 0]
    assert pruning.frame_runs(6, 4, per_frame=False) == [12]
    assert NO_PRUNING.frame_runs(6, 4, per_frame=True) == [6, 6, 6, 6]


# ---- layouts ----

VIDEO = qwen_item(MediaKind.VIDEO, (4, 4, 6), (0.25, 1.25, 2.25, 3.25))  # 6 a frame, 24 in all


def _expand(pruning, spec=qwen3_vl.VARIANT, items=(VIDEO,)):
    return expand(
        PROMPT,
        list(items),
        spec=spec,
        token_ids=IDS,
        tokenizer=FakeTokenizer(),
        merge_size=2,
        kind=LayoutKind.VLLM,
        pruning=pruning,
    )


def _walk(layout, pruning, spec=qwen3_vl.VARIANT):
    return walk(
        layout.ids,
        layout.spans,
        [VIDEO.grid],
        IDS,
        2,
        per_frame_markers=spec.per_frame_markers,
        pruning=pruning,
    )


def test_qwen3_pruned_video_keeps_every_frames_time_and_markers():
    pruning = VideoPruning(0.5)
    layout = _expand(pruning)
    times = VIDEO.patch_times
    body = [*_label(times[0]), VS, *[VPAD] * 12, VE]
    for t in times[1:]:
        body += [*_label(t), VS, VE]
    assert layout.id_list() == [1, 2, VS, *body, VE, 3]
    (span,) = layout.spans
    assert (span.offset, span.length, span.embeds_all) == (3, len(body), True)
    assert _walk(layout, pruning).ok


def test_qwen25_pruned_video_is_one_shorter_run():
    layout = _expand(VideoPruning(0.75), spec=qwen2_vl.VARIANT)
    assert layout.id_list() == [1, 2, VS, *[VPAD] * 6, VE, 3]
    assert not layout.spans[0].embeds_all  # the span is all pads: im_token_id marks it


def test_an_unpruned_layout_is_refused_for_a_pruning_worker_naming_the_flag():
    unpruned = _expand(NO_PRUNING)
    check = _walk(unpruned, VideoPruning(0.5))
    assert not check.ok
    assert "holds 24 video pad tokens" in check.reason
    assert "12 of its 24 after video pruning at rate 0.5 (evs)" in check.reason
    assert "--video-pruning-rate 0.5" in check.reason
    other = _walk(_expand(VideoPruning(0.25)), VideoPruning(0.5))
    assert "laid out for another --video-pruning-rate; this worker's is 0.5" in other.reason
    pruned = _walk(_expand(VideoPruning(0.5)), NO_PRUNING)
    assert "this one does not: --video-pruning-rate 0" in pruned.reason


def test_kept_tokens_moved_to_a_later_frame_are_refused():
    """vLLM's walk would still count them, but its model lays them in the first
    frame's block: a request that moves them lies about the positions."""
    pruning = VideoPruning(0.5)
    ids = _expand(pruning).id_list()
    first = ids.index(VPAD)
    del ids[first]  # one pad out of the first block...
    last_end = len(ids) - 1 - ids[::-1].index(VE, 1)
    ids.insert(last_end, VPAD)  # ...into the last frame's
    layout = replace(_expand(pruning), ids=np.asarray(ids))
    check = _walk(layout, pruning)
    assert not check.ok
    assert "frame 1/4: 11 <|video_pad|>" in check.reason
    assert "video pruning (rate 0.5 (evs)) puts 12 in this frame" in check.reason


# ---- which models prune ----


def _as(model, family, model_type):
    config = {**model.files.config, "model_type": model_type}
    return replace(model, spec=family, files=replace(model.files, config=config))


def test_only_models_vllm_prunes_take_a_rate(builtin_model):
    pruning = VideoPruning(0.5)
    assert builtin_model.with_pruning(pruning).pruning == pruning
    assert builtin_model.with_pruning(VideoPruning(0.5, VIDCOM2)).pruning.method is VIDCOM2
    assert builtin_model.with_pruning(None) is builtin_model
    qwen25 = _as(builtin_model, qwen2_vl.FAMILY, "qwen2_5_vl")
    assert qwen25.with_pruning(pruning).pruning == pruning
    with pytest.raises(UsageError, match="does not implement --video-pruning-method vidcom2"):
        qwen25.with_pruning(VideoPruning(0.5, VIDCOM2))
    qwen2 = _as(builtin_model, qwen2_vl.FAMILY, "qwen2_vl")
    with pytest.raises(UsageError, match="qwen2_vl model does not prune video") as err:
        qwen2.with_pruning(pruning)
    assert "qwen3_vl" in (err.value.hint or "") and "qwen2_5_vl" in (err.value.hint or "")
    assert qwen2.with_pruning(VideoPruning(0.0)).pruning == NO_PRUNING  # rate 0: nothing to do


def test_a_pruned_qwen3_video_travels_without_im_token_id_and_with_its_times(
    builtin_model, red_blue
):
    from mmctl.request.compose import compose

    pruned = builtin_model.with_pruning(VideoPruning(0.5))
    composed = compose([red_blue], "?", pruned, pixel_format=PixelFormat.UINT8)
    req = composed.plan.to_proto()
    batch = req.mm_inputs
    # The servicer then marks the whole span: the model embeds times and markers itself.
    assert not batch.HasField("im_token_id")
    assert "timestamps" in batch.model_specific_tensors
    assert "timestamps" in batch.batched_keys and "timestamps" in batch.keep_on_cpu_keys
    (span,) = batch.mm_placeholders
    ids = list(req.tokenized.input_ids)
    t, h, w = composed.items[0].pre.grid_thw
    kept = VideoPruning(0.5).retained(h * w // 4, t)
    assert ids[span.offset : span.offset + span.length].count(IDS.video_token_id) == kept
    plain = compose([red_blue], "?", builtin_model, pixel_format=PixelFormat.UINT8)
    assert plain.plan.to_proto().mm_inputs.im_token_id == IDS.video_token_id
