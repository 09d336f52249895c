"""Where decoding may start (IDR pictures; HEVC CRA for what is shown after
it), found in the packets' bytes, and the decode of sparse samples from
there is the full decode's, exactly."""

import threading

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


# ---- independent GOPs on several threads ----


@pytest.mark.parametrize("clip", CLOSED + OPEN)
@pytest.mark.parametrize("threads", [2, 3])
def test_pieces_cut_at_idr_decode_on_threads_exactly(fixtures, monkeypatch, clip, threads):
    path = fixtures / "clips" / clip
    monkeypatch.setattr(video, "PARALLEL_MIN_PACKETS", 10)  # these clips are 120 frames
    cut: list[list[tuple[int, int]]] = []
    split = video.split_at_idr
    monkeypatch.setattr(video, "split_at_idr", lambda *a: cut.append(split(*a)) or cut[-1])
    wanted = list(range(0, 120, 7))
    frames: dict[int, np.ndarray] = {}
    callers: set[str] = set()
    first: list[int] = []

    def shared(pos: int, rgb: np.ndarray) -> None:
        if not first:
            first.append(pos)
        callers.add(threading.current_thread().name)
        frames[pos] = rgb

    info, indices = video.decode_sampled(
        path, lambda total, fps: np.asarray(wanted), frames.__setitem__,
        threads=threads, shared_sink=shared,
    )  # fmt: skip
    full = _full_decode(path)
    assert info.frame_count_source.startswith("packets")  # the fast path, not the fallback
    assert indices.tolist() == wanted and len(frames) == len(wanted)
    for pos, index in enumerate(wanted):
        assert np.array_equal(frames[pos], full[index]), f"frame {index} differs"
    pieces = cut[-1]
    idr = [p for p, shown in _starts(path) if shown is None]
    if idr == [0]:  # no IDR after the first (open GOPs: CRA or recovery points): one decoder
        assert len(pieces) == 1 and not callers
    else:
        assert len(pieces) == threads and all(first in idr for first, _ in pieces[1:])
        # On the pool's threads (a quick piece may leave its thread to the next),
        # position 0 first.
        assert callers and all(name.startswith("mmctl-gop") for name in callers)
        assert first == [0]


def _starts(path):
    from mmctl.media import keyframes as kf

    out = [(0, None)]
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        size = kf.nal_length_size(s.codec_context.name, s.codec_context.extradata)
        n = 0
        for p in c.demux(s):
            if not p.size:
                continue
            if p.is_keyframe and n:
                kind = kf.start_kind(memoryview(p), s.codec_context.name, size)
                if kind:
                    out.append((n, None if kind == "idr" else p.pts))
            n += 1
    return out


def test_split_keeps_pieces_of_equal_work_and_never_small_ones(monkeypatch):
    monkeypatch.setattr(video, "PARALLEL_MIN_PACKETS", 10)
    decoding = [True] * 100 + [False]
    assert video.split_at_idr(decoding, [(0, 99)], [25, 50, 75], 2) == [(0, 49), (50, 99)]
    assert video.split_at_idr(decoding, [(0, 99)], [25, 50, 75], 4) == [
        (0, 24), (25, 49), (50, 74), (75, 99),
    ]  # fmt: skip
    assert video.split_at_idr(decoding, [(0, 99)], [95], 2) == [(0, 99)]  # a 5-packet piece
    assert video.split_at_idr(decoding, [(0, 99)], [], 2) == [(0, 99)]  # nowhere to cut
    monkeypatch.setattr(video, "PARALLEL_MIN_PACKETS", 90)
    assert video.split_at_idr(decoding, [(0, 99)], [50], 2) == [(0, 99)]  # too little work


def test_the_strategy_decides_pieces_or_one_decoder_with_the_same_frames(fixtures, monkeypatch):
    assert video.decode_strategy([(0, 99)], 1280, 720) == "frames"  # nothing to cut
    assert video.decode_strategy([(0, 49), (50, 99)], 1280, 720) == "pieces"
    path = fixtures / "clips" / "gop_closed.mp4"
    monkeypatch.setattr(video, "PARALLEL_MIN_PACKETS", 10)
    wanted = list(range(0, 120, 7))
    full = _full_decode(path)
    for strategy in ("pieces", "frames"):
        monkeypatch.setattr(video, "decode_strategy", lambda *a, s=strategy: s)
        frames: dict[int, np.ndarray] = {}
        shared_calls: list[int] = []

        def shared(pos: int, rgb: np.ndarray, frames=frames, calls=shared_calls) -> None:
            calls.append(pos)
            frames[pos] = rgb

        video.decode_sampled(
            path, lambda total, fps: np.asarray(wanted), frames.__setitem__,
            threads=2, shared_sink=shared,
        )  # fmt: skip
        assert bool(shared_calls) == (strategy == "pieces")  # one decoder: the plain sink
        assert all(np.array_equal(frames[p], full[i]) for p, i in enumerate(wanted)), strategy


def test_a_rotated_stream_in_pieces_keeps_its_rotation(tmp_path, monkeypatch):
    from mmctl.media import synth

    # Fresh decoders lack the stream's display matrix: the pieces take the first's.
    try:
        path = synth.pattern_clip(
            tmp_path / "turned.mp4", 90, 30.0, 48, 64, rotation=90,
            encoder_options={"x264-params": "keyint=15:min-keyint=15:scenecut=0"},
        )  # fmt: skip
    except AttributeError as err:  # the runtime floor's PyAV writes no display matrix
        pytest.skip(f"this PyAV cannot write a rotated clip ({err})")
    monkeypatch.setattr(video, "PARALLEL_MIN_PACKETS", 10)
    wanted = list(range(0, 90, 5))
    serial: dict[int, np.ndarray] = {}
    pieces: dict[int, np.ndarray] = {}
    info, _ = video.decode_sampled(path, lambda t, f: np.asarray(wanted), serial.__setitem__)
    video.decode_sampled(
        path, lambda t, f: np.asarray(wanted), pytest.fail, threads=2,
        shared_sink=pieces.__setitem__,
    )  # fmt: skip
    assert info.rotation in (90, -90, 270) and serial[0].shape[:2] == (64, 48)
    assert sorted(pieces) == sorted(serial)
    assert all(np.array_equal(pieces[p], serial[p]) for p in serial)
