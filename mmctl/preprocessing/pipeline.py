"""Media file → pixel tensor + grid + frame facts, for the Qwen-VL families;
and :class:`Preprocessed`, what every family's processor returns.

Video runs as a two-stage pipeline: the calling thread decodes (PyAV, with
FFmpeg's own threads) and hands each sampled RGB frame to one worker thread
that resizes it (torchvision's arithmetic, ``resize.py``) and, once a
temporal patch is complete, normalizes and patchifies it straight into its
rows of the output tensor. Both stages release the GIL for their heavy
parts, so on two cores decoding and preprocessing overlap. At most
``MAX_PENDING_FRAMES`` frames wait between the stages, which bounds memory
whatever the clip's length. Frames under ``THREADED_FRAME_PIXELS`` skip the
thread: the calling thread assembles them itself (a thread's start-up and
hand-offs cost more than a small frame's resize).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.media.image import ImageInfo, load_image
from mmctl.media.probe import MediaKind, check_readable, media_kind
from mmctl.media.video import VideoInfo, decode_sampled
from mmctl.models.base import VisionParams
from mmctl.models.family import ItemFacts

if TYPE_CHECKING:
    from mmctl.models.qwen import QwenFamily
from mmctl.preprocessing.pixels import grid_for, patchify_into
from mmctl.preprocessing.resize import resize_rgb

MAX_PENDING_FRAMES = 8
#: Source frames of at least this many pixels are resized on the helper thread.
THREADED_FRAME_PIXELS = 320 * 240


def decode_threads() -> int:
    """Threads a parallel decode may use: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: ``allocate(shape, dtype) -> ndarray``: where the pixel tensor is written
#: (default ``np.empty``; ``mmctl send`` passes a shared-memory mapping so the
#: patchified pixels land in the file the worker reads, with no extra copy).
Allocator = Callable[[tuple[int, ...], np.dtype], np.ndarray]
#: ``on_frame(done, total)``: a sampled frame was processed (progress bars).
FrameCallback = Callable[[int, int], None]


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.empty(shape, dtype=dtype)


@dataclass(frozen=True)
class Timings:
    decode_s: float  # wall time of the decode loop (includes waiting on the worker)
    preprocess_s: float  # busy time of resize + normalize + patchify
    total_s: float


