"""Decode the sampled frames of a video with PyAV.

Frame-count rule (container metadata lies: MKV/WebM/TS often carry no count,
some MP4s a wrong one, and a frame rate can be variable):

1. Predict the count: the stream header's frame count, or — when the header
   has none — a demux-only pass counting the stream's packets (cheap: no
   decoding).
2. Sample indices from the prediction, decode the *whole* stream, converting
   only the sampled frames to RGB.
3. If the decoder produced a different number of frames than predicted, the
   prediction was wrong: sample again from the true count and decode a
   second time. ``VideoInfo.frame_count_source`` says which path ran.

Fast path for H.264/HEVC, where one packet is one frame: the packets'
presentation times number the frames (frame i is the packet with the i-th
smallest pts); the sampled indices come from that count. The decode then
does only what the sampled frames need:

* it asks FFmpeg to skip decoding the non-reference frames nobody sampled
  (``skip_frame`` per packet) — reference frames are always decoded, so
  every sampled frame is bit-identical to a full decode (about 30% less
  decode time on the benchmark's x264 clip);
* it starts at the IDR (or HEVC CRA) picture before each group of samples
  and stops at the last sampled packet, draining the decoder at the end of
  each run (:mod:`mmctl.media.keyframes`): GOPs that hold no sampled frame
  are not decoded at all — sparse samples of a long video decode a fraction
  of it.

The file is opened and demuxed once: the packets (compressed, about the
file's size) are kept and decoded from memory — files over
:data:`KEEP_PACKETS_BYTES` are demuxed twice instead. Any doubt (missing or
repeated pts, a header count that disagrees, a sampled frame that does not
come out, a decoder error) falls back to the full path above.

**Independent GOPs in parallel.** A long stream whose decode spans IDR
pictures is cut at IDRs into as many pieces of about equal work as the
caller has threads for (:func:`split_at_idr`); each piece is decoded by its
own single-threaded decoder on its own thread (PyAV releases the GIL while
FFmpeg decodes), so both cores of a small machine decode, without frame
threads' per-row waits on a chain of P pictures. An IDR empties the
reference buffer, so every piece's frames are bit-identical to a decode from
the start. Only for a caller that can take frames from several threads
(``shared_sink``); pieces under :data:`PARALLEL_MIN_PACKETS` are not worth a
thread.

**Why pieces, not FFmpeg's frame threads, wherever the span cuts**
(:func:`decode_strategy`). Measured on ``bench/clips.py``'s ten encodings
with ``bench/preprocess_native.py --ab`` (the whole of ``mmctl.preprocess``,
each strategy forced, paired rounds beside vLLM's path; 2 cores, load 2.3–7.4,
``7073acd``; paired medians of 3 rounds, pieces over frame threads):
0.67× on ``phone-rotated`` (GOP 30), 0.73× on ``1080p60``, 0.91× on
``stream-gop15`` (GOP 15), 0.82× on ``long-gop`` even with unequal pieces
(596 and 297 packets), 0.70× on the 10-minute 360p clip (frame threads gain
little on small frames), 0.97× on ``x264-default``; slower on the P-only
clips, 1.24× on ``p-only-720p`` and 1.09× on ``grain-1080p`` (both within
that loaded run's spread: a quieter A/B of ``p-only-720p``, load 2–3, gave
1.72 s either way). Frame threads inside each piece gained nothing there
(1.02–1.06× pieces alone on three clips). So a span that cuts into
pieces of at least :data:`PARALLEL_MIN_PACKETS` is decoded in pieces, and
one that does not (no IDR to cut at, as x265's open GOPs; too little work)
by one decoder with frame threads.

Source fps is the stream's average rate, else its guessed rate, else the
count over the duration. Display rotation (the display matrix) is applied.
Frame decoding is threaded (FFmpeg frame/slice threads) when frames are
large enough for threads to pay (:data:`THREADED_PIXELS`).
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mmctl.errors import InputError
from mmctl.media import keyframes

if TYPE_CHECKING:
    import av.container


@dataclass(frozen=True)
class VideoInfo:
    """Facts about the source, as decoded (not as the header claims)."""

    path: str
    container: str
    codec: str
    width: int  # after rotation
    height: int  # after rotation
    rotation: int  # degrees, counter-clockwise, as the display matrix says
    source_fps: float
    fps_source: str  # "average_rate" | "guessed_rate" | "duration"
    duration_s: float
    header_frames: int  # 0 when the container states none
    total_frames: int  # what the decoder actually produced
    frame_count_source: str  # "header" | "packets" | "decoded (header was N)" …
    #: What a person should know about this source (a truncated file, …).
    warnings: tuple[str, ...] = ()


#: Receives (position in the sampled list, RGB uint8 [H, W, 3] frame).
FrameSink = Callable[[int, np.ndarray], None]
#: Maps (total_frames, source_fps) to the sorted frame indices to keep.
Sampler = Callable[[int, float], np.ndarray]


def _open(path: Path) -> av.container.InputContainer:
    import av

    try:
        container = av.open(str(path))
    except av.error.FFmpegError as err:
        if _mp4_without_index(path):
            raise InputError(
                f"cannot decode {path}: truncated or incomplete MP4 (no moov atom)",
                hint="the file was cut off or is still being written (an MP4 keeps its index, "
                "the moov atom, at the end unless written with faststart)",
            ) from None
        raise InputError(
            f"cannot decode {path}: not a video or image file ({_reason(err)})"
        ) from None
    if not container.streams.video:
        kinds = sorted({s.type for s in container.streams}) or ["no streams"]
        container.close()
        raise InputError(f"{path} has no video stream (it has: {', '.join(kinds)})")
    return container


def check_video(path: Path) -> None:
    """Open the container only: a typed error when it holds no decodable video stream."""
    _open(path).close()


def _mp4_without_index(path: Path) -> bool:
    """An ISO-BMFF file (``ftyp`` first) whose top-level boxes hold no ``moov``."""
    types = []
    with path.open("rb") as f:
        size_left = path.stat().st_size
        while size_left >= 8:
            head = f.read(8)
            size, kind = int.from_bytes(head[:4], "big"), head[4:8]
            header = 8
            if size == 1:  # a 64-bit size follows
                size, header = int.from_bytes(f.read(8), "big"), 16
            elif size == 0:  # the box runs to the end of the file
                size = size_left
            types.append(kind)
            if size < header or size > size_left:
                break  # the last box is cut off
            f.seek(size - header, 1)
            size_left -= size
    return bool(types) and types[0] == b"ftyp" and b"moov" not in types


def _reason(err: Exception) -> str:
    return getattr(err, "strerror", None) or str(err).split(":")[0] or type(err).__name__


def _fps(stream: Any, frames: int) -> tuple[float, str]:
    for attr in ("average_rate", "guessed_rate"):
        rate = getattr(stream, attr)
        if rate and float(rate) > 0:
            return float(rate), attr
    if stream.duration and stream.time_base and frames:
        seconds = float(stream.duration * stream.time_base)
        if seconds > 0:
            return frames / seconds, "duration"
    raise InputError("cannot tell the video's frame rate: no rate and no duration in the container")


def _count_packets(path: Path) -> int:
    container = _open(path)
    try:
        stream = container.streams.video[0]
        return sum(1 for p in container.demux(stream) if p.size)
    except Exception as err:
        raise InputError(f"cannot read {path}: the file is damaged ({_reason(err)})") from None
    finally:
        container.close()


#: FFmpeg's RGB converter, one per thread, kept between frames and clips (a
#: cache). ``frame.to_ndarray(format=...)`` builds a new one per frame — a
#: scaler context and its thread pool, which costs more than converting a
#: small frame (8 frames of 128x96: 1.7 ms fresh, 0.35 ms reused). The
#: output is the same: the scaler re-configures itself when a frame's size,
#: format or colour tags differ from the previous one's.
_converters = threading.local()


def _to_rgb(frame: Any) -> np.ndarray:
    convert = getattr(_converters, "rgb", None)
    if convert is None:
        convert = _converters.rgb = _rgb_converter()
    return convert(frame, format="rgb24").to_ndarray()


def _rgb_converter() -> Callable[..., Any]:
    import av
    from av.video.reformatter import VideoReformatter

    reformat = VideoReformatter().reformat
    # One scaler thread. PyAV 17+ asks FFmpeg for an automatic count, and a
    # kept scaler's thread pool is inherited by a forked child without its
    # threads: the child's first conversion would wait for them forever.
    # Older PyAV has no such option and no pool. The pool gains little here
    # (1280x720: 0.30 vs 0.38 ms a frame; 128x96: 0.023 vs 0.012 ms).
    if int(av.__version__.split(".")[0]) >= 17:
        return functools.partial(reformat, threads=1)
    return reformat


def _rotate(frame: np.ndarray, rotation: int) -> np.ndarray:
    # The display matrix angle is counter-clockwise; np.rot90 turns the same way.
    quarter = (round(rotation / 90)) % 4
    return np.ascontiguousarray(np.rot90(frame, quarter)) if quarter else frame


@dataclass(frozen=True)
class _Pass:
    fps: float
    fps_source: str
    indices: np.ndarray
    decoded: int
    rotation: int
    size: tuple[int, int]  # (height, width) after rotation


def decode_sampled(
    path: Path,
    sampler: Sampler,
    sink: FrameSink,
    *,
    threads: int = 1,
    shared_sink: FrameSink | None = None,
) -> tuple[VideoInfo, np.ndarray]:
    """Decode ``path``, hand each sampled frame to ``sink`` in order.

    Returns the source facts and the sampled indices. The sink may be called
    again from position 0 when the frame-count prediction was wrong (see the
    module docstring); it must overwrite, not append.

    ``shared_sink`` with ``threads`` > 1: a sink that several threads may call
    at once, in any order of positions but position 0 first; a stream whose
    decode splits into independent pieces is then decoded on up to
    ``threads`` threads into it (module docstring), else ``sink`` gets the
    frames as above.
    """
    parallel = (shared_sink, threads) if shared_sink is not None and threads > 1 else None
    container = _open(path)
    try:
        stream = container.streams.video[0]
        header = int(stream.frames or 0)
        codec = stream.codec_context.name
        fmt = container.format.name
        fast = (
            _skipping_pass(container, path, sampler, sink, header, parallel)
            if codec in SKIPPABLE
            else None
        )
    finally:
        container.close()
    if fast is not None:
        done, total = fast
        return _info(
            path,
            fmt,
            codec,
            header,
            done,
            total,
            "packets (pts; only what the samples need is decoded)",
        ), done.indices
    predicted, source = (header, "header") if header > 0 else (_count_packets(path), "packets")
    if predicted == 0:
        raise InputError(f"{path} has a video stream with no frames")

    done = _decode_pass(path, sampler, sink, predicted)
    warnings: tuple[str, ...] = ()
    if done.decoded != predicted:
        if done.decoded == 0:
            raise InputError(f"{path} has no decodable video frames")
        first = done.decoded
        done = _decode_pass(path, sampler, sink, first)
        said = "the header announces" if source == "header" else "the container holds"
        source = f"decoded ({source} said {predicted})"
        if done.decoded != first:
            raise InputError(
                f"{path} decodes to {first} frames, then {done.decoded}: unstable stream"
            )
        if first < predicted:
            warnings = (
                f"{path}: only {first} of the {predicted} frames {said} decode "
                f"(truncated or damaged file); sampled from those {first}",
            )
    info = _info(path, fmt, codec, header, done, done.decoded, source)
    return replace(info, warnings=warnings), done.indices


def _info(
    path: Path, fmt: str, codec: str, header: int, done: _Pass, total: int, source: str
) -> VideoInfo:
    return VideoInfo(
        path=str(path),
        container=fmt,
        codec=codec,
        width=done.size[1],
        height=done.size[0],
        rotation=done.rotation,
        source_fps=done.fps,
        fps_source=done.fps_source,
        duration_s=total / done.fps,
        header_frames=header,
        total_frames=total,
        frame_count_source=source,
    )


#: Codecs whose packets are exactly one frame each (no hidden/super frames).
SKIPPABLE = frozenset({"h264", "hevc"})


#: Up to this file size the fast path keeps the demuxed packets in memory
#: and decodes them from there (one open, one demux).
KEEP_PACKETS_BYTES = 256 * 1024 * 1024
#: Frames of at least this many pixels are decoded with FFmpeg's frame
#: threads; below it thread start-up and hand-offs cost more than they save.
THREADED_PIXELS = 320 * 240
#: A piece of a parallel decode holds at least this many packets to decode
#: (fewer: one decoder does it all — a thread and a decoder cost more).
PARALLEL_MIN_PACKETS = 90


def _threads(stream: Any) -> None:
    ctx = stream.codec_context
    if (ctx.width or 0) * (ctx.height or 0) >= THREADED_PIXELS:
        stream.thread_type = "AUTO"


def _numbered(pts: list[Any]) -> list[int] | None:
    """The packets' pts in presentation order; None when they cannot number frames."""
    if not pts or any(p is None for p in pts) or len(set(pts)) != len(pts):
        return None
    return sorted(pts)


