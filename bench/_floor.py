"""The decode floor both preprocessing benchmarks measure against (``preprocess.py``
and ``preprocess_native.py``): one definition, so the two scripts' floors agree."""

from __future__ import annotations

from pathlib import Path


def floor_frames(clip: Path) -> list:
    """The decode floor: PyAV decoding every frame, converting only the sampled ones."""
    import av

    from mmctl.models.qwen_vl import qwen3_vl

    with av.open(str(clip)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        wanted = set(
            qwen3_vl.VARIANT.sample_indices(
                s.frames, float(s.average_rate), qwen3_vl.FAMILY.settings()
            ).tolist()
        )
        return [f.to_ndarray(format="rgb24") for i, f in enumerate(c.decode(s)) if i in wanted]
