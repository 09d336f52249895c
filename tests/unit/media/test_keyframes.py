"""Where decoding may start (IDR pictures; HEVC CRA for what is shown after
it), found in the packets' bytes, and the decode of sparse samples from
there is the full decode's, exactly."""

import av
import numpy as np
import pytest

from mmctl.media import keyframes, video

CLOSED = ["gop_closed.mp4", "gop_closed.ts", "gop_closed_hevc.mp4"]
OPEN = ["gop_open.mp4", "gop_open_hevc.mp4"]


def _packets(path):
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        length = keyframes.nal_length_size(ctx.name, ctx.extradata)
        return [
            (p.is_keyframe, keyframes.start_kind(memoryview(p), ctx.name, length))
            for p in container.demux(stream)
            if p.size
        ]


@pytest.mark.parametrize("clip", CLOSED + OPEN)
def test_start_pictures_are_told_from_other_keyframes(fixtures, clip):
    packets = _packets(fixtures / "clips" / clip)
    flagged = [i for i, (key, _) in enumerate(packets) if key]
    kinds = [kind for key, kind in packets if key]
    assert len(packets) == 120
    assert len(flagged) == 8  # a keyframe every 15 frames, as encoded
    assert all(kind is None for key, kind in packets if not key)
    if clip in CLOSED:  # every flagged keyframe is an IDR
        assert kinds == ["idr"] * 8
    elif clip == "gop_open_hevc.mp4":  # CRA pictures after the first
        assert kinds == ["idr"] + ["cra"] * 7
    else:  # H.264 I pictures with a recovery point: no starts
        assert kinds == ["idr"] + [None] * 7


def test_length_prefix_size_comes_from_the_codec_record():
    assert keyframes.nal_length_size("h264", bytes([1, 100, 0, 31, 0xFF])) == 4
    assert keyframes.nal_length_size("h264", bytes([1, 100, 0, 31, 0xFD])) == 2
    assert keyframes.nal_length_size("h264", b"\x00\x00\x00\x01\x67") is None  # Annex B
    assert keyframes.nal_length_size("h264", None) is None
    assert keyframes.nal_length_size("hevc", bytes(21) + bytes([0xF3])) is None  # version 0
    assert keyframes.nal_length_size("hevc", bytes([1]) + bytes(20) + bytes([0xF3])) == 4


def test_a_damaged_packet_is_no_start():
    kind = keyframes.start_kind
    assert kind(memoryview(b"\x00\x00\x00\x09\x65"), "h264", 4) is None  # runs past its end
    assert kind(memoryview(b""), "h264", 4) is None
    assert kind(memoryview(b"\x00\x00\x01\x09\x10"), "h264", None) is None  # a delimiter only
    assert kind(memoryview(b"\x00\x00\x00\x01\x09\x00\x00\x01\x65\x88"), "h264", None) == "idr"
    assert kind(memoryview(b"\x00\x00\x00\x02\x2a\x01"), "hevc", 4) == "cra"  # type 21


def _idr(*positions):
    return [(p, None) for p in positions]


@pytest.mark.parametrize(
    ("needed", "starts", "runs"),
    [
        ([3, 40, 77], _idr(0, 15, 30, 45, 60, 75), [(0, 3), (30, 40), (75, 77)]),
        ([3, 14, 16], _idr(0, 15, 30), [(0, 16)]),  # the start at 15 is no further than 14 + 1
        ([20, 28], _idr(0, 15, 30), [(15, 28)]),
        ([5, 100], _idr(0), [(0, 100)]),  # no start after the first: one run
        ([9, 9, 2], _idr(0, 5), [(0, 2), (5, 9)]),
        ([], _idr(0, 5), []),
    ],
)
def test_decode_runs(needed, starts, runs):
    assert keyframes.decode_runs([(n, n) for n in needed], starts) == runs  # pts = position


def test_a_leading_picture_of_a_cra_starts_before_the_cra():
    # CRA at decode position 30 shown at pts 33: position 31 shown at 31 leads it.
    starts = [(0, None), (15, None), (30, 33), (45, None)]
    assert keyframes.decode_runs([(32, 34)], starts) == [(30, 32)]
    assert keyframes.decode_runs([(31, 31)], starts) == [(15, 31)]
    assert keyframes.decode_runs([(5, 5), (31, 31), (50, 50)], starts) == [
        (0, 5),
        (15, 31),
        (45, 50),
    ]
    # Out of decode order, a leading picture reaches back past a run's start: merged.
    assert keyframes.decode_runs([(16, 16), (31, 31)], [(0, None), (15, None), (30, 33)]) == [
        (15, 31)
    ]
    assert keyframes.decode_runs([(2, 2), (33, 34), (31, 20)], [(0, None), (30, 33)]) == [(0, 33)]


def _full_decode(path):
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


@pytest.mark.parametrize("clip", CLOSED + OPEN)
@pytest.mark.parametrize(
    "wanted",
    [[0, 3, 40, 77, 119], [50, 51, 52], [16, 17, 18, 44, 45, 46, 105], [27, 57, 74, 89, 104]],
)
@pytest.mark.parametrize(
    ("kept", "threads"),
    [(True, False), (False, False), (True, True)],
    ids=["packets-kept", "demuxed-twice", "frame-threads"],
)
def test_sparse_samples_decode_exactly_from_the_nearest_start(
    fixtures, monkeypatch, clip, wanted, kept, threads
):
    path = fixtures / "clips" / clip
    if not kept:  # as for a file over KEEP_PACKETS_BYTES
        monkeypatch.setattr(video, "KEEP_PACKETS_BYTES", 0)
    if threads:  # FFmpeg's frame threads, as for frames of 320x240 and more
        monkeypatch.setattr(video, "THREADED_PIXELS", 0)
    used: list[list[tuple[int, int]]] = []
    plan = keyframes.decode_runs
    monkeypatch.setattr(
        video.keyframes, "decode_runs", lambda *a: used.append(plan(*a)) or used[-1]
    )
    frames: dict[int, np.ndarray] = {}
    info, indices = video.decode_sampled(
        path, lambda total, fps: np.asarray(wanted), frames.__setitem__
    )
    full = _full_decode(path)
    assert info.frame_count_source.startswith("packets")  # the fast path, not the fallback
    assert indices.tolist() == wanted
    for pos, index in enumerate(wanted):
        assert np.array_equal(frames[pos], full[index]), f"frame {index} differs"
    runs = used[-1]
    if clip == "gop_open.mp4":  # no start after the first
        assert runs[0][0] == 0 and len(runs) == 1
    else:  # decoding starts at the IDR/CRA before each group of samples
        assert (runs[0][0] > 0) == (min(wanted) >= 15)
        assert sum(last - first + 1 for first, last in runs) < 120
