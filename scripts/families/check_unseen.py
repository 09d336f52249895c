"""mmctl's families against the reference code vLLM 0.33 runs, on media the goldens never saw.

Runs in the reference environment (torch, transformers 5.20.2; never in CI)::

    env="$(bash scripts/reference/install_env.sh)"
    "$env/bin/python" scripts/families/check_unseen.py [--family F ...] --images 300 --clips 16

and, for the parts that run vLLM's own code (its video loaders' frame choice, Kimi-K2.5's
fused processor, Nemotron-3-Nano-Omni's processor on images and clips), in the engine
environment (Nemotron's clips also read vLLM 0.33.0's OpenCV decoder from ``$MMCTL_VLLM_SRC``)::

    HF_HUB_OFFLINE=1 ~/.cache/mmctl/engine-env-*/bin/python scripts/families/check_unseen.py --loaders 300

One table, ``ROWS``: per family (its folder ``tests/fixtures/families/<family>/``), its
parts, each a ``Part(label, check, only)``; ``only="loaders"`` parts run only with
``--loaders N`` (and then only they run). Random-size, random-content images and random
clips (written losslessly: FFV1 RGB in AVI, the decoded frames checked to be the written
ones) go through mmctl's real path — ``load_model`` on the folder, each item through the
family's ``processor.preprocess`` from a file — and through transformers' processor loaded
from the same folder and called as vLLM 0.33 calls it; tensors must be equal bit for bit,
token counts, grids, kept frames, timestamps and prompt replacements equal. Each part
prints "<family> <part>: N equal, M differ" (and a line per difference); the last line
sums them; exit 1 on any difference.

The families' own reference knowledge lives in the rows' functions and in
``gemma4_reference.py`` / ``glm_golden.py`` (shared with scripts/make_family_fixtures.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE)]

import gemma4_reference as gemma4_ref  # noqa: E402
from families import glm_golden, inkling_golden, minimax_m3_vl_golden  # noqa: E402
from make_family_fixtures import (  # noqa: E402
    KIMI_MEDIA_PROC_CFG,
    nemotron_vllm_processor,
    qwen2vl_loader,
)

from mmctl.choices import PixelFormat  # noqa: E402
from mmctl.errors import InputError  # noqa: E402
from mmctl.media.probe import MediaKind, dimensions  # noqa: E402
from mmctl.models.model import Model, load_model  # noqa: E402
from mmctl.values.items import DEFAULT_OPTIONS  # noqa: E402

FAMILIES = ROOT / "tests" / "fixtures" / "families"
FLOAT32 = (PixelFormat.FLOAT32,)
#: Both forms vLLM 0.33 can ask for: float32 (a worker started with
#: ``--no-mm-device-do-normalize``) and uint8 (a default worker).
BOTH_FORMS = (PixelFormat.FLOAT32, PixelFormat.UINT8)
#: What vLLM passes HF for a device-normalizing worker (uint8 pixels).
RAW = {"do_rescale": False, "do_normalize": False}


@dataclass
class Ctx:
    """What a part gets: the options, its family's random stream, a scratch folder,
    and ``state`` shared between the parts of one family (processors, images)."""

    family: str
    args: argparse.Namespace
    rng: np.random.Generator
    tmp: Path
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return FAMILIES / self.family

    def model(self) -> Model:
        if "model" not in self.state:
            self.state["model"] = load_model(model_dir=self.folder)
        return self.state["model"]

    def processor(self) -> Any:
        if "processor" not in self.state:
            from transformers import AutoProcessor

            self.state["processor"] = AutoProcessor.from_pretrained(str(self.folder))
        return self.state["processor"]


#: A part's check: (equal, differ).
Check = Callable[[Ctx], tuple[int, int]]


@dataclass(frozen=True)
class Part:
    label: str
    check: Check
    #: None: the reference environment's run; "loaders": only with --loaders N (vLLM's code)
    only: str | None = None


# ---- shared: media, mmctl's path ----


def sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def preprocess(model: Model, path: Path, kind: MediaKind, form: PixelFormat = FLOAT32[0]) -> Any:
    """mmctl's item as ``mmctl build --pixel-dtype <form>`` makes it, or its refusal."""
    try:
        return model.spec.processor.preprocess(path, kind, model.params, form, DEFAULT_OPTIONS)
    except InputError as err:
        return err