def _skipping_pass(
    container: av.container.InputContainer,
    path: Path,
    sampler: Sampler,
    sink: FrameSink,
    header: int,
    parallel: tuple[FrameSink, int] | None = None,
) -> tuple[_Pass, int] | None:
    """The fast path (module docstring) on the open ``container``; None means
    "use the full path"."""
    import av

    try:
        stream = container.streams.video[0]
        codec = stream.codec_context
        kept = path.stat().st_size <= KEEP_PACKETS_BYTES
        length_size = keyframes.nal_length_size(codec.name, codec.extradata)
        packets: list[Any] = []
        order: list[Any] = []  # the packets' pts, in decode order
        starts: list[keyframes.Start] = [(0, None)]  # where decoding may start
        for packet in container.demux(stream):
            if not packet.size:
                continue
            if packet.is_keyframe and order:
                kind = _start_kind(packet, codec.name, length_size)
                if kind is not None:
                    starts.append((len(order), None if kind == "idr" else packet.pts))
            order.append(packet.pts)
            if kept:
                packets.append(packet)
        pts = _numbered(order)
        if pts is None or (header and header != len(pts)):
            return None
        if not kept:  # decode from a second demux rather than hold the file in memory
            container.seek(0)
        fps, fps_source = _fps(stream, len(pts))
        indices = sampler(len(pts), fps)
        wanted: dict[int, list[int]] = {}
        for pos, idx in enumerate(indices.tolist()):
            wanted.setdefault(pts[int(idx)], []).append(pos)
        position_of = {p: i for i, p in enumerate(order)}
        runs = keyframes.decode_runs(((position_of[p], p) for p in wanted), starts)
        if not runs:
            return None
        decoding = [False] * (len(order) + 1)  # per packet: inside a run
        for first, last in runs:
            decoding[first : last + 1] = [True] * (last + 1 - first)
        pieces: list[tuple[int, int]] = []
        if parallel is not None and kept:
            idr = [position for position, shown in starts if shown is None]
            pieces = split_at_idr(decoding, runs, idr, parallel[1])
            if decode_strategy(pieces, codec.width, codec.height) != "pieces":
                pieces = []
        if len(pieces) > 1:
            assert parallel is not None
            done = _decode_pieces(codec, packets, decoding, pieces, wanted, parallel[0])
        else:
            _threads(stream)
            source = packets if kept else (p for p in container.demux(stream) if p.size)
            done = _Emitter(wanted, sink)
            _decode_range(codec, source, decoding, 0, runs[-1][1], wanted, done.emit)
        seen = sorted(p for piece in done.seen for p in piece)
        if seen != sorted(wanted) or done.emitted != len(indices):
            return None  # a sampled frame did not come out: decode everything instead
    except (av.error.FFmpegError, EOFError, ValueError):
        return None
    return _Pass(fps, fps_source, indices, len(pts), done.rotation, done.size), len(pts)


