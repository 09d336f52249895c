"""Where decoding may start without changing a single decoded pixel.

A decoder that starts at an IDR picture (H.264 NAL type 5; HEVC types 19
and 20) produces exactly the frames a decode from the stream's start
produces from there on: an IDR empties the reference buffer, so nothing
after it in decode order refers to anything before it. A container's
"keyframe" flag is not enough — an open-GOP I picture (H.264 with a recovery
point, HEVC CRA/BLA) is flagged too, yet the pictures after it may still
reference pictures before it. So the flagged packets are opened and their
first slice's NAL type read.

:func:`decode_runs` turns the packets a sampler needs into the ranges to
decode: a new range starts at an IDR only when the packets between two
sampled frames hold one — sparse samples of a long video decode a piece of
each GOP instead of the whole stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: codec -> NAL unit types of the pictures decoding may start at.
IDR_TYPES = {"h264": frozenset({5}), "hevc": frozenset({19, 20})}


def nal_length_size(codec: str, extradata: bytes | None) -> int | None:
    """Bytes of the length prefix before each NAL unit (avcC/hvcC, as MP4 and
    MKV store them); None for Annex B start codes (MPEG-TS, raw streams)."""
    if not extradata or extradata[0] != 1:
        return None
    if codec == "h264" and len(extradata) > 4:
        return (extradata[4] & 3) + 1
    if codec == "hevc" and len(extradata) > 21:
        return (extradata[21] & 3) + 1
    return None


def _nal_types(data: memoryview, codec: str, length_size: int | None) -> Iterable[int]:
    def nal_type(first_byte: int) -> int:
        return first_byte & 0x1F if codec == "h264" else (first_byte >> 1) & 0x3F

    if length_size is not None:
        at = 0
        while at + length_size < len(data):
            size = int.from_bytes(data[at : at + length_size], "big")
            at += length_size
            if size <= 0 or at + size > len(data):
                return
            yield nal_type(data[at])
            at += size
        return
    raw = bytes(data[: min(len(data), 1 << 16)])  # headers and the first slice start early
    at = raw.find(b"\x00\x00\x01")
    while at >= 0 and at + 3 < len(raw):
        yield nal_type(raw[at + 3])
        at = raw.find(b"\x00\x00\x01", at + 3)


def _first_slice_type(data: memoryview, codec: str, length_size: int | None) -> int | None:
    # VCL (picture data) NAL types: 1..5 in H.264, 0..31 in HEVC; the rest are
    # parameter sets, SEI, access unit delimiters, … which come first.
    for kind in _nal_types(data, codec, length_size):
        if (1 <= kind <= 5) if codec == "h264" else (kind <= 31):
            return kind
    return None


def is_idr(data: memoryview, codec: str, length_size: int | None) -> bool:
    """The packet's picture is an IDR (its first slice says so)."""
    kind = _first_slice_type(data, codec, length_size)
    return kind is not None and kind in IDR_TYPES.get(codec, frozenset())


def decode_runs(needed: Iterable[int], starts: Sequence[int]) -> list[tuple[int, int]]:
    """The packet ranges ``(first, last)``, inclusive, in decode order, that
    decode every packet position in ``needed``.

    ``starts``: sorted positions decoding may start at (0 and the IDRs). A
    range reaches from the last start at or before its first needed packet to
    its last needed packet; the next needed packet opens a new range only when
    a start lies beyond the current range's end (otherwise decoding on costs
    nothing more than restarting there).
    """
    runs: list[tuple[int, int]] = []
    k = 0
    for position in sorted(set(needed)):
        while k + 1 < len(starts) and starts[k + 1] <= position:
            k += 1
        start = starts[k] if starts and starts[k] <= position else 0
        if runs and start <= runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], position)
        else:
            runs.append((start, position))
    return runs
