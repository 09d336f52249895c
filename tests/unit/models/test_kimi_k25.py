"""Kimi-K2.5's pure functions against vLLM's own processor (torch-free).

tests/fixtures/families/goldens/kimi_k25/images.npz holds what vLLM's
``KimiK25FusedVisionProcessor`` made of the committed images
(scripts/make_family_fixtures.py --only kimi_k25, engine environment): per case the sha256 and
shape of the uint8 patches a device-normalizing worker takes and of the float32 ones,
``grid_thws`` and the token counts. Here mmctl loads the same files and runs
``mmctl.models.kimi_k25``; every byte must agree.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from mmctl.errors import InputError
from mmctl.media.image import load_image
from mmctl.models import kimi_k25

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GOLDENS = np.load(FIXTURES / "families" / "goldens" / "kimi_k25" / "images.npz")
CASES = [str(c) for c in GOLDENS["cases"]]
SETTINGS = kimi_k25.KimiK25Settings()


def _sha(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _pixels(case: str, *, normalize: bool) -> tuple[np.ndarray, list[list[int]], list[int]]:
    """mmctl's patches for a case's images, joined as vLLM flattens them."""
    parts, grids, tokens = [], [], []
    for name in GOLDENS[f"{case}__media"]:
        _, rgb = load_image(FIXTURES / "media" / str(name))
        pixels, grid = kimi_k25.image_pixels(rgb, SETTINGS, normalize=normalize)
        parts.append(pixels)
        grids.append(list(grid))
        tokens.append(len(kimi_k25.replacement_ids(rgb.shape[0], rgb.shape[1], SETTINGS)))
    return np.concatenate(parts), grids, tokens


def test_the_goldens_cover_every_image_case_and_two_images() -> None:
    assert len(CASES) == 10 and "two_images" in CASES


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("form", ["raw", "norm"])
def test_patches_grids_and_counts_equal_vllms(case: str, form: str) -> None:
    pixels, grids, tokens = _pixels(case, normalize=form == "norm")
    assert grids == GOLDENS[f"{case}__grid_thws"].tolist()
    assert tokens == GOLDENS[f"{case}__tokens"].tolist()
    assert list(pixels.shape) == GOLDENS[f"{case}__{form}_shape"].tolist()
    assert str(pixels.dtype) == str(GOLDENS[f"{case}__{form}_dtype"])
    assert _sha(pixels) == str(GOLDENS[f"{case}__{form}_sha256"])


def test_one_pixel_level_changes_the_digest() -> None:
    """The comparison can fail: one value one level off is another digest."""
    pixels, _, _ = _pixels("image-rgb_odd", normalize=False)
    pixels[0, 0, 0, 0] ^= 1
    assert _sha(pixels) != str(GOLDENS["image-rgb_odd__raw_sha256"])


def test_padding_is_black_before_normalization() -> None:
    rgb = np.full((15, 15, 3), 255, dtype=np.uint8)
    raw, grid = kimi_k25.image_pixels(rgb, SETTINGS, normalize=False)
    norm, _ = kimi_k25.image_pixels(rgb, SETTINGS)
    assert grid == (1, 2, 2)  # 15 px pads to 28: two patches each way
    # The last patch holds the image's last pixel at its corner, the rest is padding.
    assert raw[3, :, 0, 0].tolist() == [255, 255, 255]
    assert raw[3, :, 1:, :].max() == 0 and raw[3, :, :, 1:].max() == 0
    assert norm[3, :, 0, 0].tolist() == [1.0, 1.0, 1.0]
    assert norm[3, :, 1:, :].max() == -1.0  # (0/255 - 0.5) / 0.5


def test_the_budget_and_side_limits_shrink_without_upscaling() -> None:
    small = kimi_k25.resize_config(61, 97, SETTINGS)
    assert (small.new_height, small.new_width) == (61, 97)
    large = kimi_k25.resize_config(3000, 3000, SETTINGS)
    assert (large.new_height // 14) * (large.new_width // 14) <= SETTINGS.in_patch_limit
    thin = kimi_k25.resize_config(40, 9000, SETTINGS)
    assert thin.new_width <= 512 * 14


def test_an_image_without_pixels_is_refused() -> None:
    with pytest.raises(InputError, match="no pixels"):
        kimi_k25.resize_config(0, 10, SETTINGS)
