"""Where decoding may start without changing a single decoded pixel.

A decoder that starts at an IDR picture (H.264 NAL type 5; HEVC types 19
and 20) produces exactly the frames a decode from the stream's start
produces from there on: an IDR empties the reference buffer, so nothing
after it in decode order refers to anything before it. An HEVC CRA or BLA
picture (types 21, 16–18) is a start for the pictures shown at or after it:
the spec forbids those to reference anything before it, while its leading
"RASL" pictures (decoded after it, shown before it) may, and FFmpeg drops
them when decoding starts there — a sampled leading picture starts earlier.
A container's "keyframe" flag is not enough: an H.264 I picture with a
recovery point is flagged too, and is no start here. So the flagged packets
are opened and their first slice's NAL type read.

:func:`decode_runs` turns the packets a sampler needs into the ranges to
decode: a new range starts at a start picture only when the packets between
two sampled frames hold one — sparse samples of a long video decode a piece
of each GOP instead of the whole stream.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence

#: codec -> NAL unit types decoding may start at for every later picture.
IDR_TYPES = {"h264": frozenset({5}), "hevc": frozenset({19, 20})}
#: codec -> NAL unit types decoding may start at for the pictures shown at or
#: after them (HEVC BLA_W_LP, BLA_W_RADL, BLA_N_LP, CRA).
CRA_TYPES = {"hevc": frozenset({16, 17, 18, 21})}

#: ``(decode position, pts)``: decoding may start at that packet for the
#: pictures shown at or after ``pts``; ``None``: for every later picture.
Start = tuple[int, int | None]


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


def start_kind(data: memoryview, codec: str, length_size: int | None) -> str | None:
    """What the packet's first slice makes it: a start for every later picture
    ("idr"), for the pictures shown at or after it ("cra"), or no start (None)."""
    kind = _first_slice_type(data, codec, length_size)
    if kind is None:
        return None
    if kind in IDR_TYPES.get(codec, ()):
        return "idr"
    if kind in CRA_TYPES.get(codec, ()):
        return "cra"
    return None


def decode_runs(
    needed: Iterable[tuple[int, int]], starts: Sequence[Start]
) -> list[tuple[int, int]]:
    """The packet ranges ``(first, last)``, inclusive, in decode order, that
    decode every needed ``(decode position, pts)``.

    ``starts``: sorted by position, the first at position 0 (where a full
    decode starts). A needed packet's range reaches back to the last start at
    or before it that serves its pts; the next needed packet opens a new range
    only when its start lies beyond the current range's end (otherwise
    decoding on costs nothing more than restarting there).
    """
    positions = [position for position, _ in starts]
    runs: list[tuple[int, int]] = []
    for position, pts in sorted(set(needed)):
        k = bisect_right(positions, position) - 1
        while k > 0 and (shown_from := starts[k][1]) is not None and pts < shown_from:
            k -= 1  # a leading picture of a CRA: start earlier
        runs.append((starts[k][0], position))
        while len(runs) > 1 and runs[-1][0] <= runs[-2][1] + 1:
            last = runs.pop()
            runs[-1] = (min(runs[-1][0], last[0]), max(runs[-1][1], last[1]))
    return runs
