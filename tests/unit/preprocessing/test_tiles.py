"""The shared LLaVA pixel steps on small hand-made arrays (expected values worked by hand
from the HF/torchvision rules each mirrors)."""

from __future__ import annotations

import numpy as np
import pytest

from mmctl.errors import InputError
from mmctl.preprocessing import tiles
from mmctl.preprocessing.tiles import Size

NEXT_PINPOINTS = ((336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008))


def _frame(h: int, w: int) -> np.ndarray:
    """[h, w, 3] uint8 whose pixel (y, x) holds (y, x, 7)."""
    yy, xx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    return np.stack([yy, xx, np.full_like(yy, 7)], axis=-1).astype(np.uint8)


@pytest.mark.parametrize(
    ("h", "w", "expected"),
    [
        (61, 97, (336, 534)),  # int(336 * 97 / 61) = int(534.29…)
        (97, 61, (534, 336)),
        (5, 5, (336, 336)),
        (1, 2000, (336, 672000)),
        (336, 337, (336, 337)),
        (3, 1000, (336, 112000)),
    ],
)
def test_shortest_edge_size(h: int, w: int, expected: tuple[int, int]) -> None:
    assert tiles.shortest_edge_size(h, w, 336) == expected
    assert Size(shortest_edge=336).target(h, w) == expected


def test_fixed_size_target_ignores_the_image() -> None:
    assert Size(height=384, width=384).target(7, 9000) == (384, 384)
    with pytest.raises(InputError):
        Size().target(3, 3)


def test_center_crop_odd_offsets() -> None:
    frame = _frame(5, 7)
    out = tiles.center_crop(frame, 3, 3)
    assert out.shape == (3, 3, 3)
    assert (out[0, 0, 0], out[0, 0, 1]) == (1, 2)  # top int(2/2)=1, left int(4/2)=2
    out = tiles.center_crop(_frame(6, 5), 3, 2)
    assert (out[0, 0, 0], out[0, 0, 1]) == (1, 1)  # int(3/2)=1 both ways


def test_center_crop_bigger_than_the_image_pads_with_zero() -> None:
    frame = _frame(2, 3) + 1  # no zero inside
    out = tiles.center_crop(frame, 5, 4)
    assert out.shape == (5, 4, 3)
    # height excess 3: 1 row on top, 2 below; width excess 1: 0 left, 1 right
    inside = np.zeros((5, 4), dtype=bool)
    inside[1:3, 0:3] = True
    assert (out[inside] != 0).all() and (out[~inside] == 0).all()
    assert np.array_equal(out[1:3, 0:3], frame)


def test_center_crop_bigger_one_way_only() -> None:
    frame = _frame(4, 2) + 1
    out = tiles.center_crop(frame, 2, 4)  # pad width 1+1 → 4x4, then rows from int(2/2)=1
    assert out.shape == (2, 4, 3)
    assert np.array_equal(out[:, 1:3], frame[1:3])
    assert (out[:, 0] == 0).all() and (out[:, 3] == 0).all()


def test_pad_to_square_centres_with_fill() -> None:
    out = tiles.pad_to_square(_frame(2, 5), (122, 116, 104))
    assert out.shape == (5, 5, 3)
    assert np.array_equal(out[1:3], _frame(2, 5))  # top (5-2)//2 = 1, bottom 2
    assert out[0, 0].tolist() == [122, 116, 104] and out[4, 4].tolist() == [122, 116, 104]
    square = _frame(3, 3)
    assert tiles.pad_to_square(square, (0, 0, 0)) is square


def test_rescale_normalize_fused_float_order() -> None:
    frame = np.array([[[0, 128, 255]]], dtype=np.uint8)
    mean, std = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
    out = tiles.rescale_normalize(
        frame, do_rescale=True, rescale_factor=1 / 255, do_normalize=True, mean=mean, std=std
    )
    assert out.shape == (3, 1, 1) and out.dtype == np.float32
    scale = np.float32(255.0)
    for c, x in enumerate((0, 128, 255)):
        m, s = np.float32(mean[c]) * scale, np.float32(std[c]) * scale
        assert out[c, 0, 0] == (np.float32(x) - m) / s


def test_rescale_normalize_half_is_exact() -> None:
    frame = np.array([[[0, 255, 51]]], dtype=np.uint8)
    out = tiles.rescale_normalize(
        frame,
        do_rescale=True,
        rescale_factor=1 / 255,
        do_normalize=True,
        mean=(0.5,) * 3,
        std=(0.5,) * 3,
    )
    assert out[:, 0, 0].tolist() == [-1.0, 1.0, np.float32(51 - 127.5) / np.float32(127.5)]


def test_rescale_normalize_unfused_paths_and_layout() -> None:
    frame = _frame(2, 3)
    only_rescale = tiles.rescale_normalize(
        frame, do_rescale=True, rescale_factor=0.5, do_normalize=False, mean=(0,) * 3, std=(1,) * 3
    )
    assert only_rescale.shape == (3, 2, 3)
    assert np.array_equal(only_rescale, np.moveaxis(frame, -1, 0) * np.float32(0.5))
    neither = tiles.rescale_normalize(
        frame[None],
        do_rescale=False,
        rescale_factor=1.0,
        do_normalize=False,
        mean=(0,) * 3,
        std=(1,) * 3,
    )
    assert neither.shape == (1, 3, 2, 3) and neither.flags.c_contiguous