def _decode_range(
    codec: Any,
    packets: Any,
    decoding: list[bool],
    first: int,
    last: int,
    wanted: dict[int, list[int]],
    emit: Callable[[list[Any]], None],
) -> None:
    """Decode the packets at ``first..last`` (decode order) that lie inside a
    run, skipping the non-reference frames nobody sampled; the decoder is
    drained at the end of each run and of the range. ``packets``: all of them
    (a list) or an iterator from the stream's start."""
    skipping = None
    ranged = isinstance(packets, list)
    source = packets[first : last + 1] if ranged else packets
    for position, packet in enumerate(source, start=first if ranged else 0):
        if position < first:
            continue
        if decoding[position]:
            skip = "DEFAULT" if packet.pts in wanted else "NONREF"
            if skip != skipping:
                codec.skip_frame = skipping = skip
            if frames := codec.decode(packet):
                emit(frames)
        if not decoding[position + 1] or position == last:  # a run ends: drain, restart clean
            if decoding[position]:
                emit(codec.decode(None))
                codec.flush_buffers()
            if position >= last:
                break


class _Emitter:
    """Hands a decoder's sampled frames to the sink, in RGB, rotated; counts them."""

    def __init__(
        self,
        wanted: dict[int, list[int]],
        sink: FrameSink,
        rotation: Callable[[Any], int] | None = None,
    ) -> None:
        self.wanted, self.sink = wanted, sink
        self.rotation_of = rotation or (lambda frame: int(frame.rotation or 0))
        self.emitted, self.rotation, self.size = 0, 0, (0, 0)
        self.mine: list[int] = []
        #: The pts emitted, per piece (one piece: this emitter's).
        self.seen: list[list[int]] = [self.mine]

    def emit(self, frames: list[Any]) -> None:
        for frame in frames:
            positions = self.wanted.get(frame.pts)
            if positions is None or (self.mine and frame.pts <= self.mine[-1]):
                continue
            self.mine.append(frame.pts)
            self.rotation = self.rotation_of(frame)
            rgb = _rotate(_to_rgb(frame), self.rotation)
            self.size = rgb.shape[:2]
            for pos in positions:
                self.sink(pos, rgb)
            self.emitted += len(positions)


