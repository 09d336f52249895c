"""Images load as vLLM 0.33 loads them (``convert_image_mode``: Pillow's
``convert("RGB")`` for every mode without transparency).

``fixtures/images/gray16.png`` is a committed 16-bit grayscale PNG (Pillow
mode ``I;16``, 40x30: a ramp over the 16-bit range, its first row 0, 1, 100,
255, 256, 257, 1000, 65535), written once by Pillow from a numpy array.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from mmctl.media.image import load_image


def test_a_16_bit_gray_png_is_what_pillows_convert_makes_of_it(fixtures):
    path = fixtures / "images" / "gray16.png"
    with Image.open(path) as opened:
        assert opened.mode == "I;16"
        raw = np.asarray(opened)
        expected = np.asarray(opened.convert("RGB"))  # vLLM 0.33's own step
    info, pixels = load_image(path)
    assert info.mode == "I;16" and pixels.dtype == np.uint8 and pixels.shape == (30, 40, 3)
    assert np.array_equal(pixels, expected)
    # The case the old loader got wrong: values above 255 were scaled by 1/256.
    wide = raw > 255
    assert wide.any() and not np.array_equal(pixels[wide][:, 0], (raw[wide] >> 8).astype(np.uint8))
