"""The decode floor both preprocessing benchmarks measure against (``preprocess.py``
and ``preprocess_native.py``): one definition, so the two scripts' floors agree."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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


@dataclass
class _Needed:
    """What the samples need of a stream, in decode order."""

    packets: list[Any]
    sampled: list[bool]  # per packet: a sampled frame's
    decoding: list[bool]  # per packet (one more, False): a sample depends on it
    runs: list[tuple[int, int]]  # the ranges of ``decoding``
    idr: list[int]  # where a decode may start afresh (IDR pictures after the first)


def _needed(container: Any, indices: Sequence[int]) -> _Needed | None:
    """The video packets, which are sampled (frame i: the i-th smallest pts) and which a
    sample depends on: from the IDR (or HEVC CRA) picture before a sample to the sample
    (:func:`mmctl.media.keyframes.decode_runs`; a GOP's frames after its last sample are
    no sample's); None where packets cannot number frames (VP9, AV1)."""
    from mmctl.media import keyframes

    stream = container.streams.video[0]
    packets = [p for p in container.demux(stream) if p.size]
    codec = stream.codec_context
    if codec.name not in ("h264", "hevc") or any(p.pts is None for p in packets):
        return None
    size = keyframes.nal_length_size(codec.name, codec.extradata)
    starts: list[keyframes.Start] = [(0, None)]
    for i, p in enumerate(packets):
        if i and p.is_keyframe:
            kind = keyframes.start_kind(memoryview(p), codec.name, size)
            if kind is not None:
                starts.append((i, None if kind == "idr" else p.pts))
    by_pts = sorted(p.pts for p in packets)
    wanted = {by_pts[i] for i in indices}
    sampled = [p.pts in wanted for p in packets]
    runs = keyframes.decode_runs(((i, p.pts) for i, p in enumerate(packets) if sampled[i]), starts)
    decoding = [False] * (len(packets) + 1)
    for first, last in runs:
        decoding[first : last + 1] = [True] * (last + 1 - first)
    idr = [i for i, shown in starts if i and shown is None]
    return _Needed(packets, sampled, decoding, runs, idr)


def _decode(codec: Any, needed: _Needed, first: int, last: int) -> int:
    """Decode ``first..last`` (decode order) in order, the packets no sample depends on
    left out, the unsampled non-reference pictures skipped (nothing depends on them);
    drain. Returns the frames out. A run starts at an IDR (or a CRA with its leading
    pictures' references in the run before), so no drain is needed between runs."""
    out, skipping = 0, ""
    for i in range(first, last + 1):
        if not needed.decoding[i]:
            continue
        skip = "DEFAULT" if needed.sampled[i] else "NONREF"
        if skip != skipping:
            codec.skip_frame = skipping = skip
        out += len(codec.decode(needed.packets[i]))
    return out + len(codec.decode(None))


def floor_auto(clip: Path, indices: Sequence[int]) -> int:
    """The decoding floor, FFmpeg's way: every frame a sample depends on (:func:`_needed`)
    decoded once with FFmpeg's automatic (frame + slice) threads on all cores."""
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
        return _decode(stream.codec_context, needed, needed.runs[0][0], needed.runs[-1][1])


def floor_gops(clip: Path, indices: Sequence[int], threads: int | None = None) -> int | None:
    """The decoding floor, GOPs in parallel: the same frames as :func:`floor_auto`, cut at
    IDR pictures into one piece per core of about equal packets, each piece on its own
    thread and single-threaded decoder. None where the stream has no IDR to cut at."""
    import av

    from mmctl.media.video import split_at_idr

    threads = threads or os.cpu_count() or 1
    with av.open(str(clip)) as c:
        needed = _needed(c, indices)
        if needed is None:
            return None
        codec = c.streams.video[0].codec_context
        pieces = split_at_idr(needed.decoding, needed.runs, needed.idr, threads)
        if len(pieces) < 2:
            return None

        def run(piece: tuple[int, int]) -> int:
            decoder = av.CodecContext.create(codec.name, "r")
            decoder.extradata = codec.extradata
            decoder.thread_count = 1
            return _decode(decoder, needed, *piece)

        with ThreadPoolExecutor(len(pieces)) as pool:
            return sum(pool.map(run, pieces))
