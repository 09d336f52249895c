"""Qwen2-VL's fps sampling on long clips, as torch's float32 ``arange`` rounds it.

vLLM's ``Qwen2VLVideoBackend`` (Qwen3-Omni's loader) and transformers'
``Qwen2VLVideoProcessor.sample_frames`` take ``torch.arange(0, total, total / n).int()``;
past ~50,000 frames torch's vectorized fill lands one float32 ulp away from
``float(i * step)`` at some indices, and ``.int()`` makes that a different frame.

The numbers were made once with vLLM 0.32's own code in the engine environment
(``Qwen2VLVideoBackend.compute_frames_index_to_sample(VideoSourceMetadata(total, 30.0,
total / 30.0), VideoTargetMetadata(-1, 2, 300))``, torch 2.13 CPU): the count, the sum of
all indices, and every index where the scalar ``float(i * step)`` form picks another frame.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mmctl.models.model import load_model
from mmctl.models.qwen_vl import qwen2_vl, qwen3_omni

FOLDER = Path(__file__).resolve().parents[2] / "fixtures" / "families" / "qwen3_omni_moe"

# (frames at 30 fps, count, sum of indices, {position: index where the scalar form differs})
VLLM_CASES = [
    (50263, 768, 19275478, {562: 36781, 665: 43521}),
    (47186, 768, 18095449, {743: 45650}),
    (153926, 768, 59030240, {490: 98208, 735: 147311}),
    (361852, 768, 138769866,
     {161: 75857, 322: 151714, 353: 166319, 514: 242177, 545: 256782, 644: 303428,
      706: 332639}),
    (3750, 250, 466875, {}),  # 250 = 15 blocks of 16 and a one-by-one tail of 10
]  # fmt: skip


@pytest.mark.parametrize(("total", "count", "total_sum", "picked"), VLLM_CASES)
def test_omni_sampling_matches_vllm_on_long_clips(
    total: int, count: int, total_sum: int, picked: dict[int, int]
) -> None:
    vision = load_model(model_dir=FOLDER).params
    got = qwen3_omni.VARIANT.sample_indices(total, 30.0, vision)
    assert (len(got), int(got.sum())) == (count, total_sum)
    assert {i: int(got[i]) for i in picked} == picked


def test_qwen2_vl_sampling_takes_the_same_range() -> None:
    # transformers' sample_frames makes the same torch.arange call (unclamped; no index
    # here reaches the end).
    got = qwen2_vl.VARIANT.sample_indices(50263, 30.0, qwen2_vl.FAMILY.settings())
    assert (len(got), int(got.sum()), int(got[562]), int(got[665])) == (
        768,
        19275478,
        36781,
        43521,
    )


# (frames, fps, count, sum of indices, last three) from vLLM 0.32's own
# Qwen2VLVideoBackend.compute_frames_index_to_sample (engine environment, as above, at
# each clip's fps): the float32 step ends on ``total`` itself, which vLLM clamps to the
# last frame. HF's unclamped sampling would index past the clip (mmctl raised IndexError).
TAIL_CASES = [
    (153, 10.0, 31, 2357, [142, 147, 152]),
    (295, 1.0, 295, 43365, [292, 293, 294]),
    (451, 1.0, 451, 101475, [448, 449, 450]),
    (5487, 24000 / 1001, 457, 1253552, [5462, 5474, 5486]),
]


@pytest.mark.parametrize(("total", "fps", "count", "total_sum", "tail"), TAIL_CASES)
def test_qwen2_vl_sampling_clamps_the_tail_as_vllm_s_loader(
    total: int, fps: float, count: int, total_sum: int, tail: list[int]
) -> None:
    got = qwen2_vl.VARIANT.sample_indices(total, fps, qwen2_vl.FAMILY.settings())
    assert (len(got), int(got.sum()), got[-3:].tolist()) == (count, total_sum, tail)