@dataclass(frozen=True)
class Preprocessed:
    """What the model will receive for one media item (any family)."""

    kind: MediaKind
    family: str
    #: The family's vision settings that made it (``VisionParams`` for Qwen).
    params: Any
    pixel_format: PixelFormat
    #: This item's primary tensor as its HF processor returns it for one item
    #: (Qwen: ``[N, C*Tp*P*P]`` patch rows); bf16 as uint16 bit patterns.
    pixel_values: np.ndarray
    #: Qwen: the ``(t, h, w)`` patch grid; ``None`` for families without one.
    grid_thw: tuple[int, int, int] | None
    resized: tuple[int, int]  # (height, width)
    source: VideoInfo | ImageInfo
    frame_indices: np.ndarray  # int64; empty for images
    frame_times: tuple[float, ...]  # source time of each sampled frame, seconds
    patch_times: tuple[float, ...]  # one per temporal patch (the prompt's timestamps)
    num_tokens: int  # pad tokens in the prompt: t·h·w / M²
    timings: Timings
    frames: tuple[np.ndarray, ...] = field(default=(), repr=False)  # kept for previews
    #: Per-video tensors the family adds (``Family.video_tensors``: Qwen2.5-VL's
    #: ``second_per_grid_ts``), one row each.
    video_tensors: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: The model's resolved vision settings and their origins (``Model.vision_settings``),
    #: set by callers that loaded a model.
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: This item's row of each other tensor of its batch, by wire key (the
    #: family's field table: ``image_sizes``, ``aspect_ratios``, …).
    item_tensors: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: What the family's prompt expansion reads beyond the token count
    #: (:attr:`ItemFacts.extra`).
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: Its share of a flat pixel tensor where that is not the grid's ``t·h·w``
    #: (Llama 4's tiles).
    flat_rows: int | None = None

    @property
    def facts(self) -> ItemFacts:
        return ItemFacts(
            self.kind,
            self.num_tokens,
            self.grid_thw,
            self.patch_times,
            self.extra,
            rows=int(np.prod(self.grid_thw)) if self.grid_thw is not None else self.flat_rows,
        )

    @property
    def grid_thw_array(self) -> np.ndarray:
        return np.asarray([self.grid_thw], dtype=np.int64)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What a person should know about the source (a truncated video, …)."""
        return getattr(self.source, "warnings", ())

    @property
    def sampled_fps(self) -> float | None:
        """Frames sampled per source second (differs from the target fps when clamped)."""
        if not isinstance(self.source, VideoInfo):
            return None
        return len(self.frame_indices) / self.source.total_frames * self.source.source_fps


def preprocess(
    path: Path,
    spec: QwenFamily,
    params: VisionParams,
    pixel_format: PixelFormat = PixelFormat.FLOAT32,
    *,
    kind: MediaKind | None = None,
    keep_frames: bool = False,
    on_frame: FrameCallback | None = None,
    allocate: Allocator = empty,
    strict: bool = False,
) -> Preprocessed:
    """Preprocess an image or a video file. ``kind`` comes from a caller that
    has checked the file (:func:`mmctl.media.probe.check_media`); without it
    the file is checked and its kind found here.

    ``on_frame(done, total)`` is called after each sampled frame is processed
    (for progress bars). A video that decodes to fewer frames than its
    container announces is preprocessed from the frames that decode, with a
    warning in :attr:`Preprocessed.warnings`; ``strict`` refuses it instead.
    """
    if kind is None:
        check_readable(path)
        kind = media_kind(path)
    if kind is MediaKind.IMAGE:
        return preprocess_image(
            path, spec, params, pixel_format, keep_frames=keep_frames, allocate=allocate
        )
    pre = preprocess_video(
        path,
        spec,
        params,
        pixel_format,
        keep_frames=keep_frames,
        on_frame=on_frame,
        allocate=allocate,
    )
    if strict and pre.warnings:
        raise InputError(pre.warnings[0], hint="without --strict mmctl uses the frames that decode")
    return pre


def preprocess_image(
    path: Path,
    spec: QwenFamily,
    params: VisionParams,
    pixel_format: PixelFormat = PixelFormat.FLOAT32,
    *,
    keep_frames: bool = False,
    allocate: Allocator = empty,
) -> Preprocessed:
    start = time.perf_counter()
    info, rgb = load_image(path)
    loaded = time.perf_counter()
    height, width = spec.image_size(info.height, info.width, params)
    resized = resize_rgb(rgb, height, width)
    grid = (1, height // params.patch_size, width // params.patch_size)
    out = allocate((grid[1] * grid[2], params.patch_dim), pixel_format.numpy_dtype)
    frames = np.broadcast_to(resized, (params.temporal_patch_size, *resized.shape))
    patchify_into(out, frames, params, pixel_format)
    end = time.perf_counter()
    return Preprocessed(
        kind=MediaKind.IMAGE,
        family=spec.name,
        params=params,
        pixel_format=pixel_format,
        pixel_values=out,
        grid_thw=grid,
        resized=(height, width),
        source=info,
        frame_indices=np.zeros(0, dtype=np.int64),
        frame_times=(),
        patch_times=(),
        num_tokens=params.tokens_for_grid(grid),
        timings=Timings(decode_s=loaded - start, preprocess_s=end - loaded, total_s=end - start),
        frames=(resized,) if keep_frames else (),
    )


class _VideoAssembler:
    """Resize each frame, patchify each temporal patch once its frames are in.

    Safe to call from several threads at once and in any order of positions
    (a parallel decode's pieces, :func:`mmctl.media.video.decode_sampled`),
    position 0 first: a temporal patch's frames wait, resized, until the
    patch is complete, and each patch writes its own rows of the output."""

    def __init__(
        self,
        spec: QwenFamily,
        params: VisionParams,
        fmt: PixelFormat,
        keep: bool,
        on_frame: FrameCallback | None,
        allocate: Allocator = empty,
    ) -> None:
        self.spec, self.params, self.fmt, self.keep, self.on_frame = (
            spec,
            params,
            fmt,
            keep,
            on_frame,
        )
        self.allocate = allocate
        self.busy_s = 0.0
        self.count = 0
        self.done = 0
        self.out: np.ndarray | None = None
        self.lock = threading.Lock()
        self.local = threading.local()  # per thread: the float scratch rows

    def start(self, count: int, height: int, width: int) -> None:
        """A (new) pass over ``count`` sampled frames of ``height``×``width``."""
        p = self.params
        self.count = count
        self.done = 0
        self.size = self.spec.video_size(count, height, width, p)
        self.grid = grid_for(count, *self.size, p)
        rows_per_t = self.grid[1] * self.grid[2]
        self.out = self.allocate((self.grid[0] * rows_per_t, p.patch_dim), self.fmt.numpy_dtype)
        self.rows_per_t = rows_per_t
        #: temporal patch -> its resized frames so far (by place in the patch)
        self.waiting: dict[int, dict[int, np.ndarray]] = {}
        self.local = threading.local()
        self.frames: list[np.ndarray | None] = [None] * count if self.keep else []

    def add(self, pos: int, rgb: np.ndarray) -> None:
        began = time.perf_counter()
        tp = self.params.temporal_patch_size
        resized = resize_rgb(rgb, *self.size)
        t = pos // tp
        # The last patch of a count that Tp does not divide: pad with the last frame.
        need = tp if (t + 1) * tp <= self.count else self.count - t * tp
        with self.lock:
            if self.keep:
                self.frames[pos] = resized
            got = self.waiting.setdefault(t, {})
            got[pos % tp] = resized
            complete = len(got) == need
            if complete:
                del self.waiting[t]
        if complete:
            pair = np.empty((tp, *self.size, 3), dtype=np.uint8)
            for k in range(tp):
                pair[k] = got[min(k, need - 1)]  # temporal pad: repeat the last frame
            self._flush(t, pair)
        spent = time.perf_counter() - began
        with self.lock:
            self.busy_s += spent
            self.done += 1
            done = self.done
        if self.on_frame is not None:
            self.on_frame(done, self.count)

    def output(self) -> np.ndarray:
        if self.out is None:
            raise InputError("the video decoded to no frames")
        return self.out

    def _flush(self, t: int, pair: np.ndarray) -> None:
        assert self.out is not None, "start() sizes the output before the first frame"
        rows = self.out[t * self.rows_per_t : (t + 1) * self.rows_per_t]
        scratch = getattr(self.local, "scratch", None)
        if scratch is None and self.fmt.needs_scratch:
            scratch = self.local.scratch = np.empty((self.rows_per_t, self.params.patch_dim),
                                                    dtype=np.float32)  # fmt: skip
        patchify_into(rows, pair, self.params, self.fmt, scratch)


def preprocess_video(
    path: Path,
    spec: QwenFamily,
    params: VisionParams,
    pixel_format: PixelFormat = PixelFormat.FLOAT32,
    *,
    keep_frames: bool = False,
    on_frame: FrameCallback | None = None,
    allocate: Allocator = empty,
) -> Preprocessed:
    start = time.perf_counter()
    assembler = _VideoAssembler(spec, params, pixel_format, keep_frames, on_frame, allocate)
    sampled: dict[str, int] = {}

    def sampler(total: int, fps: float) -> np.ndarray:
        indices = spec.sample_indices(total, fps, params)
        sampled["count"] = len(indices)
        return indices

    started = threading.Lock()

    def shared(pos: int, rgb: np.ndarray) -> None:
        # A parallel decode's frames, on its threads: position 0 comes first.
        if pos == 0:
            with started:
                assembler.start(sampled["count"], rgb.shape[0], rgb.shape[1])
        assembler.add(pos, rgb)

    with _HandOff(assembler, lambda: sampled["count"]) as hand_off:
        info, indices = decode_sampled(
            path, sampler, hand_off, threads=decode_threads(), shared_sink=shared
        )
        hand_off.finish()
    decoded = time.perf_counter()
    times = tuple(float(i) / info.source_fps for i in indices)
    return Preprocessed(
        kind=MediaKind.VIDEO,
        family=spec.name,
        params=params,
        pixel_format=pixel_format,
        pixel_values=assembler.output(),
        grid_thw=assembler.grid,
        resized=assembler.size,
        source=info,
        frame_indices=np.asarray(indices, dtype=np.int64),
        frame_times=times,
        patch_times=tuple(spec.video_frame_times(indices, info.source_fps, params)),
        num_tokens=params.tokens_for_grid(assembler.grid),
        timings=Timings(
            decode_s=decoded - start, preprocess_s=assembler.busy_s, total_s=decoded - start
        ),
        frames=tuple(f for f in assembler.frames if f is not None) if keep_frames else (),
        video_tensors=spec.video_tensors(indices, info.total_frames, info.source_fps, params),
    )


class _HandOff:
    """The decoder's frame sink: hands each sampled frame to the assembler.

    Frames under :data:`THREADED_FRAME_PIXELS` are assembled inline — for a
    small clip a thread's start-up and hand-offs cost more than the overlap
    saves. Larger frames go to one helper thread, started at the first such
    frame, with at most :data:`MAX_PENDING_FRAMES` waiting.
    """

    def __init__(self, assembler: _VideoAssembler, count: Callable[[], int]) -> None:
        self.assembler = assembler
        self.count = count
        self.inline = True
        self.pool: ThreadPoolExecutor | None = None
        self.pending = threading.BoundedSemaphore(MAX_PENDING_FRAMES)
        self.futures: list[Future] = []

    def __call__(self, pos: int, rgb: np.ndarray) -> None:
        if pos == 0:
            # A first (or repeated) pass: wait for the worker, then size the output.
            self.finish()
            self.assembler.start(self.count(), rgb.shape[0], rgb.shape[1])
            self.inline = rgb.shape[0] * rgb.shape[1] < THREADED_FRAME_PIXELS
        if self.inline:
            self.assembler.add(pos, rgb)
            return
        if self.pool is None:
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mmctl-preprocess")
        self.pending.acquire()
        self.futures.append(self.pool.submit(self._run, pos, rgb))

    def _run(self, pos: int, rgb: np.ndarray) -> None:
        try:
            self.assembler.add(pos, rgb)
        finally:
            self.pending.release()

    def finish(self) -> None:
        """Wait for the frames handed off; re-raises a worker error (e.g. aspect ratio)."""
        for f in self.futures:
            f.result()
        self.futures.clear()

    def __enter__(self) -> _HandOff:
        return self

    def __exit__(self, *exc: object) -> None:
        for f in self.futures:
            f.cancel()
        if self.pool is not None:
            self.pool.shutdown(wait=True)
