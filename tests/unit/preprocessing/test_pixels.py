import numpy as np
import pytest

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.models.qwen_vl import qwen2_vl, qwen3_vl
from mmctl.preprocessing.pixels import (
    bfloat16_bits_to_float32,
    float32_to_bfloat16_bits,
    patchify_into,
)
from mmctl.preprocessing.resize import smart_resize_image, smart_resize_video

P3 = qwen3_vl.FAMILY.settings()


def test_linspace_ties_round_to_even_like_numpy():
    # ARCHITECTURE §5.1: 75 frames at 30 fps -> 5 frames, halves to even.
    assert qwen3_vl.VARIANT.sample_indices(75, 30.0, P3).tolist() == [0, 18, 37, 56, 74]


def test_sampling_clamps_to_min_max_and_total():
    assert len(qwen3_vl.VARIANT.sample_indices(6, 10.0, P3)) == 4  # min_frames
    assert len(qwen3_vl.VARIANT.sample_indices(1600, 4.0, P3)) == 768  # max_frames
    assert len(qwen3_vl.VARIANT.sample_indices(3, 1.0, P3)) == 3  # never more than decoded


def test_timestamps_average_each_temporal_patch():
    times = qwen3_vl.VARIANT.video_frame_times(np.array([0, 18, 37, 56, 74]), 30.0, P3)
    assert times == [(0 + 18 / 30) / 2, (37 / 30 + 56 / 30) / 2, 74 / 30]


def test_qwen2_sampling_is_a_multiple_of_tp():
    indices = qwen2_vl.VARIANT.sample_indices(75, 25.0, qwen2_vl.FAMILY.settings())
    assert len(indices) % 2 == 0
    assert indices.tolist() == [0, 12, 25, 37, 50, 62]


def test_smart_resize_budget_and_rounding():
    assert smart_resize_video(
        60, 720, 1280, factor=32, temporal_factor=2, min_pixels=4096, max_pixels=25165824
    ) == (480, 832)
    h, w = smart_resize_image(61, 97, factor=32, min_pixels=65536, max_pixels=16777216)
    assert (h % 32, w % 32) == (0, 0) and h * w >= 65536


def test_smart_resize_refuses_extreme_aspect_and_short_video():
    with pytest.raises(InputError, match="aspect ratio"):
        smart_resize_image(10, 2100, factor=28, min_pixels=3136, max_pixels=12845056)
    with pytest.raises(InputError, match="at least 2 frames"):
        smart_resize_video(1, 64, 64, factor=32, temporal_factor=2, min_pixels=1, max_pixels=10**9)


def test_patchify_layout_is_t_hb_wb_m_m_by_c_tp_p_p():
    frames = np.zeros((2, 64, 64, 3), dtype=np.uint8)
    # mark one pixel: frame 1, row 17 (block 0, merge row 1, patch row 1), col 40, channel 2
    frames[1, 17, 40, 2] = 200
    out = np.empty((16, 1536), dtype=np.uint8)
    patchify_into(out, frames, P3, PixelFormat.UINT8)
    row, col = np.argwhere(out == 200)[0]
    # h: 17 -> patch 1 -> (hb 0, hm 1); w: 40 -> patch 2 -> (wb 1, wm 0)
    hb, wb, hm, wm = 0, 1, 1, 0
    assert row == ((hb * 2 + wb) * 2 + hm) * 2 + wm
    c, tp, prow, pcol = 2, 1, 1, 8
    assert col == ((c * 2 + tp) * 16 + prow) * 16 + pcol


def test_normalized_values_and_bfloat16_round_trip():
    frames = np.full((2, 32, 32, 3), 255, dtype=np.uint8)
    out = np.empty((4, 1536), dtype=np.float32)
    patchify_into(out, frames, P3, PixelFormat.FLOAT32)
    assert np.all(out == 1.0)
    bits = np.empty((4, 1536), dtype=np.uint16)
    patchify_into(bits, frames, P3, PixelFormat.BFLOAT16)
    assert np.all(bfloat16_bits_to_float32(bits) == 1.0)


def test_bfloat16_rounds_to_nearest_even():
    values = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.0e38], dtype=np.float32)
    widened = bfloat16_bits_to_float32(float32_to_bfloat16_bits(values))
    assert widened.tolist()[:4] == [1.0, 1.0, 1.015625, -2.5]


@pytest.mark.parametrize("passes", ["compiled", "numpy"])
def test_resize_matches_torchvision_bit_for_bit(passes, monkeypatch):
    """Golden outputs from scripts/make_resize_fixtures.py (torchvision 0.29.1):
    growing, shrinking both axes, mixed — both the compiled and the numpy passes."""
    import sys
    from pathlib import Path

    from mmctl.preprocessing import resize

    if passes == "numpy":
        monkeypatch.setattr(resize, "_native", None)
    elif not resize.native():
        pytest.skip("mmctl was installed without a C compiler (CI requires the build)")
    root = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(root / "scripts"))
    from make_resize_fixtures import case_image

    with np.load(root / "tests" / "fixtures" / "hf" / "resize_exact.npz") as data:
        assert len(data["cases"]) >= 11
        for n, (seed, h, w, th, tw) in enumerate(data["cases"].tolist()):
            ours = resize.resize_rgb(case_image(seed, h, w), th, tw)
            assert np.array_equal(ours, data[f"out{n}"]), (h, w, th, tw)