def test_select_best_resolution() -> None:
    # every candidate keeps all of a 100x100 image: least waste, first in order
    assert tiles.select_best_resolution(100, 100, NEXT_PINPOINTS) == (336, 672)
    assert tiles.select_best_resolution(500, 1000, NEXT_PINPOINTS) == (336, 672)
    assert tiles.select_best_resolution(1000, 500, NEXT_PINPOINTS) == (672, 336)
    assert tiles.select_best_resolution(336, 1008, NEXT_PINPOINTS) == (336, 1008)
    assert tiles.select_best_resolution(2000, 2000, NEXT_PINPOINTS) == (672, 672)
    with pytest.raises(InputError):
        tiles.select_best_resolution(10, 10, ())


@pytest.mark.parametrize(
    ("h", "w", "target", "expected"),
    [
        (61, 97, (336, 672), (336, 535)),  # ceil(97 * 336/61) = ceil(534.29)
        (97, 61, (672, 336), (535, 336)),  # scale_w 5.51 < scale_h 6.93: ceil(97 * 336/61)
        # 100 * (672/300) is 224.00000000000003 in floats: HF ceils it to 225
        (100, 300, (336, 672), (225, 672)),
        (1, 1, (336, 336), (336, 336)),
    ],
)
def test_patch_output_size(
    h: int, w: int, target: tuple[int, int], expected: tuple[int, int]
) -> None:
    assert tiles.patch_output_size(h, w, target) == expected


def test_pad_for_patching_centres_odd_excess_right_and_bottom() -> None:
    frame = _frame(2, 3) + 1
    out = tiles.pad_for_patching(frame, (5, 3))
    assert out.shape == (5, 3, 3) and out.dtype == np.uint8
    assert np.array_equal(out[1:3], frame)  # excess 3 rows: 1 above, 2 below
    assert (out[0] == 0).all() and (out[3:] == 0).all()
    out = tiles.pad_for_patching(_frame(3, 2) + 1, (3, 5))
    assert np.array_equal(out[:, 1:3], _frame(3, 2) + 1)


def test_divide_to_patches_is_row_major() -> None:
    patches = tiles.divide_to_patches(_frame(4, 6), 2)
    corners = [(int(p[0, 0, 0]), int(p[0, 0, 1])) for p in patches]
    assert corners == [(0, 0), (0, 2), (0, 4), (2, 0), (2, 2), (2, 4)]


def test_anyres_tiles_base_first() -> None:
    frame = _frame(40, 20)
    out = tiles.anyres_tiles(frame, ((16, 8), (8, 16)), (4, 4), 8)
    # best (16, 8): resized into 16x8 exactly, two 8x8 tiles below a 4x4 base
    assert [p.shape for p in out] == [(4, 4, 3), (8, 8, 3), (8, 8, 3)]


def test_pad_patch_axis_zeros_after() -> None:
    a = np.ones((3, 3, 2, 2), dtype=np.float32)
    b = np.full((1, 3, 2, 2), -1.0, dtype=np.float32)
    out = tiles.pad_patch_axis([b, a])
    assert out.shape == (2, 3, 3, 2, 2)
    assert (out[0, 0] == -1).all() and (out[0, 1:] == 0).all() and (out[1] == 1).all()
    with pytest.raises(InputError):
        tiles.pad_patch_axis([])


def test_anyres_grid_and_unpadding() -> None:
    assert tiles.anyres_grid_shape(61, 97, NEXT_PINPOINTS, 336) == (1, 2)
    # a 97x61 image (height 61, width 97) in a 48x24 grid: aspect 1.59 < 2,
    # new_w = int(round(97*24/61, 7)) = 38, pad 5 a side
    assert tiles.unpadded_grid(61, 97, 24, 1, 2) == (24, 38)
    # wide: 1000x100 in 48x24: new_h = int(round(100*48/1000, 7)) = 4, pad 10 a side
    assert tiles.unpadded_grid(100, 1000, 24, 1, 2) == (4, 48)
    # exactly the grid's aspect: nothing removed
    assert tiles.unpadded_grid(336, 672, 24, 1, 2) == (24, 48)


def test_settings_parsers() -> None:
    assert tiles.parse_size(336) == Size(shortest_edge=336)
    assert tiles.parse_size({"height": 384, "width": 384}) == Size(height=384, width=384)
    with pytest.raises(InputError):
        tiles.parse_size({"longest_edge": 5})
    assert tiles.parse_crop(336) == (336, 336)
    assert tiles.parse_floats(0.5, "image_mean") == (0.5, 0.5, 0.5)
    with pytest.raises(InputError):
        tiles.check_bicubic(2)
    nested = {"image_processor": {"size": {"shortest_edge": 10}}}
    assert tiles.processor_settings({"size": 5, "do_pad": True}, nested) == {
        "size": {"shortest_edge": 10}
    }
    assert tiles.processor_settings({"size": 5}, {}) == {"size": 5}
    assert tiles.setting({"a": None}, "a", 3) == 3
