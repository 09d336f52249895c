"""Synthetic video items: the asked size, a valid grid, real pixels."""

from __future__ import annotations

import numpy as np
import pytest

from mmctl.bench.synthetic import grid_for_bytes, parse_size, synthetic_item
from mmctl.choices import PixelFormat
from mmctl.errors import UsageError


@pytest.mark.parametrize(
    ("text", "size"),
    [("512KB", 512_000), ("16MB", 16_000_000), ("1GiB", 2**30), ("1.5mb", 1_500_000), ("100", 100)],
)
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "MB", "16XB", "0MB", "-1MB"])
def test_bad_sizes(text):
    with pytest.raises(UsageError):
        parse_size(text)


@pytest.mark.parametrize("fmt", list(PixelFormat))
@pytest.mark.parametrize("nbytes", [64_000, 1_000_000, 100_000_000])
def test_grid_is_close_to_the_size_and_mergeable(builtin_model, fmt, nbytes):
    params = builtin_model.params
    t, h, w = grid_for_bytes(nbytes, params, fmt)
    m = params.merge_size
    assert h % m == 0 and w % m == 0 and t >= 1
    row = params.patch_dim * fmt.numpy_dtype.itemsize
    got = t * h * w * row
    # Within 10%, or half a merge block where a block is more than that.
    assert abs(got - nbytes) <= max(0.1 * nbytes, m * m * row / 2)


def test_item_is_red_then_blue(builtin_model):
    item = synthetic_item(200_000, builtin_model.spec, builtin_model.params, PixelFormat.UINT8)
    pre = item.pre
    t, h, w = pre.grid_thw
    assert pre.pixel_values.shape == (t * h * w, builtin_model.params.patch_dim)
    rows = pre.pixel_values.reshape(t, h * w, 3, -1)
    assert np.all(rows[0, :, 0] == 230) and np.all(rows[0, :, 2] == 25)  # red
    if t > 1:
        assert np.all(rows[1, :, 2] == 230)  # blue
    assert len(pre.patch_times) == t and item.content_hash


def test_a_size_over_one_items_budget_becomes_several_videos_within_it(builtin_model):
    from mmctl.bench.synthetic import synthetic_items

    spec, params = builtin_model.spec, builtin_model.params
    # 8 MB of uint8 pixels: 5,208 patch rows, 1,302 feature tokens; the budget is 500.
    videos = synthetic_items(8_000_000, spec, params, PixelFormat.UINT8, encoder_budget=500)
    assert len(videos) == 3
    assert all(v.pre.num_tokens <= 500 for v in videos)
    total = sum(v.pre.pixel_values.nbytes for v in videos)
    assert abs(total - 8_000_000) <= 0.1 * 8_000_000
    assert len(synthetic_items(8_000_000, spec, params, PixelFormat.UINT8)) == 1  # no budget


def test_a_size_no_request_can_carry_is_refused_naming_the_largest(builtin_model):
    from mmctl.bench.synthetic import synthetic_items
    from mmctl.errors import CheckFailed

    with pytest.raises(CheckFailed) as err:
        synthetic_items(8_000_000, builtin_model.spec, builtin_model.params, PixelFormat.UINT8,
                        encoder_budget=500, max_videos=2, label="8MB")  # fmt: skip
    # Two videos of 500 tokens: 2 × 2,000 rows × 1,536 bytes.
    assert "--sizes 8MB" in err.value.message and "6 MB" in err.value.message
    assert err.value.hint == "--sizes 6MB or less"