def split_at_idr(
    decoding: Sequence[bool], runs: list[tuple[int, int]], idr: Sequence[int], threads: int
) -> list[tuple[int, int]]:
    """Up to ``threads`` pieces ``(first, last)`` of the decode, cut only at IDR
    positions, of about equal work (packets inside runs), none under
    :data:`PARALLEL_MIN_PACKETS`; one piece (the whole span) when cutting
    does not pay."""
    span = (runs[0][0], runs[-1][1])
    before = [0]  # packets to decode before each position
    for flag in decoding[: span[1] + 1]:
        before.append(before[-1] + flag)
    total = before[span[1] + 1] - before[span[0]]
    count = min(threads, total // PARALLEL_MIN_PACKETS)
    cuts: list[int] = []
    for k in range(1, count):
        target = before[span[0]] + total * k / count
        usable = [p for p in idr if span[0] < p <= span[1] and (not cuts or p > cuts[-1])]
        if not usable:
            break
        cuts.append(min(usable, key=lambda p: abs(before[p] - target)))
    edges = [span[0], *cuts, span[1] + 1]
    pieces = [(a, b - 1) for a, b in itertools.pairwise(edges)]
    if any(before[b + 1] - before[a] < PARALLEL_MIN_PACKETS for a, b in pieces):
        return [span]
    return pieces


def decode_strategy(pieces: Sequence[tuple[int, int]], width: int, height: int) -> str:
    """How to decode a span that :func:`split_at_idr` cut into ``pieces``: ``"pieces"``
    (one single-threaded decoder per piece, on threads) or ``"frames"`` (one decoder,
    FFmpeg's frame threads where :data:`THREADED_PIXELS` says so). Pieces whenever
    there are several (the module docstring's measurements); the benchmark forces
    either by replacing this function."""
    return "pieces" if len(pieces) > 1 else "frames"


def _decode_pieces(
    codec: Any,
    packets: list[Any],
    decoding: list[bool],
    pieces: list[tuple[int, int]],
    wanted: dict[int, list[int]],
    sink: FrameSink,
) -> _Emitter:
    """Each piece on its own thread and decoder: the first on the stream's own
    (its frames carry the stream's display rotation), the others on fresh ones
    that start after the first piece's first frame and take its rotation (a
    fresh decoder lacks the stream's side data) — so position 0 reaches the
    sink first."""
    import av

    codec.thread_count = 1  # the pieces are the threads
    first_out = threading.Event()
    lead = _Emitter(wanted, _first_then(sink, first_out))

    def run_first() -> None:
        try:
            _decode_range(codec, packets, decoding, *pieces[0], wanted, lead.emit)
        finally:
            first_out.set()

    def run_other(piece: tuple[int, int]) -> _Emitter:
        decoder = av.CodecContext.create(codec.name, "r")
        decoder.extradata = codec.extradata
        decoder.thread_count = 1
        first_out.wait()
        emitter = _Emitter(wanted, sink, rotation=lambda frame: lead.rotation)
        _decode_range(decoder, packets, decoding, *piece, wanted, emitter.emit)
        return emitter

    with ThreadPoolExecutor(len(pieces), thread_name_prefix="mmctl-gop") as pool:
        first = pool.submit(run_first)
        rest = [pool.submit(run_other, piece) for piece in pieces[1:]]
        others = [future.result() for future in rest]
        first.result()
    for other in others:
        lead.seen.append(other.mine)
        lead.emitted += other.emitted
    return lead


def _first_then(sink: FrameSink, event: threading.Event) -> FrameSink:
    def first(pos: int, rgb: np.ndarray) -> None:
        sink(pos, rgb)
        event.set()

    return first


def _start_kind(packet: Any, codec: str, length_size: int | None) -> str | None:
    try:
        return keyframes.start_kind(memoryview(packet), codec, length_size)
    except (TypeError, IndexError):
        return None


def _decode_pass(path: Path, sampler: Sampler, sink: FrameSink, total: int) -> _Pass:
    container = _open(path)
    try:
        stream = container.streams.video[0]
        _threads(stream)
        fps, fps_source = _fps(stream, total)
        indices = sampler(total, fps)
        wanted: dict[int, list[int]] = {}
        for pos, idx in enumerate(indices.tolist()):
            wanted.setdefault(int(idx), []).append(pos)
        decoded, rotation, size = 0, 0, (0, 0)
        import av

        try:
            for frame in container.decode(stream):
                positions = wanted.get(decoded)
                if positions is not None:
                    rotation = int(frame.rotation or 0)
                    rgb = _rotate(_to_rgb(frame), rotation)
                    size = rgb.shape[:2]
                    for pos in positions:
                        sink(pos, rgb)
                decoded += 1
        except (av.error.FFmpegError, EOFError) as err:
            if decoded == 0:
                raise InputError(f"cannot decode {path}: {_reason(err)}") from None
            # A damaged tail: keep what decoded, as players do; the count
            # check in decode_sampled re-samples from the frames we have.
        return _Pass(fps, fps_source, indices, decoded, rotation, size)
    finally:
        container.close()
