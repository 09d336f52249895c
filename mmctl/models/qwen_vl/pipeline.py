"""Media file → pixel tensor + grid + frame facts, for the Qwen-VL families
(and GLM-4.1V / GLM-4.6V: any :class:`~mmctl.models.qwen_vl.variant.PatchVariant`).

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

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from mmctl.choices import PixelFormat
from mmctl.errors import InputError
from mmctl.media.image import load_image
from mmctl.media.probe import MediaKind, check_readable, media_kind
from mmctl.media.video import decode_sampled
from mmctl.models.qwen_vl.settings import PatchVision
from mmctl.models.qwen_vl.variant import PatchVariant
from mmctl.preprocessing.pixels import grid_for, patchify_into
from mmctl.preprocessing.resize import resize_rgb
from mmctl.values.items import (
    DEFAULT_OPTIONS,
    Allocator,
    FrameCallback,
    ItemOptions,
    Preprocessed,
    Timings,
    empty,
)

P = TypeVar("P", bound=PatchVision)

MAX_PENDING_FRAMES = 8
#: Source frames of at least this many pixels are resized on the helper thread.
THREADED_FRAME_PIXELS = 320 * 240


def preprocess(
    path: Path,
    spec: PatchVariant[P],
    params: P,
    pixel_format: PixelFormat = PixelFormat.FLOAT32,
    *,
    kind: MediaKind | None = None,
    options: ItemOptions = DEFAULT_OPTIONS,
) -> Preprocessed:
    """Preprocess an image or a video file. ``kind`` comes from a caller that
    has checked the file (:func:`mmctl.media.probe.check_media`); without it
    the file is checked and its kind found here.

    ``options.on_frame(done, total)`` is called after each sampled frame is
    processed (for progress bars). A video that decodes to fewer frames than
    its container announces is preprocessed from the frames that decode, with
    a warning in :attr:`Preprocessed.warnings`; ``options.strict`` refuses it.
    """
    if kind is None:
        check_readable(path)
        kind = media_kind(path)
    if kind is MediaKind.IMAGE:
        return _image(path, spec, params, pixel_format, options)
    pre = _video(path, spec, params, pixel_format, options)
    if options.strict and pre.warnings:
        raise InputError(pre.warnings[0], hint="without --strict mmctl uses the frames that decode")
    return pre


def _image(
    path: Path, spec: PatchVariant[P], params: P, fmt: PixelFormat, options: ItemOptions
) -> Preprocessed:
    start = time.perf_counter()
    info, rgb = load_image(path)
    loaded = time.perf_counter()
    height, width = spec.image_size(info.height, info.width, params)
    resized = resize_rgb(rgb, height, width)
    grid = (1, height // params.patch_size, width // params.patch_size)
    out = options.allocate((grid[1] * grid[2], params.patch_dim), fmt.numpy_dtype)
    frames = np.broadcast_to(resized, (params.temporal_patch_size, *resized.shape))
    patchify_into(out, frames, params, fmt)
    end = time.perf_counter()
    return Preprocessed(
        kind=MediaKind.IMAGE,
        family=spec.name,
        params=params,
        pixel_format=fmt,
        pixel_values=out,
        grid_thw=grid,
        resized=(height, width),
        source=info,
        frame_indices=np.zeros(0, dtype=np.int64),
        frame_times=(),
        patch_times=(),
        num_tokens=params.tokens_for_grid(grid),
        timings=Timings(decode_s=loaded - start, preprocess_s=end - loaded),
        frames=(resized,) if options.keep_frames else (),
    )


class _VideoAssembler(Generic[P]):
    """The worker-thread side: resize each frame, patchify complete temporal patches."""

    def __init__(
        self,
        spec: PatchVariant[P],
        params: P,
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
        self.out: np.ndarray | None = None

    def start(self, count: int, height: int, width: int) -> None:
        """A (new) pass over ``count`` sampled frames of ``height``×``width``."""
        p = self.params
        self.count = count
        self.size = self.spec.video_size(count, height, width, p)
        self.grid = grid_for(count, *self.size, p)
        rows_per_t = self.grid[1] * self.grid[2]
        self.out = self.allocate((self.grid[0] * rows_per_t, p.patch_dim), self.fmt.numpy_dtype)
        self.rows_per_t = rows_per_t
        self.pair = np.empty((p.temporal_patch_size, *self.size, 3), dtype=np.uint8)
        self.scratch = (
            np.empty((rows_per_t, p.patch_dim), dtype=np.float32)
            if self.fmt.needs_scratch
            else None
        )
        self.frames: list[np.ndarray | None] = [None] * count if self.keep else []

    def add(self, pos: int, rgb: np.ndarray) -> None:
        began = time.perf_counter()
        tp = self.params.temporal_patch_size
        resized = resize_rgb(rgb, *self.size)
        self.pair[pos % tp] = resized
        if self.keep:
            self.frames[pos] = resized
        if pos % tp == tp - 1:
            self._flush(pos // tp)
        elif pos == self.count - 1:
            self.pair[pos % tp + 1 :] = resized  # temporal pad: repeat the last frame
            self._flush(pos // tp)
        self.busy_s += time.perf_counter() - began
        if self.on_frame is not None:
            self.on_frame(pos + 1, self.count)

    def output(self) -> np.ndarray:
        if self.out is None:
            raise InputError("the video decoded to no frames")
        return self.out

    def _flush(self, t: int) -> None:
        assert self.out is not None, "start() sizes the output before the first frame"
        rows = self.out[t * self.rows_per_t : (t + 1) * self.rows_per_t]
        patchify_into(rows, self.pair, self.params, self.fmt, self.scratch)


def _video(
    path: Path, spec: PatchVariant[P], params: P, fmt: PixelFormat, options: ItemOptions
) -> Preprocessed:
    start = time.perf_counter()
    assembler = _VideoAssembler(
        spec, params, fmt, options.keep_frames, options.on_frame, options.allocate
    )
    sampled: dict[str, int] = {}

    def sampler(total: int, fps: float) -> np.ndarray:
        indices = spec.sample_indices(total, fps, params)
        sampled["count"] = len(indices)
        return indices

    with _HandOff(assembler, lambda: sampled["count"]) as hand_off:
        info, indices = decode_sampled(path, sampler, hand_off)
        hand_off.finish()
    decoded = time.perf_counter()
    times = tuple(float(i) / info.source_fps for i in indices)
    return Preprocessed(
        kind=MediaKind.VIDEO,
        family=spec.name,
        params=params,
        pixel_format=fmt,
        pixel_values=assembler.output(),
        grid_thw=assembler.grid,
        resized=assembler.size,
        source=info,
        frame_indices=np.asarray(indices, dtype=np.int64),
        frame_times=times,
        patch_times=tuple(spec.video_frame_times(indices, info.source_fps, params)),
        num_tokens=params.tokens_for_grid(assembler.grid),
        timings=Timings(decode_s=decoded - start, preprocess_s=0.0, overlapped_s=assembler.busy_s),
        frames=tuple(f for f in assembler.frames if f is not None) if options.keep_frames else (),
        video_tensors=spec.video_tensors(indices, info.total_frames, info.source_fps, params),
    )


class _HandOff(Generic[P]):
    """The decoder's frame sink: hands each sampled frame to the assembler.

    Frames under :data:`THREADED_FRAME_PIXELS` are assembled inline — for a
    small clip a thread's start-up and hand-offs cost more than the overlap
    saves. Larger frames go to one helper thread, started at the first such
    frame, with at most :data:`MAX_PENDING_FRAMES` waiting.
    """

    def __init__(self, assembler: _VideoAssembler[P], count: Callable[[], int]) -> None:
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

    def __enter__(self) -> _HandOff[P]:
        return self

    def __exit__(self, *exc: object) -> None:
        for f in self.futures:
            f.cancel()
        if self.pool is not None:
            self.pool.shutdown(wait=True)
