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

A long video whose decode splits at IDR pictures is decoded in pieces on
several threads instead (:func:`mmctl.media.video.decode_sampled`, one per
CPU this process may use): each piece's thread resizes and patchifies its
own frames, and the assembler takes them in any order, a temporal patch
written once its frames are in.
"""

from __future__ import annotations

import os
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
from mmctl.models.qwen_vl.settings import PatchSteps
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

P = TypeVar("P", bound=PatchSteps)

MAX_PENDING_FRAMES = 8
#: Source frames of at least this many pixels are resized on the helper thread.
THREADED_FRAME_PIXELS = 320 * 240


def decode_threads() -> int:
    """Threads a parallel decode may use: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


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
    content = spec.content_size(
        MediaKind.IMAGE, (height, width), params.temporal_patch_size, info.height, info.width,
        params,
    )  # fmt: skip
    resized = fit(rgb, (height, width), content)
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


def fit(rgb: np.ndarray, canvas: tuple[int, int], content: tuple[int, int]) -> np.ndarray:
    """``rgb`` resized to ``content`` at the canvas's top left, the rest zero
    (``tvF.pad`` with ``fill=0`` on uint8, before rescaling: GLM-5-Next's)."""
    if content == canvas:
        return resize_rgb(rgb, *canvas)
    out = np.zeros((*canvas, 3), dtype=np.uint8)
    out[: content[0], : content[1]] = resize_rgb(rgb, *content)
    return out


class _VideoAssembler(Generic[P]):
    """Resize each frame, patchify each temporal patch once its frames are in.

    Safe to call from several threads at once and in any order of positions
    (a parallel decode's pieces, :func:`mmctl.media.video.decode_sampled`),
    position 0 first: a temporal patch's frames wait, resized, until the
    patch is complete, and each patch writes its own rows of the output."""

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
        self.content = self.spec.content_size(MediaKind.VIDEO, self.size, count, height, width, p)
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
        resized = fit(rgb, self.size, self.content)
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
