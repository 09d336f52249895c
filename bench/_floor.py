"""The decode floor both preprocessing benchmarks measure against (``preprocess.py``
and ``preprocess_native.py``): one definition, so the two scripts' floors agree."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


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


def _needed(container: Any, indices: Sequence[int]) -> tuple[list[Any], list[bool], int] | None:
    """The video packets, which are sampled (frame i: the i-th smallest pts), and the decode
    position of the last sampled one; None where packets cannot number frames (VP9, AV1)."""
    stream = container.streams.video[0]
    packets = [p for p in container.demux(stream) if p.size]
    if stream.codec_context.name not in ("h264", "hevc") or any(p.pts is None for p in packets):
        return None
    by_pts = sorted(p.pts for p in packets)
    wanted = {by_pts[i] for i in indices}
    sampled = [p.pts in wanted for p in packets]
    return packets, sampled, max(i for i, s in enumerate(sampled) if s)


def _decode(codec: Any, packets: Sequence[Any], sampled: Sequence[bool]) -> int:
    """Decode in order, skipping the unsampled non-reference pictures (nothing depends on
    them); drain. Returns the frames out."""
    out, skipping = 0, ""
    for packet, keep in zip(packets, sampled, strict=True):
        skip = "DEFAULT" if keep else "NONREF"
        if skip != skipping:
            codec.skip_frame = skipping = skip
        out += len(codec.decode(packet))
    return out + len(codec.decode(None))


def floor_auto(clip: Path, indices: Sequence[int]) -> int:
    """The decoding floor, FFmpeg's way: every frame a sample depends on, up to the last
    sampled one, decoded once with FFmpeg's automatic (frame + slice) threads on all cores."""
    import av

    with av.open(str(clip)) as c:
        stream = c.streams.video[0]
        stream.thread_type = "AUTO"
        needed = _needed(c, indices)
        if needed is None:  # one packet is not one frame: decode up to the last sample
            c.seek(0)
            last, out = max(indices), 0
            for out, _ in enumerate(c.decode(stream), start=1):
                if out > last:
                    break
            return out
        packets, sampled, last = needed
        return _decode(stream.codec_context, packets[: last + 1], sampled[: last + 1])


def floor_gops(clip: Path, indices: Sequence[int], threads: int | None = None) -> int | None:
    """The decoding floor, GOPs in parallel: the same frames as :func:`floor_auto`, cut at
    IDR pictures into one piece per core of about equal packets, each piece on its own
    thread and single-threaded decoder. None where the stream has no IDR to cut at."""
    import av

    from mmctl.media import keyframes
    from mmctl.media.video import split_at_idr

    threads = threads or os.cpu_count() or 1
    with av.open(str(clip)) as c:
        needed = _needed(c, indices)
        if needed is None:
            return None
        packets, sampled, last = needed
        codec = c.streams.video[0].codec_context
        size = keyframes.nal_length_size(codec.name, codec.extradata)
        idr = [
            i
            for i, p in enumerate(packets[: last + 1])
            if i
            and p.is_keyframe
            and keyframes.start_kind(memoryview(p), codec.name, size) == "idr"
        ]
        decoding = [True] * (last + 1) + [False]
        pieces = split_at_idr(decoding, [(0, last)], idr, threads)
        if len(pieces) < 2:
            return None

        def run(piece: tuple[int, int]) -> int:
            decoder = av.CodecContext.create(codec.name, "r")
            decoder.extradata = codec.extradata
            decoder.thread_count = 1
            first, end = piece
            return _decode(decoder, packets[first : end + 1], sampled[first : end + 1])

        with ThreadPoolExecutor(len(pieces)) as pool:
            return sum(pool.map(run, pieces))