def noisy_content(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Noise, a gradient with noise, or a flat colour."""
    kind = rng.integers(3)
    if kind == 0:
        return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    if kind == 1:
        yy, xx = np.meshgrid(np.linspace(0, 255, h), np.linspace(0, 255, w), indexing="ij")
        noise = rng.integers(-20, 21, size=(h, w, 3))
        grad = np.stack([yy, xx, (yy + xx) / 2], axis=-1) + noise
        return np.clip(grad, 0, 255).astype(np.uint8)
    frame = np.empty((h, w, 3), dtype=np.uint8)
    frame[...] = rng.integers(0, 256, size=3, dtype=np.uint8)
    return frame


def plain_content(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Noise, a clean gradient, or a flat colour."""
    kind = rng.integers(3)
    if kind == 0:
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    if kind == 1:
        y = np.linspace(0, 255, h, dtype=np.float32)[:, None, None]
        x = np.linspace(0, 255, w, dtype=np.float32)[None, :, None]
        return np.broadcast_to((y + x) / 2, (h, w, 3)).astype(np.uint8).copy()
    return np.full((h, w, 3), rng.integers(0, 256, 3), dtype=np.uint8)


def anyres_sizes(rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    """(h, w) for tiling families: fixed edge cases (pinpoints and their boundaries)
    first, then random ones up to 1:60."""
    fixed = [
        (1, 1), (1, 2), (2, 1), (3, 3), (1, 60), (60, 1), (7, 400), (400, 7),
        (100, 300), (300, 100), (336, 336), (336, 672), (672, 336), (672, 672),
        (1008, 336), (336, 1008), (335, 671), (337, 673), (384, 384), (384, 768),
        (768, 384), (1152, 1152), (2000, 2000), (2000, 34), (34, 2000), (961, 1441),
        (500, 1000), (1000, 500), (1000, 501), (501, 1000), (2304, 2304), (1, 2000),
    ]  # fmt: skip
    # llava resizes the short side to 336: beyond 1:60 the long side gets huge
    out = [(h, w) for h, w in fixed if max(h, w) / min(h, w) <= 60]
    while len(out) < count:
        kind = rng.integers(4)
        if kind == 0:  # anything, log-uniform
            h, w = (int(np.exp(rng.uniform(0, np.log(2000)))) for _ in range(2))
        elif kind == 1:  # extreme aspect
            short = int(rng.integers(1, 80))
            long = int(min(2000, short * rng.uniform(5, 60)))
            h, w = (short, long) if rng.integers(2) else (long, short)
        elif kind == 2:  # near a pinpoint's aspect
            base = [(336, 672), (672, 336), (384, 1152), (1152, 384), (768, 768)][rng.integers(5)]
            f = rng.uniform(0.3, 2.5)
            h, w = int(base[0] * f + rng.integers(-2, 3)), int(base[1] * f + rng.integers(-2, 3))
        else:  # photo-like
            h, w = int(rng.integers(200, 2000)), int(rng.integers(200, 2000))
        h, w = max(1, h), max(1, w)
        if max(h, w) / min(h, w) <= 60:
            out.append((h, w))
    return out[:count]


def grid_sizes(rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    """(h, w) for patch-grid families: around the 28-px factor and the pixel budgets,
    1 px to 3000 px, aspect ratios up to 1:190."""
    fixed = [(1, 1), (27, 28), (28, 28), (29, 57), (56, 56), (111, 113), (1, 150), (3000, 20)]
    fixed += [(2192, 2192), (2193, 2191), (3000, 2000), (1000, 7)]
    out = list(fixed)
    while len(out) < count:
        h = int(np.exp(rng.uniform(0, np.log(3000))))
        w = int(np.clip(h * np.exp(rng.uniform(-np.log(120), np.log(120))), 1, 3000))
        if max(h, w) / min(h, w) < 190:
            out.append((h, w))
    return out[:count]


def write_clip(path: Path, clip: np.ndarray, fps: Fraction) -> None:
    """Lossless: FFV1 keeps RGB exactly (no chroma subsampling)."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=fps)
        stream.width, stream.height = clip.shape[2], clip.shape[1]
        stream.pix_fmt = "bgr0"
        for rgb in clip:
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="bgr0")
            container.mux(stream.encode(frame))
        container.mux(stream.encode())


def decoded_frames(path: Path, indices: list[int]) -> np.ndarray:
    """The frames mmctl's decoder gives for ``indices`` (the lossless check)."""
    from mmctl.media.video import decode_sampled

    got: dict[int, np.ndarray] = {}

    def sink(pos: int, rgb: np.ndarray) -> None:
        got[pos] = rgb

    decode_sampled(path, lambda total, fps: np.asarray(indices, dtype=np.int64), sink)
    return np.stack([got[p] for p in range(len(indices))])


def _lossless(path: Path, clip: np.ndarray, kept: list[int]) -> bool:
    return bool(np.array_equal(decoded_frames(path, kept), clip[kept]))


LOSSY = "the codec was not lossless here (not a difference of mmctl's)"


# ---- patch-grid families (Qwen3.5, GLM-4.1V/4.6V, GLM-5-Next): one image check ----


def _hf_pixels(values: Any, form: PixelFormat) -> np.ndarray:
    """HF's pixels in mmctl's form (some processors return uint8 values as float)."""
    array = values.numpy()
    return array.astype(np.uint8) if form is PixelFormat.UINT8 else array


def grid_images(forms: tuple[PixelFormat, ...]) -> Check:
    """Each image as a PNG through mmctl, and through the folder's image processor as
    vLLM calls it (one PIL image; ``RAW`` for uint8): grid and pixels equal in every form;
    where HF refuses an image, mmctl must refuse it too."""

    def check(ctx: Ctx) -> tuple[int, int]:
        from PIL import Image

        model, processor = ctx.model(), ctx.processor()
        count = ctx.args.images
        differ = 0
        for n, (h, w) in enumerate(grid_sizes(ctx.rng, count)):
            rgb = plain_content(ctx.rng, h, w)
            path = ctx.tmp / f"{n}.png"
            Image.fromarray(rgb).save(path)
            problems = []
            for form in forms:
                pre = preprocess(model, path, MediaKind.IMAGE, form)
                kwargs = RAW if form is PixelFormat.UINT8 else {}
                try:
                    hf = processor.image_processor(
                        images=[Image.fromarray(rgb)], return_tensors="pt", **kwargs
                    )
                except ValueError as err:  # HF refuses: so must mmctl
                    if not isinstance(pre, Exception):
                        problems.append(f"{form.value}: HF refused ({err}), mmctl did not")
                    continue
                grid = tuple(hf["image_grid_thw"][0].tolist())
                if isinstance(pre, Exception):
                    problems.append(f"{form.value}: mmctl refused ({pre})")
                elif grid != pre.grid_thw:
                    problems.append(f"{form.value}: grid {list(grid)} vs {list(pre.grid_thw)}")
                elif sha(_hf_pixels(hf["pixel_values"], form)) != sha(pre.pixel_values):
                    problems.append(f"{form.value}: pixels")
            if problems:
                differ += 1
                print(f"DIFF image {dimensions(w, h)}: {'; '.join(problems)}")
            path.unlink()
        return count - differ, differ

    return check


def _random_clip(
    ctx: Ctx, n: int, rates: tuple[Fraction, ...], frames: Callable[[int, Fraction], int]
) -> tuple[Path, np.ndarray, Fraction]:
    rate = rates[int(ctx.rng.integers(len(rates)))]
    total = frames(n, rate)
    h, w = int(ctx.rng.integers(20, 200)), int(ctx.rng.integers(20, 200))
    clip = ctx.rng.integers(0, 256, (total, h, w, 3), dtype=np.uint8)
    path = ctx.tmp / f"{n}.avi"
    write_clip(path, clip, rate)
    return path, clip, rate


def _report_clip(problems: list[str], clip: np.ndarray, fps: float) -> None:
    total, h, w = clip.shape[:3]
    print(f"DIFF clip {total} frames at {fps:.3f} fps {dimensions(w, h)}: {'; '.join(problems)}")


# ---- Qwen3.5: Qwen3-VL's processing (vLLM's Qwen3VLMultiModalProcessor) ----


QWEN_RATES = (Fraction(2), Fraction(5), Fraction(8), Fraction(10), Fraction(25, 2),
              Fraction(24000, 1001), Fraction(30))  # fmt: skip


def qwen_clips(ctx: Ctx) -> tuple[int, int]:
    """Clips handed to the folder's video processor as vLLM's ``qwen3_vl`` loader hands them
    (mmctl's sampled frames, their metadata, ``do_sample_frames`` when every frame was
    kept): rows, grid and the per-temporal-patch timestamps
    (``Qwen3VLProcessor._calculate_timestamps``, which vLLM copies) equal mmctl's. The
    frame choice itself is the ``loader`` part's (vLLM's own backend)."""
    from transformers.video_utils import VideoMetadata

    model, processor = ctx.model(), ctx.processor()
    tp = model.params.temporal_patch_size
    differ = 0
    for n in range(ctx.args.clips):
        path, clip, rate = _random_clip(
            ctx, n, QWEN_RATES, lambda _n, r: int(ctx.rng.integers(1, int(r * 30)))
        )
        total = len(clip)
        problems = []
        for form in BOTH_FORMS:
            pre = preprocess(model, path, MediaKind.VIDEO, form)
            if isinstance(pre, Exception):
                problems.append(f"{form.value}: mmctl refused ({pre})")
                continue
            fps, kept = pre.source.source_fps, pre.frame_indices.tolist()
            if pre.source.total_frames != total:
                problems.append(f"{pre.source.total_frames} frames decoded of {total}")
                break
            if form is BOTH_FORMS[0] and not _lossless(path, clip, kept):
                problems.append(LOSSY)
                break
            meta = VideoMetadata(
                total_num_frames=total,
                fps=fps,
                duration=total / fps,
                video_backend="opencv",
                frames_indices=kept,
            )
            out = processor.video_processor(
                videos=[clip[kept]],
                video_metadata=[meta],
                do_sample_frames=len(kept) == total,
                return_metadata=True,
                return_tensors="pt",
                **(RAW if form is PixelFormat.UINT8 else {}),
            )
            grid = tuple(out["video_grid_thw"][0].tolist())
            times = processor._calculate_timestamps(list(kept), fps, tp)
            if grid != pre.grid_thw:
                problems.append(f"{form.value}: grid {list(grid)} vs {list(pre.grid_thw)}")
            elif sha(out["pixel_values_videos"].numpy()) != sha(pre.pixel_values):
                problems.append(f"{form.value}: pixels")
            if list(pre.patch_times) != times:
                problems.append(f"timestamps {list(pre.patch_times)[:4]} vs {times[:4]}")
        if problems:
            differ += 1
            _report_clip(problems, clip, float(rate))
        path.unlink()
    return ctx.args.clips - differ, differ


LOADER_RATES = (1.0, 2.0, 7.5, 10.0, 24000 / 1001, 25.0, 30000 / 1001, 30.0, 60.0)


def _loader_cases(
    ctx: Ctx, fixed: list[tuple[int, float]], shortest: float
) -> list[tuple[int, float]]:
    """(frame count, fps): ``fixed`` first, then clips of ``shortest`` s to 3000 s."""
    cases = list(fixed)
    while len(cases) < ctx.args.loaders:
        fps = float(ctx.rng.choice(LOADER_RATES))
        seconds = float(np.exp(ctx.rng.uniform(np.log(shortest), np.log(3000))))
        cases.append((max(1, int(seconds * fps)), fps))
    return cases[: ctx.args.loaders]


def qwen_loader(ctx: Ctx) -> tuple[int, int]:
    """mmctl's frame choice against vLLM's ``Qwen3VLVideoBackend`` as ``VideoMediaIO``
    calls it (its own fps default 2, no frame count)."""
    from vllm.multimodal.video import Qwen3VLVideoBackend
    from vllm.multimodal.video_decoders import VideoSourceMetadata, VideoTargetMetadata

    model = ctx.model()
    variant, vision = model.spec.processor.variant, model.params  # type: ignore[attr-defined]
    fixed = [(1, 30.0), (3, 2.0), (6, 10.0), (41, 24000 / 1001), (1600, 4.0), (72000, 30.0)]
    cases = _loader_cases(ctx, fixed, 0.1)
    differ = 0
    for total, fps in cases:
        source = VideoSourceMetadata(total, fps, total / fps)
        theirs = Qwen3VLVideoBackend.compute_frames_index_to_sample(
            source, VideoTargetMetadata(-1, 2, 300)
        )
        ours = variant.sample_indices(total, fps, vision).tolist()
        if ours != theirs:
            differ += 1
            print(f"DIFF loader {total} frames at {fps:.3f} fps: {ours[:5]} vs {theirs[:5]}")
    return len(cases) - differ, differ


# ---- GLM-4.1V / GLM-4.6V (glm4v, glm46v: the processing chosen from the folder) ----


GLM_RATES = (Fraction(2), Fraction(5), Fraction(8), Fraction(10), Fraction(25, 2),
             Fraction(24000, 1001), Fraction(30), Fraction(60))  # fmt: skip


def glm_clips(ctx: Ctx) -> tuple[int, int]:
    """Clips handed to the processor as vLLM's registered loader hands them (the frames
    ``loader_indices`` names, the loader's metadata, ``do_sample_frames`` when every
    frame was decoded); the processor's kept frames, rows and grid equal mmctl's, and
    vLLM's timestamps (whole seconds of every second kept frame) the ones mmctl writes.
    The first clip is under 1 s: both must refuse it."""
    from transformers.video_utils import VideoMetadata

    from mmctl.models import glm4v

    model, processor = ctx.model(), ctx.processor()
    differ = refused = 0
    for n in range(ctx.args.clips):
        path, clip, rate = _random_clip(
            ctx,
            n,
            GLM_RATES,
            lambda n, r: int(ctx.rng.integers(2, int(r) if n == 0 else int(r * 45))),
        )
        total = len(clip)
        pre = preprocess(model, path, MediaKind.VIDEO)
        fps = float(rate) if isinstance(pre, Exception) else pre.source.source_fps
        decoded = glm4v.loader_indices(total, fps, model.params)
        meta = {
            "total_num_frames": total,
            "fps": fps,
            "duration": total / fps,
            "video_backend": "opencv",
            "frames_indices": decoded,
        }
        try:
            out = processor.video_processor(
                videos=[clip[decoded]],
                video_metadata=[VideoMetadata(**meta)],
                do_sample_frames=len(decoded) == total,
                return_metadata=True,
                return_tensors="pt",
            )
        except ValueError as err:
            out = err
        problems = []
        if isinstance(pre, Exception) or isinstance(out, Exception):
            if not (isinstance(pre, Exception) and isinstance(out, Exception)):
                problems.append(f"mmctl {pre!r:.80} vs HF {out!r:.80}")
            else:
                refused += 1
        else:
            kept = [int(i) for i in out["video_metadata"][0].frames_indices]
            ours = pre.frame_indices.tolist()
            grid = tuple(out["video_grid_thw"][0].tolist())
            stamps = [float(int(i / fps)) for i in kept][::2]
            if pre.source.total_frames != total:
                problems.append(f"{pre.source.total_frames} frames decoded of {total}")
            elif not _lossless(path, clip, ours):
                problems.append(LOSSY)
            if kept != ours:
                problems.append(f"frames {kept[:6]}.. vs {ours[:6]}..")
            if grid != pre.grid_thw:
                problems.append(f"grid {list(grid)} vs {list(pre.grid_thw)}")
            elif sha(out["pixel_values_videos"].numpy()) != sha(pre.pixel_values):
                problems.append("pixels")
            if list(pre.patch_times) != stamps:
                problems.append(f"timestamps {list(pre.patch_times)} vs vLLM's {stamps}")
        if problems:
            differ += 1
            _report_clip(problems, clip, fps)
        path.unlink()
    print(f"  ({refused} clips refused by both)")
    return ctx.args.clips - differ, differ


def glm_loader(ctx: Ctx) -> tuple[int, int]:
    """``glm4v.loader_indices`` against vLLM's ``DynamicVideoBackend`` (GLM-4.1V) /
    ``GLM46VVideoBackend`` (GLM-4.6V) as ``VideoMediaIO`` calls them (num_frames 32,
    each loader's own fps default)."""
    from vllm.multimodal.video import DynamicVideoBackend, GLM46VVideoBackend
    from vllm.multimodal.video_decoders import VideoSourceMetadata, VideoTargetMetadata

    from mmctl.models import glm4v

    loader = DynamicVideoBackend if ctx.family == "glm4v" else GLM46VVideoBackend
    target = VideoTargetMetadata(32, 2 if ctx.family == "glm4v" else -1, 300)
    params = ctx.model().params
    fixed = [(6, 10.0), (10, 10.0), (1600, 4.0), (600, 2.0), (601, 2.0), (72000, 30.0)]
    cases = _loader_cases(ctx, fixed, 0.3)
    differ = 0
    for total, fps in cases:
        source = VideoSourceMetadata(total, fps, total / fps)
        try:
            theirs = sorted(set(loader.compute_frames_index_to_sample(source, target)))
        except Exception as err:
            theirs = [type(err).__name__]  # type: ignore[list-item]
        try:
            ours = glm4v.loader_indices(total, fps, params)
        except InputError as err:
            ours = [type(err).__name__]  # type: ignore[list-item]
        if ours != theirs:
            differ += 1
            print(f"DIFF loader {total} frames at {fps:.3f} fps: {ours[:5]} vs {theirs[:5]}")
    return len(cases) - differ, differ


# ---- GLM-5-Next: GLM's shape with its own VideoRules (glm_golden.GLM5_NEXT) ----


def glm5_next_processor(ctx: Ctx) -> Any:
    processor = ctx.processor()
    glm_golden.cap_video_budget(processor)  # Glm5NextProcessingInfo.get_hf_processor
    return processor


GLM5_NEXT_RATES = (Fraction(1), Fraction(2), Fraction(5), Fraction(8), Fraction(10),
                   Fraction(24000, 1001), Fraction(30))  # fmt: skip


def glm5_next_clips(ctx: Ctx) -> tuple[int, int]:
    """Clips handed to the folder's video processor as vLLM drives it: its video budget
    capped, the frames ``Glm5NextVideoBackend`` decodes (ported in glm_golden.py),
    ``do_sample_frames`` when that was every frame; rows, grid, the frames kept and each
    temporal patch's second (``_get_video_second_idx_glm46v``) equal mmctl's."""
    from transformers.video_utils import VideoMetadata

    rules = glm_golden.GLM5_NEXT
    model, processor = ctx.model(), glm5_next_processor(ctx)
    differ = 0
    for n in range(ctx.args.clips):
        path, clip, rate = _random_clip(
            ctx,
            n,
            GLM5_NEXT_RATES,
            lambda _n, r: int(ctx.rng.integers(int(r) // 2 + 1, int(r * 30))),
        )
        total = len(clip)
        valid = sorted(set(glm_golden.glm5_next_loader(total, float(rate), total / float(rate))))
        metadata = {
            "total_num_frames": total,
            "fps": float(rate),
            "duration": total / float(rate),
            "video_backend": "opencv",
            "frames_indices": valid,
            "do_sample_frames": len(valid) == total,
        }
        problems = []
        for form in BOTH_FORMS:
            pre = preprocess(model, path, MediaKind.VIDEO, form)
            if isinstance(pre, Exception):
                problems.append(f"{form.value}: mmctl refused ({pre})")
                continue
            kept = pre.frame_indices.tolist()
            if form is BOTH_FORMS[0] and not _lossless(path, clip, kept):
                problems.append(LOSSY)
                break
            meta = {k: v for k, v in metadata.items() if k != "do_sample_frames"}
            out = processor.video_processor(
                videos=[clip[valid]],
                video_metadata=[VideoMetadata(**meta)],
                do_sample_frames=metadata["do_sample_frames"],
                return_metadata=True,
                return_tensors="pt",
                **(RAW if form is PixelFormat.UINT8 else {}),
            )
            grid = tuple(out["video_grid_thw"][0].tolist())
            theirs = [valid[i] for i in out["video_metadata"][0].frames_indices] if (
                metadata["do_sample_frames"]) else valid  # fmt: skip
            stamps = rules.seconds(metadata, len(valid), processor)
            if kept != [int(i) for i in theirs]:
                problems.append(f"frames {kept[:6]} vs {list(theirs)[:6]}")
            elif grid != pre.grid_thw:
                problems.append(f"{form.value}: grid {list(grid)} vs {list(pre.grid_thw)}")
            elif sha(_hf_pixels(out["pixel_values_videos"], form)) != sha(pre.pixel_values):
                problems.append(f"{form.value}: pixels")
            if [int(t) for t in pre.patch_times] != stamps:
                problems.append(f"seconds {list(pre.patch_times)[:4]} vs {stamps[:4]}")
        if problems:
            differ += 1
            _report_clip(problems, clip, float(rate))
        path.unlink()
    return ctx.args.clips - differ, differ


def glm5_next_loader(ctx: Ctx) -> tuple[int, int]:
    """mmctl's frame choice against vLLM's own ``Glm5NextVideoBackend`` (``VideoMediaIO``'s
    call: no fps of its own, so the backend's 2.0) and the processor's ``sample_frames``."""
    from transformers.video_utils import VideoMetadata
    from vllm.multimodal.video import Glm5NextVideoBackend
    from vllm.multimodal.video_decoders import VideoSourceMetadata, VideoTargetMetadata

    from mmctl.models import glm5_next

    vision = ctx.model().params
    sampler = ctx.processor().video_processor
    fixed = [(1, 30.0), (3, 10.0), (6, 10.0), (7, 2.0), (41, 24000 / 1001), (1600, 4.0),
             (72000, 30.0), (10, 1.0)]  # fmt: skip
    cases = _loader_cases(ctx, fixed, 0.1)
    differ = 0
    for total, fps in cases:
        source = VideoSourceMetadata(total, fps, total / fps)
        loader = Glm5NextVideoBackend.compute_frames_index_to_sample(
            source, VideoTargetMetadata(-1, -1, 300)
        )
        meta = VideoMetadata(total_num_frames=total, fps=fps, duration=total / fps)
        want = (sorted(set(loader)), [int(i) for i in sampler.sample_frames(meta)])
        got = (
            glm5_next.loader_indices(total, fps),
            glm5_next.processor_indices(total, fps, vision),
        )
        if got != want:
            differ += 1
            print(f"DIFF {total} frames at {fps:.3f} fps: {got[0][:5]}… vs {want[0][:5]}…")
    return len(cases) - differ, differ


# ---- Qwen3-Omni's thinker: Qwen2.5-VL's parts, vLLM's Qwen2VLVideoBackend ----


def omni_clips(ctx: Ctx) -> tuple[int, int]:
    """The frames vLLM's ``Qwen2VLVideoBackend`` keeps (ported in make_family_fixtures.py's
    ``qwen2vl_loader``, not mmctl's), handed to ``Qwen3OmniMoeProcessor`` as vLLM hands
    them (frames only: its defaults' video size applies); rows and grid bit for bit, and
    ``second_per_grid_ts`` equal to HF's ``video_second_per_grid``."""
    model, processor = ctx.model(), ctx.processor()
    holder = "<|vision_start|><|video_pad|><|vision_end|>"
    differ = 0
    for n in range(ctx.args.clips):
        path, clip, rate = _random_clip(
            ctx, n, QWEN_RATES, lambda _n, r: int(ctx.rng.integers(2, int(r * 30)))
        )
        total = len(clip)
        problems = []
        pre = preprocess(model, path, MediaKind.VIDEO)
        if isinstance(pre, Exception):
            problems.append(f"mmctl refused ({pre})")
        else:
            want = qwen2vl_loader(total, pre.source.source_fps)
            kept = pre.frame_indices.tolist()
            out = processor(text=[holder], videos=[clip[want]], return_tensors="pt")
            grid = tuple(out["video_grid_thw"][0].tolist())
            if kept != want.tolist():
                problems.append(f"frames {kept[:6]} vs {want[:6].tolist()}")
            elif not _lossless(path, clip, kept):
                problems.append(LOSSY)
            elif grid != pre.grid_thw:
                problems.append(f"grid {list(grid)} vs {list(pre.grid_thw)}")
            elif sha(out["pixel_values_videos"].numpy()) != sha(pre.pixel_values):
                problems.append("pixels")
            seconds = np.asarray(pre.video_tensors.get("second_per_grid_ts")).tolist()
            if seconds != out["video_second_per_grid"].tolist():
                problems.append(f"second_per_grid_ts {seconds}")
        if problems:
            differ += 1
            _report_clip(problems, clip, float(rate))
        path.unlink()
    return ctx.args.clips - differ, differ


def omni_loader(ctx: Ctx) -> tuple[int, int]:
    """mmctl's frame choice against vLLM's own ``Qwen2VLVideoBackend`` as ``VideoMediaIO``
    calls it (``load_bytes``' fps 2, no frame count)."""
    model = ctx.model()
    variant, vision = model.spec.processor.variant, model.params  # type: ignore[attr-defined]
    return _qwen2vl_loader(ctx, variant, vision)


def qwen2_5_vl_loader(ctx: Ctx) -> tuple[int, int]:
    """Qwen2.5-VL's (and Qwen2-VL's) frame choice at the published defaults (fps 2,
    frames 4..768: no folder needed) against the same loader, which vLLM registers for
    ``Qwen2VLVideoProcessor``, the video processor those checkpoints get."""
    from mmctl.models.qwen_vl import qwen2_vl

    return _qwen2vl_loader(ctx, qwen2_vl.VARIANT, qwen2_vl.FAMILY.settings())


def _qwen2vl_loader(ctx: Ctx, variant: Any, vision: Any) -> tuple[int, int]:
    from vllm.multimodal.video import Qwen2VLVideoBackend
    from vllm.multimodal.video_decoders import VideoSourceMetadata, VideoTargetMetadata

    fixed = [(1, 30.0), (3, 2.0), (4, 2.0), (6, 10.0), (41, 24000 / 1001), (451, 30.0),
             (1600, 4.0), (72000, 30.0)]  # fmt: skip
    cases = _loader_cases(ctx, fixed, 0.1)
    differ = 0
    for total, fps in cases:
        source = VideoSourceMetadata(total, fps, total / fps)
        try:
            theirs = Qwen2VLVideoBackend.compute_frames_index_to_sample(
                source, VideoTargetMetadata(-1, 2, 300)
            )
        except Exception as err:
            theirs = [type(err).__name__]  # type: ignore[list-item]
        try:
            ours = variant.sample_indices(total, fps, vision).tolist()
        except InputError as err:
            ours = [type(err).__name__]
        if ours != theirs and not (isinstance(ours[0], str) and isinstance(theirs[0], str)):
            differ += 1
            print(f"DIFF loader {total} frames at {fps:.3f} fps: {ours[:5]} vs {theirs[:5]}")
    return len(cases) - differ, differ


# ---- LLaVA-1.5 / LLaVA-NeXT / LLaVA-OneVision: the pure functions ----


def _llava_module(family: str) -> Any:
    from mmctl.models import llava, llava_next
    from mmctl.models import llava_onevision as onevision

    return {"llava": llava, "llava_next": llava_next, "llava_onevision": onevision}[family]


def _llava_vision(ctx: Ctx) -> Any:
    """The family's settings as mmctl resolves them from the folder."""
    return ctx.model().params


def _llava_frames(ctx: Ctx) -> list[np.ndarray]:
    if "frames" not in ctx.state:
        sizes = anyres_sizes(ctx.rng, ctx.args.images)
        ctx.state["frames"] = [noisy_content(ctx.rng, h, w) for h, w in sizes]
    return ctx.state["frames"]


def llava_images(ctx: Ctx) -> tuple[int, int]:
    """Each image through HF's ``AutoImageProcessor`` (the torchvision processor vLLM
    uses) and mmctl's pure functions: float32 tensors bit for bit, ``image_sizes``, and
    the token count equal to the processor's ``_get_num_multimodal_tokens``."""
    from PIL import Image
    from transformers import AutoImageProcessor

    from mmctl.models import llava

    module, vision = _llava_module(ctx.family), _llava_vision(ctx)
    hf = AutoImageProcessor.from_pretrained(ctx.folder)
    counter = ctx.processor()
    equal = differ = 0
    for frame in _llava_frames(ctx):
        h, w = frame.shape[:2]
        ref = hf(images=[Image.fromarray(frame)], return_tensors="pt")
        mine = module.image_pixels(frame, vision)
        batch = llava.batch_pixels if ctx.family == "llava" else module.batch_pixels
        mine = batch([mine])
        want = ref["pixel_values"].numpy()
        ok = mine.shape == want.shape and mine.tobytes() == want.tobytes()
        if ctx.family != "llava":
            ok = ok and np.array_equal(module.image_sizes([frame]), ref["image_sizes"].numpy())
        hf_tokens = counter._get_num_multimodal_tokens(image_sizes=[(h, w)])["num_image_tokens"][0]
        tokens = module.image_tokens(h, w, vision)
        if ok and tokens == hf_tokens:
            equal += 1
        else:
            differ += 1
            print(f"DIFF {dimensions(w, h)}: pixels {'ok' if ok else 'DIFFER'}, tokens "
                  f"{tokens} vs HF {hf_tokens}")  # fmt: skip
    return equal, differ


def llava_batches(ctx: Ctx) -> tuple[int, int]:
    """Multi-image calls: the zero-padded patch axis as HF pads it."""
    from PIL import Image
    from transformers import AutoImageProcessor

    module, vision = _llava_module(ctx.family), _llava_vision(ctx)
    hf = AutoImageProcessor.from_pretrained(ctx.folder)
    frames = _llava_frames(ctx)
    equal = differ = 0
    for _ in range(ctx.args.batches):
        pick = ctx.rng.choice(len(frames), size=int(ctx.rng.integers(2, 4)), replace=False)
        ref = hf(images=[Image.fromarray(frames[i]) for i in pick], return_tensors="pt")
        mine = module.batch_pixels([module.image_pixels(frames[i], vision) for i in pick])
        want = ref["pixel_values"].numpy()
        if mine.shape == want.shape and mine.tobytes() == want.tobytes():
            equal += 1
        else:
            differ += 1
            print(f"DIFF batch {[frames[i].shape[:2] for i in pick]}")
    return equal, differ


def onevision_clips(ctx: Ctx) -> tuple[int, int]:
    """Random numpy clips (no codec) sampled with ``sample_indices`` and compared through
    ``AutoVideoProcessor`` on the same frames."""
    import torch
    from transformers import AutoVideoProcessor

    from mmctl.models import llava_onevision as onevision

    hf_video = AutoVideoProcessor.from_pretrained(ctx.folder)
    vision = _llava_vision(ctx)
    equal = differ = 0
    for _ in range(ctx.args.clips):
        total = int(ctx.rng.integers(1, 80))
        h, w = int(ctx.rng.integers(1, 700)), int(ctx.rng.integers(1, 700))
        clip = np.stack([noisy_content(ctx.rng, h, w) for _ in range(total)])
        indices = onevision.sample_indices(total)
        sampled = clip[indices]
        ref = hf_video(
            videos=[torch.from_numpy(sampled).permute(0, 3, 1, 2).contiguous()],
            do_sample_frames=False,
            return_tensors="pt",
        )["pixel_values_videos"].numpy()
        mine = onevision.video_pixels(sampled, vision)[None]
        ok = mine.shape == ref.shape and mine.tobytes() == ref.tobytes()
        if ok and len(indices) == min(total, onevision.NUM_FRAMES):
            equal += 1
        else:
            differ += 1
            print(f"DIFF clip {total} frames {dimensions(w, h)}")
    return equal, differ


# ---- Llama 4 ----


def _random_side(rng: np.random.Generator, top: int = 2000) -> int:
    return int(np.clip(round(math.exp(rng.uniform(0, math.log(top)))), 1, top))


def _llama4_size(rng: np.random.Generator) -> tuple[int, int]:
    kind = rng.random()
    if kind < 0.15:  # extreme strips
        long, short = int(rng.integers(300, 2001)), int(rng.integers(1, 12))
        return (long, short) if rng.random() < 0.5 else (short, long)
    if kind < 0.25:  # tiny
        return int(rng.integers(1, 40)), int(rng.integers(1, 40))
    return _random_side(rng), _random_side(rng)


def _llama4_image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    kind = rng.integers(0, 3)
    if kind == 0:
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    if kind == 1:
        cell = int(rng.integers(1, 17))
        blocks = rng.integers(0, 256, (h // cell + 1, w // cell + 1, 3), dtype=np.uint8)
        return np.ascontiguousarray(np.repeat(np.repeat(blocks, cell, 0), cell, 1)[:h, :w])
    y = np.linspace(0, 255, h, dtype=np.float32)[:, None, None]
    x = np.linspace(0, 255, w, dtype=np.float32)[None, :, None]
    mix = rng.random(3).astype(np.float32)
    image = (y * mix + x * (1 - mix)) % 256
    noise = rng.integers(-8, 9, (h, w, 3))
    return np.clip(image + noise, 0, 255).astype(np.uint8)


def llama4_images(ctx: Ctx) -> tuple[int, int]:
    """HF's image processor and ``mmctl.models.llama4``: the bfloat16 tiles (widened)
    bit for bit, the aspect ratio equal to vLLM's (``get_best_fit`` as
    ``_postprocess_hf_mm_data`` calls it), the prompt ids equal to HF's
    ``_prompt_split_image`` tokenized."""
    import torch
    from PIL import Image
    from transformers.models.llama4.image_processing_llama4 import (
        SizeDict,
        find_supported_resolutions,
        get_best_fit,
    )

    from mmctl.models import llama4

    processor = ctx.processor()
    ip = processor.image_processor

    model = ctx.model()
    vision, tokens = model.params, model.token_ids
    tile = 336
    resolutions = torch.tensor(
        find_supported_resolutions(
            max_num_chunks=ip.max_patches, patch_size=SizeDict(height=tile, width=tile)
        )
    )
    equal = differ = 0
    for n in range(ctx.args.images):
        h, w = _llama4_size(ctx.rng)
        rgb = _llama4_image(ctx.rng, h, w)
        ref = ip(images=[Image.fromarray(rgb)], return_tensors="pt")["pixel_values"]
        ref_f32 = ref.to(torch.float32).numpy()
        best = get_best_fit((h, w), resolutions, resize_to_max_canvas=ip.resize_to_max_canvas)
        ref_ratio = (int(best[0]) // tile, int(best[1]) // tile)
        text = processor._prompt_split_image(aspect_ratio=ref_ratio, num_patches_per_chunk=144)
        ref_ids = processor.tokenizer(text, add_special_tokens=False)["input_ids"]
        tiles, ratio = llama4.image_tiles(rgb, vision)
        ids = llama4.image_token_ids(ratio, tokens, patches_per_tile=vision.patches_per_tile)
        same = (
            str(ref.dtype) == "torch.bfloat16"
            and tiles.shape == ref_f32.shape
            and tiles.tobytes() == np.ascontiguousarray(ref_f32).tobytes()
            and ratio == ref_ratio
            and llama4.patches_per_image(ratio) == ref.shape[0]
            and ids == ref_ids
        )
        if same:
            equal += 1
        else:
            differ += 1
            detail = ""
            if tiles.shape == ref_f32.shape:
                detail = f"max |diff| {np.abs(tiles - ref_f32).max()}"
            print(
                f"DIFF image {n}: {dimensions(w, h)}: shape {tiles.shape} vs "
                f"{tuple(ref_f32.shape)}, ratio {ratio} vs {ref_ratio}, "
                f"ids equal {ids == ref_ids} {detail}"
            )
    return equal, differ


def llama4_sizes(ctx: Ctx) -> tuple[int, int]:
    """HF's ``_preprocess`` size lines, verbatim in effect, against ``resized_size``
    (no pixels: cheap), on ``--sizes`` random pairs, every pair up to 59x59 and the
    sizes where float64 throughout would be one pixel off HF's float32, both canvases."""
    import torch
    from transformers.models.llama4.image_processing_llama4 import (
        SizeDict,
        find_supported_resolutions,
        get_best_fit,
        get_max_res_without_distortion,
    )

    from mmctl.models import llama4

    size = SizeDict(height=336, width=336)
    resolutions = torch.tensor(find_supported_resolutions(max_num_chunks=16, patch_size=size))
    equal = differ = 0
    pairs = [_llama4_size(ctx.rng) for _ in range(ctx.args.sizes)]
    pairs += [(h, w) for h in range(1, 60) for w in range(1, 60)]
    pairs += [(1420, 1065), (1700, 1275), (1775, 1065), (1868, 1401), (1920, 1450), (2065, 1121)]
    for resize_to_max_canvas in (False, True):
        vision = llama4.Vision(resize_to_max_canvas=resize_to_max_canvas)
        for h, w in pairs:
            target = get_best_fit((h, w), resolutions, resize_to_max_canvas=resize_to_max_canvas)
            cap = None if resize_to_max_canvas else size.height
            if cap is not None:
                bound = (min(max(h, cap), target[0]), min(max(w, cap), target[1]))
            else:
                bound = target
            new = get_max_res_without_distortion((h, w), bound)
            ref = ((int(target[0]), int(target[1])), (max(int(new[0]), 1), max(int(new[1]), 1)))
            if llama4.resized_size(h, w, vision) == ref:
                equal += 1
            else:
                differ += 1
                print(
                    f"DIFF size {dimensions(w, h)} (max canvas {resize_to_max_canvas}): "
                    f"{llama4.resized_size(h, w, vision)} vs HF {ref}"
                )
    return equal, differ


def llama4_resize(ctx: Ctx) -> tuple[int, int]:
    """``resize_rgb(filter="bilinear")`` (compiled and numpy passes) against torchvision's
    uint8 antialiased bilinear on ``--pairs`` random (source, target) pairs. torch 2.14's
    AVX kernel asserts on a 1x1 target; such pairs are listed as refused and not counted
    (Llama 4 never resizes to 1x1: one side always fills)."""
    import torch
    from torchvision.transforms.v2 import functional as F

    from mmctl.preprocessing import resize

    rng = ctx.rng
    equal = differ = 0
    native = resize._native
    print(f"  (mmctl compiled passes: {resize.native()})")
    for n in range(ctx.args.pairs):
        top = 700 if n % 5 else 2000
        h, w = _random_side(rng, top), _random_side(rng, top)
        th, tw = _random_side(rng, top), _random_side(rng, top)
        if n % 7 == 0:
            th = h  # one axis only
        rgb = _llama4_image(rng, h, w)
        tensor = torch.from_numpy(rgb).permute(2, 0, 1).contiguous()
        try:
            ref = F.resize(
                tensor, [th, tw], interpolation=F.InterpolationMode.BILINEAR, antialias=True
            )
        except RuntimeError as exc:  # torch's own internal asserts (reported, not counted)
            first = str(exc).splitlines()[0][:120]
            print(f"  torch refused {dimensions(w, h)} -> {dimensions(tw, th)}: {first}")
            continue
        ref_hwc = ref.permute(1, 2, 0).numpy()
        ours = resize.resize_rgb(rgb, th, tw, filter="bilinear")
        resize._native = None
        try:
            ours_numpy = resize.resize_rgb(rgb, th, tw, filter="bilinear")
        finally:
            resize._native = native
        if np.array_equal(ours, ref_hwc) and np.array_equal(ours_numpy, ref_hwc):
            equal += 1
        else:
            differ += 1
            print(f"DIFF resize {dimensions(w, h)} -> {dimensions(tw, th)}")
    return equal, differ


# ---- Gemma 4 (gemma4_reference.py: transformers as vLLM drives it) ----


GEMMA4_PUBLISHED = 280


def _gemma4_sizes(rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    """Aspect ratios up to 1:400 (past the 1:280 where one side floors to nothing),
    sizes around multiples of 48."""
    fixed = [
        (1, 1), (1, 2), (2, 1), (3, 3), (16, 16), (47, 47), (48, 48), (49, 49), (1, 280),
        (1, 281), (3, 900), (900, 3), (2, 1000), (1000, 2), (1, 2000), (5, 2000), (803, 803),
        (804, 804), (768, 768), (480, 480), (624, 1008), (1008, 624), (48, 13440), (2000, 3000),
        (3000, 2000), (61, 97), (10, 20), (900, 1400), (650, 1000), (1080, 1920), (1920, 1080),
    ]  # fmt: skip
    out = list(fixed)
    while len(out) < count:
        kind = rng.integers(4)
        if kind == 0:  # anything, log-uniform
            h, w = (int(np.exp(rng.uniform(0, np.log(3000)))) for _ in range(2))
        elif kind == 1:  # extreme aspect
            short = int(rng.integers(1, 40))
            long = int(min(3000, short * rng.uniform(20, 400)))
            h, w = (short, long) if rng.integers(2) else (long, short)
        elif kind == 2:  # around multiples of 48
            h, w = (int(48 * rng.integers(1, 40) + rng.integers(-2, 3)) for _ in range(2))
        else:  # photo-like
            h, w = int(rng.integers(200, 3000)), int(rng.integers(200, 3000))
        out.append((max(1, h), max(1, w)))
    return out[:count]


def _gemma4_models(ctx: Ctx) -> dict[int, Model]:
    """The published folder, and a copy per other budget with ``max_soft_tokens`` and
    ``default_output_length`` both set to it (a server started with that
    ``mm_processor_kwargs``)."""
    from mmctl.models import gemma4

    if "budgets" in ctx.state:
        return ctx.state["budgets"]
    out = {GEMMA4_PUBLISHED: ctx.model()}
    for budget in gemma4.SUPPORTED_SOFT_TOKENS:
        if budget == GEMMA4_PUBLISHED:
            continue
        folder = ctx.tmp / f"budget-{budget}"
        shutil.copytree(ctx.folder, folder)
        processor = json.loads((folder / "processor_config.json").read_text())
        processor["image_processor"]["max_soft_tokens"] = budget
        (folder / "processor_config.json").write_text(json.dumps(processor))
        config = json.loads((folder / "config.json").read_text())
        config["vision_config"]["default_output_length"] = budget
        (folder / "config.json").write_text(json.dumps(config))
        out[budget] = load_model(model_dir=folder)
    ctx.state["budgets"] = out
    return out


def _gemma4_hf_images(processor: Any, frames: list[np.ndarray], budget: int) -> dict:
    from PIL import Image

    pils = [Image.fromarray(f) for f in frames]
    if budget == GEMMA4_PUBLISHED:
        return gemma4_ref.image_features(processor, pils)
    out = processor(
        text="".join("\t" + processor.image_token for _ in pils),
        images=pils,
        max_soft_tokens=budget,
        return_tensors="pt",
    )
    return {
        "pixel_values": out["pixel_values"],
        "pixel_position_ids": out["image_position_ids"],
        "num_soft_tokens_per_image": gemma4_ref._counts(processor, out["image_position_ids"]),
    }


def gemma4_images(ctx: Ctx) -> tuple[int, int]:
    """At the published budget and a random other supported one, alone and in
    ``--batches`` multi-image calls: float32 ``pixel_values`` and int64
    ``pixel_position_ids`` bit for bit, the token count equal to vLLM's formula and to
    the encoder's (HF's real patches / 9). Where vLLM's prompt count differs from its
    encoder's (vLLM would fail the request), mmctl must refuse."""
    from PIL import Image

    from mmctl.models import gemma4

    processor = ctx.processor()
    config = json.loads((ctx.folder / "config.json").read_text())
    by_budget = _gemma4_models(ctx)
    rng = ctx.rng
    others = [b for b in gemma4.SUPPORTED_SOFT_TOKENS if b != GEMMA4_PUBLISHED]
    equal = differ = vllm_fails = 0
    written: list[tuple[np.ndarray, Path]] = []
    for n, (h, w) in enumerate(_gemma4_sizes(rng, ctx.args.images)):
        frame = noisy_content(rng, h, w)
        path = ctx.tmp / f"{n}.png"
        Image.fromarray(frame).save(path)
        written.append((frame, path))
        for budget in (GEMMA4_PUBLISHED, int(rng.choice(others))):
            pre = preprocess(by_budget[budget], path, MediaKind.IMAGE)
            try:
                want = _gemma4_hf_images(processor, [frame], budget)
            except ValueError as err:  # HF refuses: mmctl must refuse too
                ok = isinstance(pre, InputError)
                equal += ok
                differ += not ok
                if not ok:
                    print(f"DIFF {dimensions(w, h)}@{budget}: HF refuses ({err}), mmctl does not")
                continue
            encoder = want["num_soft_tokens_per_image"][0]
            prompt = gemma4_ref.soft_tokens(config, h, w, budget)
            if prompt != encoder:  # vLLM would fail the request: mmctl refuses it
                vllm_fails += 1
                ok = isinstance(pre, InputError)
            else:
                ok = (
                    not isinstance(pre, InputError)
                    and pre.pixel_values.tobytes() == want["pixel_values"][0].numpy().tobytes()
                    and pre.item_tensors["pixel_position_ids"].tobytes()
                    == want["pixel_position_ids"][0].numpy().tobytes()
                    and pre.num_tokens == prompt
                )
            equal += ok
            differ += not ok
            if not ok:
                print(f"DIFF {dimensions(w, h)}@{budget}: {pre!r:.100}")
    model = by_budget[GEMMA4_PUBLISHED]
    for _ in range(ctx.args.batches):  # several images in one call: vLLM's image batch
        picked = [written[int(i)] for i in rng.choice(len(written), size=int(rng.integers(2, 5)))]
        pres = [preprocess(model, path, MediaKind.IMAGE) for _, path in picked]
        want = _gemma4_hf_images(processor, [frame for frame, _ in picked], GEMMA4_PUBLISHED)
        ok = not any(isinstance(p, InputError) for p in pres) and (
            model.spec.wire.batch_pixels(MediaKind.IMAGE, [p.pixel_values for p in pres]).tobytes()
            == want["pixel_values"].numpy().tobytes()
        )
        equal += ok
        differ += not ok
    for _, path in written:
        path.unlink()
    print(f"  ({ctx.args.images} sizes x 2 budgets + {ctx.args.batches} multi-image calls; "
          f"where vLLM's prompt count != its encoder's, mmctl refused: {vllm_fails})")  # fmt: skip
    return equal, differ


GEMMA4_RATES = (Fraction(1), Fraction(5, 2), Fraction(8), Fraction(24000, 1001), Fraction(30),
                Fraction(60000, 1001))  # fmt: skip


def gemma4_clips(ctx: Ctx) -> tuple[int, int]:
    """The kept frames (vLLM's default loader), every frame tensor, the timestamps and the
    replacement ids equal HF's / vLLM's."""
    from mmctl.models import gemma4

    processor = ctx.processor()
    config = json.loads((ctx.folder / "config.json").read_text())
    model = _gemma4_models(ctx)[GEMMA4_PUBLISHED]
    rng = ctx.rng
    equal = differ = 0
    for n in range(ctx.args.clips):
        total = int(rng.integers(1, 120))
        rate = GEMMA4_RATES[int(rng.integers(len(GEMMA4_RATES)))]
        h, w = int(rng.integers(8, 400)), int(rng.integers(8, 400))
        clip = np.stack([noisy_content(rng, h, w) for _ in range(total)])
        path = ctx.tmp / f"{n}.avi"
        write_clip(path, clip, rate)
        pre = preprocess(model, path, MediaKind.VIDEO)
        problems = []
        if isinstance(pre, InputError):
            problems.append(f"mmctl refused: {pre}")
        else:
            fps = float(rate)
            want_indices = (
                np.arange(total) if total <= 32 else np.linspace(0, total - 1, 32, dtype=int)
            )
            ours = pre.frame_indices
            parts = gemma4_ref.video_features(processor, clip[want_indices])
            stamps = gemma4_ref.timestamps(want_indices.tolist(), fps)
            want_ids = gemma4_ref.video_replacement(
                processor.tokenizer, config, stamps, parts["num_soft_tokens_per_frame"]
            )
            if pre.source.total_frames != total or pre.source.source_fps != fps:
                problems.append(
                    f"decoded {pre.source.total_frames} frames at {pre.source.source_fps}"
                )
            elif not _lossless(path, clip, ours.tolist()):
                problems.append(LOSSY)
            if not np.array_equal(ours, want_indices):
                problems.append(f"frames {ours[:6].tolist()}.. vs {want_indices[:6].tolist()}..")
            elif pre.pixel_values.tobytes() != parts["pixel_values_videos"].numpy().tobytes():
                problems.append("pixels")
            elif (
                pre.item_tensors["pixel_position_ids_videos"].tobytes()
                != parts["pixel_position_ids_videos"].numpy().tobytes()
            ):
                problems.append("positions")
            if list(pre.patch_times) != stamps:
                problems.append(f"timestamps {list(pre.patch_times)[:3]}.. vs {stamps[:3]}..")
            elif gemma4.replacement(pre.facts, model) != want_ids:
                problems.append("replacement ids")
        if problems:
            differ += 1
            _report_clip(problems, clip, float(rate))
        else:
            equal += 1
        path.unlink()
    return equal, differ


# ---- InternVL (transformers format) as vLLM 0.33's interns1.py drives it ----


#: (h, w) where InternVL's tiling turns: exact grid ratios, the half-area ties
#: (a square over 633.57 px takes 2x2, over 950.35 px 3x3; 2:1 over 633.57 px
#: high takes 4x2; 1:3 over 633.57 px high 2x6), 1:12 strips and tiny images.
INTERNVL_SIZES = [
    (1, 1), (1, 2), (2, 1), (3, 3), (448, 448), (447, 449), (449, 447),
    (633, 633), (634, 634), (950, 950), (951, 951), (1344, 1344),
    (633, 1266), (634, 1268), (1266, 633), (1268, 634), (634, 1902), (633, 1899),
    (1902, 634), (448, 896), (896, 448), (448, 1344), (1344, 448), (448, 5376),
    (1, 12), (12, 1), (5, 60), (60, 5), (30, 400), (400, 30), (100, 150), (150, 100),
    (300, 400), (400, 300), (600, 800), (1080, 1920), (1920, 1080), (2000, 2000),
]  # fmt: skip


def internvl_processor(ctx: Ctx) -> Any:
    """``InternS1ProcessingInfo.get_hf_processor``: the folder's ``InternVLProcessor``,
    its video processor rebuilt with the image processor's size."""
    if "vllm_processor" not in ctx.state:
        from transformers.models.internvl.video_processing_internvl import (
            InternVLVideoProcessor,
        )

        processor = ctx.processor()
        processor.video_processor = InternVLVideoProcessor.from_pretrained(
            str(ctx.folder), size=processor.image_processor.size
        )
        ctx.state["vllm_processor"] = processor
    return ctx.state["vllm_processor"]


def internvl_images(ctx: Ctx) -> tuple[int, int]:
    """Called as ``InternS1MultiModalProcessor`` calls it (once per image, text
    ``<IMG_CONTEXT>``): float32 ``pixel_values`` bit for bit, the patch count
    (``<IMG_CONTEXT>`` runs / 256) equal to ``num_patches``, the family's replacement
    equal to HF's ids; mmctl's side from a PNG through the family."""
    from PIL import Image

    from mmctl.models import internvl

    processor, model = internvl_processor(ctx), ctx.model()
    assert model.spec is internvl.FAMILY
    shapes = INTERNVL_SIZES + anyres_sizes(ctx.rng, max(0, ctx.args.images - len(INTERNVL_SIZES)))
    frames = [noisy_content(ctx.rng, h, w) for h, w in shapes[: ctx.args.images]]
    seq = processor.image_seq_length
    equal = differ = 0
    for n, frame in enumerate(frames):
        h, w = frame.shape[:2]
        ref = processor(
            text=processor.image_token, images=Image.fromarray(frame), return_tensors="pt"
        )
        want = ref["pixel_values"].numpy()
        ids = ref["input_ids"][0].numpy()
        hf_patches = int(np.count_nonzero(ids == processor.image_token_id)) // seq
        path = ctx.tmp / f"{n}.png"
        Image.fromarray(frame).save(path)
        pre = preprocess(model, path, MediaKind.IMAGE)
        path.unlink()
        mine = pre.pixel_values
        pixels_ok = mine.shape == want.shape and mine.tobytes() == want.tobytes()
        count_ok = internvl.num_patches(h, w, model.params) == hf_patches == pre.facts.rows
        repl_ok = ids.tolist() == internvl.replacement(pre.facts, model)
        if pixels_ok and count_ok and repl_ok:
            equal += 1
        else:
            differ += 1
            print(
                f"DIFF {dimensions(w, h)}: pixels {'ok' if pixels_ok else 'DIFFER'}, patches "
                f"{pre.facts.rows} vs HF {hf_patches}, ids {'ok' if repl_ok else 'DIFFER'}"
            )
    return equal, differ


def internvl_clips(ctx: Ctx) -> tuple[int, int]:
    """Numpy clips (no codec) through the family's frame choice and video item; the
    replacement ids equal vLLM's text (``Frame{i}: <img>`` + ``<video>`` x 256 +
    ``</img>`` per frame) tokenized by transformers."""
    from mmctl.models import internvl
    from mmctl.values.items import ItemFacts

    processor, model = internvl_processor(ctx), ctx.model()
    family, vision = internvl.FAMILY, model.params
    seq = processor.image_seq_length
    lengths = [1, 2, 31, 32, 33, 100]
    equal = differ = 0
    for n in range(ctx.args.clips):
        total = lengths[n] if n < len(lengths) else int(ctx.rng.integers(1, 120))
        h, w = int(ctx.rng.integers(2, 700)), int(ctx.rng.integers(2, 700))
        clip = np.stack([noisy_content(ctx.rng, h, w) for _ in range(total)])
        assert family.processor.sample_indices is not None
        indices = family.processor.sample_indices(total, 30.0, vision)  # (total, fps, settings)
        sampled = clip[indices]
        ref = processor(text=processor.video_token, videos=sampled, return_tensors="pt")
        want = ref["pixel_values"].numpy()
        item = internvl.video_item(sampled, vision)
        pixels_ok = item.pixels.shape == want.shape and item.pixels.tobytes() == want.tobytes()
        frame = (
            processor.start_image_token + processor.video_token * seq + processor.end_image_token
        )
        text = "\n".join(f"Frame{i + 1}: {frame}" for i in range(len(indices)))
        vllm_ids = processor.tokenizer(text, add_special_tokens=False)["input_ids"]
        facts = ItemFacts(MediaKind.VIDEO, item.tokens, extra=item.extra, rows=item.rows)
        ids_ok = internvl.replacement(facts, model) == vllm_ids
        count_ok = len(indices) == min(total, vision.num_frames) == len(want) == item.rows
        if pixels_ok and ids_ok and count_ok:
            equal += 1
        else:
            differ += 1
            print(
                f"DIFF clip {total} frames {dimensions(w, h)}: pixels "
                f"{'ok' if pixels_ok else 'DIFFER'}, ids {'ok' if ids_ok else 'DIFFER'}, "
                f"frames {len(indices)}"
            )
    return equal, differ


# ---- Nemotron-3-Nano-Omni: vLLM's own NanoNemotronVLProcessor (the engine environment) ----

#: Images that shrink (over the 13312-patch budget), beside the random ones.
NEMOTRON_LARGE = [(2000, 1500), (3000, 400), (1900, 1900), (2500, 2600), (120, 2900), (4000, 3000)]


def nemotron_images(ctx: Ctx) -> tuple[int, int]:
    """``mmctl.models.nemotron_h_omni`` (not a registered family: its pure functions)
    against vLLM's processor for the folder: N random sizes and the six large ones, each
    a small random image enlarged (edges for the filters), saved as PNG and read back by
    mmctl's loader and by PIL for vLLM; ``imgs_sizes`` and the bfloat16 pixel bits equal."""
    import torch
    from PIL import Image
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    from mmctl.media.image import load_image
    from mmctl.models import nemotron_h_omni as nemo

    proc, _ = nemotron_vllm_processor(FAMILIES / ctx.family)
    tok = proc.info.get_tokenizer()
    prompt = tok.encode("<|im_start|>user\n<image>\nHi<|im_end|>\n", add_special_tokens=False)
    sizes = [
        (int(ctx.rng.integers(8, 900)), int(ctx.rng.integers(8, 900)))
        for _ in range(ctx.args.loaders)
    ]
    equal = differ = 0
    for n, (h, w) in enumerate([*sizes, *NEMOTRON_LARGE]):
        small = ctx.rng.integers(0, 256, size=(max(2, h // 8), max(2, w // 8), 3), dtype=np.uint8)
        path = ctx.tmp / f"{n:03d}.png"
        Image.fromarray(small).resize((w, h), Image.BILINEAR).save(path)
        with Image.open(path) as image:
            items = proc.info.parse_mm_data({"image": [image.convert("RGB")]})
        result = proc.apply(ProcessorInputs(prompt=prompt, mm_data_items=items), TimingContext())
        item = result["mm_kwargs"]["image"][0]
        want = item["pixel_values_flat"].data.contiguous().view(torch.int16).numpy()
        rgb = load_image(path)[1]
        (grid,) = nemo.image_grids([rgb.shape[:2]], 0)
        got = nemo.image_pixels(rgb, grid)
        problems = []
        if [grid[0] * 16, grid[1] * 16] != [int(x) for x in item["imgs_sizes"].data]:
            problems.append(f"imgs_sizes {grid} vs {item['imgs_sizes'].data.tolist()}")
        if got.tobytes() != want.tobytes():
            problems.append("pixel bits")
        if problems:
            differ += 1
            print(f"DIFF {dimensions(w, h)}: {', '.join(problems)}", flush=True)
        else:
            equal += 1
    return equal, differ


#: Rates for the clips: whole, NTSC and fractional, above and below the 2-frame tubelet.
NEMOTRON_RATES = (Fraction(1), Fraction(2), Fraction(5), Fraction(10), Fraction(25, 2),
                  Fraction(24000, 1001), Fraction(25), Fraction(30000, 1001), Fraction(60))  # fmt: skip
#: (frames, height, width) first: one frame, an odd count under the 32-frame cap, the cap
#: and one past it, a long clip, a thin one, and two larger than 1024 patches (they shrink).
NEMOTRON_FIXED_CLIPS = [(1, 37, 53), (7, 64, 64), (32, 45, 91), (33, 90, 31), (157, 27, 41),
                        (12, 17, 199), (9, 700, 533), (40, 611, 887)]  # fmt: skip


def _nemotron_clip(ctx: Ctx, n: int) -> tuple[Path, np.ndarray, Fraction]:
    """The fixed shapes first, then random ones: 1-120 frames (past the cap about
    three times in four), 16-300 px sides, one clip in six 500-900 px (at most 40 frames)."""
    rate = NEMOTRON_RATES[int(ctx.rng.integers(len(NEMOTRON_RATES)))]
    if n < len(NEMOTRON_FIXED_CLIPS):
        total, h, w = NEMOTRON_FIXED_CLIPS[n]
    elif ctx.rng.integers(6) == 0:
        total, h, w = (int(x) for x in ctx.rng.integers((1, 500, 500), (41, 901, 901)))
    else:
        total, h, w = (int(x) for x in ctx.rng.integers((1, 16, 16), (121, 301, 301)))
    clip = np.stack([noisy_content(ctx.rng, h, w) for _ in range(total)])
    path = ctx.tmp / f"{n}.avi"
    write_clip(path, clip, rate)
    return path, clip, rate


def _nemotron_problems(record: dict, composed: Any, control: bool) -> list[str]:
    """mmctl's request against vLLM's record (``make_family_fixtures.nemotron_record``):
    what tests/compat/test_nemotron_requests.py compares for the goldens."""
    from mmctl.request import tensors

    req = composed.plan.to_proto()
    video = req.mm_inputs

    def tensor(key: str) -> list[int]:
        td = video.model_specific_tensors[key]
        return tensors.from_bytes(td.inline, td.shape, td.dtype).tolist()

    pixels = bytes(video.pixel_values.inline)
    if control:  # the negative control: the last bit of one bfloat16 value flipped
        pixels = pixels[:-1] + bytes([pixels[-1] ^ 1])
    problems = []
    if composed.rendered.text != str(record["text"]):
        problems.append("chat text")
    ids = list(req.tokenized.input_ids)
    want_ids = record["vllm_input_ids"].tolist()
    if ids != want_ids:
        at = next((i for i, (a, b) in enumerate(zip(ids, want_ids, strict=False)) if a != b), None)
        problems.append(f"ids ({len(ids)} vs {len(want_ids)}, first difference at {at})")
    if not composed.check.ok:
        problems.append(f"mmctl's check: {composed.check.reason}")
    spans = [[p.offset, p.length] for p in video.mm_placeholders]
    if spans != record["video_placeholders"].tolist():
        problems.append(f"spans {spans} vs {record['video_placeholders'].tolist()}")
    shape = record["video0_pixels_shape"].tolist()
    if list(video.pixel_values.shape) != shape:
        problems.append(f"pixel shape {list(video.pixel_values.shape)} vs {shape}")
    elif video.pixel_values.dtype != str(record["video0_pixels_dtype"]):
        problems.append(f"pixel dtype {video.pixel_values.dtype}")
    elif hashlib.sha256(pixels).hexdigest() != str(record["video0_pixels_sha256"]):
        problems.append("pixel bits")
    for key in ("video_num_patches", "frame_duration_ms"):
        if tensor(key) != record[key].tolist():
            problems.append(f"{key} {tensor(key)} vs {record[key].tolist()}")
    if tensor("frames_indices") != record["video0_indices"].tolist():
        problems.append(f"frames_indices {tensor('frames_indices')[:6]}…")
    if video.encoder_input_key != "pixel_values_flat_video":
        problems.append(f"encoder_input_key {video.encoder_input_key}")
    return problems


def vllm_033_opencv() -> None:
    """vLLM 0.33.0's OpenCV decoder (``video_decoders/opencv.py`` from ``$MMCTL_VLLM_SRC``,
    run unchanged) in place of the engine env's 0.32 one, whose only difference is the
    metadata: 0.33 reads it on a capture of its own (0.32 seeks the reading capture to the
    end and back, which loses the one frame of a 1-frame AVI) and counts frames by
    demuxing when the header has none. ``decode_video`` looks its decoder up on the
    module at each call, so replacing the module's names is enough."""
    import importlib

    from families.vllm_source import vllm_source

    inside = "vllm/multimodal/video_decoders/opencv.py"
    path = vllm_source(inside) / inside
    module = importlib.import_module("vllm.multimodal.video_decoders.opencv")
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)


def nemotron_clips(ctx: Ctx) -> tuple[int, int]:
    """mmctl's request for a random clip (``compose``, what ``mmctl build`` does, bfloat16
    as served) against vLLM's own ``NanoNemotronVLMultiModalProcessor`` on the same file,
    loaded as vLLM 0.33 loads it (``VideoMediaIO(num_frames=32)``, its OpenCV decoder:
    ``vllm_033_opencv``) and driven as the
    goldens' maker drives it (``nemotron_record``): chat text, prompt ids, placeholder
    spans, ``pixel_values_flat_video`` (bits' sha256, shape), ``video_num_patches``,
    ``frames_indices``, ``frame_duration_ms``. Both decoders' frames must be the written
    ones (else the codec, not mmctl, differs). ``--control`` flips one pixel bit of
    mmctl's: every clip must then differ."""
    from make_family_fixtures import PROMPT, nemotron_record

    from mmctl.request.compose import compose

    vllm_033_opencv()
    model = ctx.model()
    proc, max_model_len = nemotron_vllm_processor(ctx.folder)
    equal = differ = 0
    for n in range(ctx.args.loaders):
        path, clip, rate = _nemotron_clip(ctx, n)
        try:
            record = nemotron_record(proc, max_model_len, ("v:clip",), "", lambda _, p=path: p)
        except ValueError as err:  # the processor's refusal (e.g. no frame decoded)
            problems = [f"vLLM refused: {str(err)[:200]}"]
        else:
            kept = record["video0_indices"].tolist()
            if str(record["video0_frames_sha256"]) != sha(clip[kept]):
                problems = ["vLLM's decoded frames are not the written ones (the codec)"]
            elif not _lossless(path, clip, kept):
                problems = [LOSSY]
            else:
                composed = compose([path], PROMPT, model, pixel_format=PixelFormat.BFLOAT16)
                problems = _nemotron_problems(record, composed, ctx.args.control)
        if problems:
            differ += 1
            if not ctx.args.control:
                _report_clip(problems, clip, float(rate))
        else:
            equal += 1
        path.unlink()
    if ctx.args.control:  # the control passes when nothing is equal
        print(f"  (control: {differ} of {equal + differ} differ, as they must)")
        return differ, equal
    return equal, differ


# ---- Kimi-K2.5: vLLM's own KimiK25FusedVisionProcessor (the engine environment) ----


def _kimi_sizes(rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    """Sizes from 1 px to past the 16384-patch budget and the 512-patch side limit."""
    fixed = [(1, 1), (1, 700), (700, 1), (13, 15), (28, 28), (29, 27), (2000, 1800), (64, 9000)]
    out = fixed[:count]
    while len(out) < count:
        kind = rng.integers(4)
        if kind == 0:  # small, odd
            out.append((int(rng.integers(1, 120)), int(rng.integers(1, 120))))
        elif kind == 1:  # typical
            out.append((int(rng.integers(100, 1400)), int(rng.integers(100, 1400))))
        elif kind == 2:  # past the patch budget
            out.append((int(rng.integers(1500, 2600)), int(rng.integers(1500, 2600))))
        else:  # long and thin: the per-side limit
            side = int(rng.integers(7200, 9000))
            thin = int(rng.integers(20, 200))
            out.append((side, thin) if rng.integers(2) else (thin, side))
    return out


def kimi_images(ctx: Ctx) -> tuple[int, int]:
    """``mmctl.models.kimi_k25`` against vLLM's ``KimiK25FusedVisionProcessor``: the uint8
    patches (device normalization on), the float32 patches (off), ``grid_thws`` and the
    token count (``media_tokens_calculator``), bit for bit. ``--control`` shifts mmctl's
    table by one float32 step: every image must then differ (and equal ones count as
    differences)."""
    from PIL import Image
    from vllm.transformers_utils.processors.kimi_k25_vision_fused import (
        KimiK25FusedVisionProcessor,
    )

    from mmctl.models import kimi_k25

    vllm_proc = KimiK25FusedVisionProcessor(media_proc_cfg=KIMI_MEDIA_PROC_CFG)
    settings = kimi_k25.KimiK25Settings()
    table = kimi_k25.normalize_table(settings)
    if ctx.args.control:
        table = np.nextafter(table, np.float32(np.inf))
    equal = differ = 0
    for height, width in _kimi_sizes(ctx.rng, ctx.args.loaders):
        rgb = ctx.rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        media = {"type": "image", "image": Image.fromarray(rgb, mode="RGB")}
        tokens = vllm_proc.media_tokens_calculator(dict(media))
        raw_v = vllm_proc.preprocess([dict(media)], do_rescale=False, do_normalize=False)
        norm_v = vllm_proc.preprocess([dict(media)])
        raw, grid = kimi_k25.image_pixels(rgb, settings, normalize=False)
        norm = table[raw, np.arange(3)[None, :, None, None]]
        problems = []
        if tokens != len(kimi_k25.replacement_ids(height, width, settings)):
            problems.append(f"tokens {tokens}")
        if raw_v["grid_thws"].tolist() != [list(grid)]:
            problems.append(f"grid {raw_v['grid_thws'].tolist()} != {grid}")
        if not np.array_equal(raw_v["pixel_values"].numpy(), raw):
            problems.append("uint8 patches")
        got = norm_v["pixel_values"].numpy()
        if got.dtype != norm.dtype or got.tobytes() != norm.tobytes():
            problems.append("float32 patches")
        if problems:
            differ += 1
            if not ctx.args.control:
                print(f"DIFF {dimensions(width, height)}: {', '.join(problems)}", flush=True)
        else:
            equal += 1
    if ctx.args.control:  # the control passes when nothing is equal
        print(f"  (control: {differ} of {equal + differ} differ, as they must)")
        return differ, equal
    return equal, differ


# ---- MiniMax-M3-VL: vLLM's own processor copy (minimax_m3_vl_golden.py) ----


def minimax_processor(ctx: Ctx) -> Any:
    """vLLM 0.33's vendored ``MiniMaxVLProcessor`` (``MMCTL_VLLM_SRC``), not transformers'."""
    if "processor" not in ctx.state:
        ctx.state["processor"] = minimax_m3_vl_golden.processor(ctx.folder)
    return ctx.state["processor"]


def minimax_images(ctx: Ctx) -> tuple[int, int]:
    """The patch-grid image check against vLLM's copy of the image processor."""
    minimax_processor(ctx)
    return grid_images(FLOAT32)(ctx)


MINIMAX_RATES = (Fraction(1), Fraction(2), Fraction(5), Fraction(10), Fraction(24000, 1001),
                 Fraction(25), Fraction(30))  # fmt: skip


def minimax_clips(ctx: Ctx) -> tuple[int, int]:
    """Clips handed to vLLM's copy of the video processor as vLLM drives it: the frames
    ``MiniMaxM3VideoBackend`` keeps (ported in minimax_m3_vl_golden.py), their metadata,
    ``do_resize=True``; rows, grid, frames kept and each patch's time equal mmctl's."""
    from transformers.video_utils import VideoMetadata

    model, processor = ctx.model(), minimax_processor(ctx)
    tps = int(processor.video_processor.temporal_patch_size)
    differ = 0
    for n in range(ctx.args.clips):
        path, clip, rate = _random_clip(
            ctx, n, MINIMAX_RATES, lambda _n, r: int(ctx.rng.integers(1, int(r * 12) + 2))
        )
        total, fps = len(clip), float(rate)
        valid = minimax_m3_vl_golden.loader_indices(total, fps)
        pre = preprocess(model, path, MediaKind.VIDEO)
        problems = []
        if isinstance(pre, Exception):
            problems.append(f"mmctl refused ({pre})")
        elif not _lossless(path, clip, pre.frame_indices.tolist()):
            problems.append(LOSSY)
        else:
            meta = VideoMetadata(total_num_frames=total, fps=fps, duration=total / fps,
                                 video_backend="opencv", frames_indices=valid)  # fmt: skip
            out = processor.video_processor(
                videos=[clip[valid]], video_metadata=[meta], do_resize=True, return_tensors="pt"
            )
            grid = tuple(out["video_grid_thw"][0].tolist())
            last = len(valid) - 1
            times = [valid[min(i * tps, last)] / fps for i in range(grid[0])]
            if pre.frame_indices.tolist() != valid:
                problems.append(f"frames {pre.frame_indices.tolist()[:6]} vs {valid[:6]}")
            elif grid != pre.grid_thw:
                problems.append(f"grid {list(grid)} vs {list(pre.grid_thw)}")
            elif sha(out["pixel_values_videos"].numpy()) != sha(pre.pixel_values):
                problems.append("pixels")
            elif list(pre.patch_times) != times:
                problems.append(f"times {list(pre.patch_times)[:4]} vs {times[:4]}")
        if problems:
            differ += 1
            _report_clip(problems, clip, fps)
        path.unlink()
    return ctx.args.clips - differ, differ


def minimax_loader(ctx: Ctx) -> tuple[int, int]:
    """mmctl's frame choice against vLLM's own ``MiniMaxM3VideoBackend`` as
    ``VideoMediaIO`` calls it (``num_frames=32``, which it ignores; its fps default 1)."""
    from vllm.models.minimax_m3.common.mm_preprocess import MiniMaxM3VideoBackend
    from vllm.multimodal.video_decoders import VideoSourceMetadata, VideoTargetMetadata

    from mmctl.models import minimax_m3_vl

    fixed = [(1, 30.0), (3, 10.0), (6, 10.0), (7, 2.0), (41, 24000 / 1001), (1600, 4.0),
             (72000, 30.0), (90, 30000 / 1001), (0, 30.0)]  # fmt: skip
    cases = _loader_cases(ctx, fixed, 0.1)
    differ = 0
    for total, fps in cases:
        source = VideoSourceMetadata(total, fps, total / fps)
        target = VideoTargetMetadata(32, 1, 300)
        want = MiniMaxM3VideoBackend.compute_frames_index_to_sample(source, target)
        got = minimax_m3_vl.loader_indices(total, fps)
        if got != want:
            differ += 1
            print(f"DIFF {total} frames at {fps:.3f} fps: {got[:5]}… vs {want[:5]}…")
    return len(cases) - differ, differ


# ---- the table: a family is a row ----


#: Inkling's edge cases: widths on and around a multiple of the 40 px patch (one more
#: column always), scaling that hits the 2048 px cap exactly, sides of 1 px.
INKLING_SIZES = [(40, 40), (39, 41), (41, 80), (1, 1), (1, 1024), (1024, 1), (1024, 1024),
                 (1025, 700), (2048, 2048), (2049, 30), (61, 97)]  # fmt: skip


def inkling_images(ctx: Ctx) -> tuple[int, int]:
    """vLLM 0.33's image branch (``_rescale_image`` read from the wheel, ``$MMCTL_VLLM_SRC``,
    then the folder's ``InklingImageProcessor`` with ``rescale_image_frac=None``, then
    bfloat16) against mmctl's item from a PNG: pixels bit for bit and ``num_patches``."""
    import torch
    from PIL import Image

    from mmctl.models import inkling

    code, processor, model = inkling_golden.vllm_code(), ctx.processor(), ctx.model()
    assert model.spec is inkling.FAMILY
    image_processor = processor.image_processor
    frac = image_processor.rescale_image_frac or code["DEFAULT_RESCALE_IMAGE_FRAC"]
    cap = image_processor.rescale_image_max_upscaled_long_edge
    shapes = INKLING_SIZES + anyres_sizes(ctx.rng, max(0, ctx.args.images - len(INKLING_SIZES)))
    equal = differ = 0
    for n, (h, w) in enumerate(shapes[: ctx.args.images]):
        frame = noisy_content(ctx.rng, h, w)
        scaled = code["_rescale_image"](Image.fromarray(frame), frac, cap)
        ref = image_processor([scaled], rescale_image_frac=None, return_tensors="pt")
        want = ref["pixel_values"].to(torch.bfloat16).to(torch.float32).numpy()
        path = ctx.tmp / f"{n}.png"
        Image.fromarray(frame).save(path)
        pre = preprocess(model, path, MediaKind.IMAGE)
        path.unlink()
        if isinstance(pre, InputError):
            differ += 1
            print(f"DIFF {dimensions(w, h)}: mmctl refused: {pre.message}")
            continue
        mine = pre.pixel_values
        pixels_ok = mine.shape == want.shape and mine.tobytes() == want.tobytes()
        count_ok = pre.facts.tokens == int(ref["num_patches"][0])
        if pixels_ok and count_ok:
            equal += 1
        else:
            differ += 1
            print(
                f"DIFF {dimensions(w, h)}: pixels {'ok' if pixels_ok else 'DIFFER'}, patches "
                f"{pre.facts.tokens} vs {int(ref['num_patches'][0])}"
            )
    return equal, differ


ROWS: dict[str, tuple[Part, ...]] = {
    "llava": (Part("images", llava_images),),
    "llava_next": (Part("images", llava_images), Part("batches", llava_batches)),
    "llava_onevision": (
        Part("images", llava_images),
        Part("batches", llava_batches),
        Part("clips", onevision_clips),
    ),
    "llama4": (
        Part("images (tiles, aspect ratio, prompt ids)", llama4_images),
        Part("sizes (canvas, resized size)", llama4_sizes),
        Part("bilinear resize (compiled and numpy) vs torchvision", llama4_resize),
    ),
    "gemma4": (Part("images", gemma4_images), Part("clips", gemma4_clips)),
    "qwen3_5": (
        Part("images (float32 and uint8)", grid_images(BOTH_FORMS)),
        Part("clips (float32 and uint8)", qwen_clips),
        Part("loader vs Qwen3VLVideoBackend", qwen_loader, only="loaders"),
    ),
    "glm4v": (
        Part("images", grid_images(FLOAT32)),
        Part("clips", glm_clips),
        Part("loader vs DynamicVideoBackend", glm_loader, only="loaders"),
    ),
    "glm46v": (
        Part("images", grid_images(FLOAT32)),
        Part("clips", glm_clips),
        Part("loader vs GLM46VVideoBackend", glm_loader, only="loaders"),
    ),
    "glm5_next": (
        Part("images (float32 and uint8)", grid_images(BOTH_FORMS)),
        Part("clips (float32 and uint8)", glm5_next_clips),
        Part("loader and sampler vs Glm5NextVideoBackend", glm5_next_loader, only="loaders"),
    ),
    "internvl": (Part("images", internvl_images), Part("clips", internvl_clips)),
    "qwen3_omni_moe": (
        Part("images", grid_images(FLOAT32)),
        Part("clips", omni_clips),
        Part("loader vs Qwen2VLVideoBackend", omni_loader, only="loaders"),
    ),
    # No folder: the loader part alone, at mmctl's built-in Qwen2.5-VL settings.
    "qwen2_5_vl": (Part("loader vs Qwen2VLVideoBackend", qwen2_5_vl_loader, only="loaders"),),
    "kimi_k25": (Part("images vs KimiK25FusedVisionProcessor", kimi_images, only="loaders"),),
    "nemotron_h_omni": (
        Part("images vs NanoNemotronVLMultiModalProcessor", nemotron_images, only="loaders"),
        Part("clips vs NanoNemotronVLMultiModalProcessor", nemotron_clips, only="loaders"),
    ),
    "minimax_m3_vl": (
        Part("images (vLLM's processor copy)", minimax_images),
        Part("clips (vLLM's processor copy)", minimax_clips),
        Part("loader vs MiniMaxM3VideoBackend", minimax_loader, only="loaders"),
    ),
    "inkling": (
        Part("images vs vLLM 0.33's _rescale_image + InklingImageProcessor", inkling_images),
    ),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--family", action="append", choices=list(ROWS), help="only this family (repeatable)"
    )
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--batches", type=int, default=20, help="multi-image calls")
    parser.add_argument("--sizes", type=int, default=20000, help="Llama 4's size-only pairs")
    parser.add_argument("--pairs", type=int, default=600, help="Llama 4's resize pairs")
    parser.add_argument(
        "--loaders",
        type=int,
        default=0,
        metavar="N",
        help="instead, the parts that run vLLM's own code (engine env), N cases each",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="the negative controls (Kimi-K2.5's images, Nemotron's clips)",
    )
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args(argv)
    mode = "loaders" if args.loaders else None
    families = args.family or list(ROWS)

    if mode is None:
        import torch
        from transformers.utils import logging

        logging.set_verbosity_error()  # "channel dimension is ambiguous" on 1-3 px images
        torch.set_num_threads(1)
    total_equal = total_differ = 0
    with tempfile.TemporaryDirectory(prefix="mmctl-unseen-") as scratch:
        for family in families:
            parts = [p for p in ROWS[family] if p.only == mode]
            if not parts:
                continue
            # Each family's own stream: the same media whichever families run.
            rng = np.random.default_rng([args.seed, zlib.crc32(family.encode())])
            tmp = Path(scratch) / family
            tmp.mkdir()
            ctx = Ctx(family, args, rng, tmp)
            for part in parts:
                equal, differ = part.check(ctx)
                print(f"{family} {part.label}: {equal} equal, {differ} differ", flush=True)
                total_equal += equal
                total_differ += differ
    print(f"all: {total_equal} equal, {total_differ} differ")
    return 1 if total_differ else 0


if __name__ == "__main__":
    sys.exit(main())
