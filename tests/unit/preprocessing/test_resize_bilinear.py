"""``resize_rgb(..., filter="bilinear")`` against torchvision's uint8 antialiased
bilinear, bit for bit (goldens from scripts/make_bilinear_fixtures.py,
torchvision 0.29.1), through the compiled passes and the numpy ones."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from mmctl.preprocessing import resize

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "fixtures" / "resize" / "bilinear_exact.npz"


@pytest.fixture
def case_image():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from make_resize_fixtures import case_image
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return case_image


@pytest.mark.parametrize("passes", ["compiled", "numpy"])
def test_bilinear_matches_torchvision_bit_for_bit(passes, monkeypatch, case_image):
    if passes == "numpy":
        monkeypatch.setattr(resize, "_native", None)
    elif not resize.native():
        pytest.skip("mmctl was installed without a C compiler (CI requires the build)")
    with np.load(GOLDEN) as data:
        cases = data["cases"].tolist()
        assert len(cases) >= 18
        for n, (seed, h, w, th, tw) in enumerate(cases):
            ours = resize.resize_rgb(case_image(seed, h, w), th, tw, filter="bilinear")
            assert ours.dtype == np.uint8 and ours.shape == (th, tw, 3)
            assert np.array_equal(ours, data[f"out{n}"]), (h, w, th, tw)


def test_compiled_and_numpy_bilinear_agree(monkeypatch, case_image):
    if not resize.native():
        pytest.skip("mmctl was installed without a C compiler")
    image = case_image(99, 123, 457)
    compiled = resize.resize_rgb(image, 301, 95, filter="bilinear")
    monkeypatch.setattr(resize, "_native", None)
    assert np.array_equal(compiled, resize.resize_rgb(image, 301, 95, filter="bilinear"))


def test_default_stays_bicubic(case_image):
    image = case_image(5, 40, 60)
    assert np.array_equal(
        resize.resize_rgb(image, 70, 30), resize.resize_rgb(image, 70, 30, filter="bicubic")
    )
    assert not np.array_equal(
        resize.resize_rgb(image, 70, 30), resize.resize_rgb(image, 70, 30, filter="bilinear")
    )


def test_bilinear_weights_are_two_taps_when_enlarging():
    _, count, q, bits = resize._int16_weights(10, 40, "bilinear")
    assert count.max() == 2
    assert (q.sum(axis=1) == 1 << bits).all()


def test_unknown_filter_is_refused():
    with pytest.raises(ValueError, match="lanczos"):
        resize.resize_rgb(np.zeros((4, 4, 3), np.uint8), 2, 2, filter="lanczos")  # type: ignore[arg-type]
