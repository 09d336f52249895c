"""Decoding details that the HF parity goldens cannot isolate."""

import av
import numpy as np

from mmctl.media import video


def test_the_kept_rgb_converter_matches_a_fresh_one_across_sizes(fixtures):
    # The per-thread converter is reused between clips; switching frame size
    # (and back) must give what a fresh conversion of each frame gives.
    clips = [fixtures / "media" / name for name in ("ties.mp4", "shrink.mp4", "portrait.mp4")]
    frames = []
    for path in clips + clips[:1]:
        with av.open(str(path)) as container:
            frames += [f for i, f in enumerate(container.decode(video=0)) if i < 3]
    for frame in frames:
        fresh = frame.to_ndarray(format="rgb24")
        kept = video._to_rgb(frame)
        assert kept.shape == fresh.shape == (frame.height, frame.width, 3)
        assert np.array_equal(kept, fresh)
