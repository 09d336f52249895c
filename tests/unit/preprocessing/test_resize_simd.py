"""The compiled passes' SIMD forms give the scalar loops' and numpy's pixels, bit for bit.

The SIMD passes (SSE2 vertical, SSSE3 horizontal, x86-64) sum the same int16
weights two taps at a time and clamp by saturating packs; every size pair
below — shrinking, enlarging, one-pixel sides, odd tap counts, images whose
last pixels sit at the buffer's end — must come out identical three ways.
"""

from __future__ import annotations

import numpy as np
import pytest

from mmctl.preprocessing import resize

native = pytest.importorskip("mmctl.preprocessing._resample")


@pytest.fixture
def simd_off():
    def off() -> None:
        native.simd(False)

    yield off
    native.simd(True)


def _sizes(rng: np.random.Generator, count: int) -> list[tuple[int, int, int, int]]:
    fixed = [(720, 1280, 576, 1056), (480, 854, 480, 864), (1, 1, 7, 9), (9, 7, 1, 1),
             (3, 1000, 3, 17), (1000, 3, 17, 3), (97, 131, 96, 130)]  # fmt: skip
    drawn = [tuple(int(v) for v in rng.integers(1, 260, 4)) for _ in range(count)]
    return fixed + drawn  # type: ignore[return-value]


@pytest.mark.parametrize("filter", ["bicubic", "bilinear"])
def test_simd_scalar_and_numpy_agree(simd_off, monkeypatch, filter):
    rng = np.random.default_rng(34)
    for h, w, oh, ow in _sizes(rng, 60):
        frame = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        assert native.simd(True)
        fast = resize.resize_rgb(frame, oh, ow, filter=filter)
        simd_off()
        scalar = resize.resize_rgb(frame, oh, ow, filter=filter)
        with monkeypatch.context() as m:
            m.setattr(resize, "_native", None)
            numpy = resize.resize_rgb(frame, oh, ow, filter=filter)
        case = f"{w}x{h} -> {ow}x{oh} {filter}"
        assert np.array_equal(fast, scalar), case
        assert np.array_equal(scalar, numpy), case


def test_extreme_pixels_clamp_alike(simd_off):
    # A black/white checkerboard enlarged: bicubic's negative lobes over- and
    # undershoot, and the clamp to 0..255 is the packs' saturation in the SIMD form.
    board = (np.indices((8, 8)).sum(axis=0) % 2 * 255).astype(np.uint8)
    frame = np.repeat(board[:, :, None], 3, axis=2)
    native.simd(True)
    fast = resize.resize_rgb(frame, 37, 101)
    simd_off()
    assert np.array_equal(fast, resize.resize_rgb(frame, 37, 101))
    assert fast.min() == 0 and fast.max() == 255
