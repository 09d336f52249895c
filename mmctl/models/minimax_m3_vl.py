"""MiniMax-M3-VL (``minimax_m3_vl``) as vLLM 0.33 processes it.

vLLM serves it with ``vllm/models/minimax_m3`` (``MiniMaxM3VLMultiModalProcessor``
in ``common/mm_preprocess.py``) and runs its own copy of the checkpoint's remote
processor (``vllm/transformers_utils/processors/minimax_m3.py``), not
transformers'. scripts/families/minimax_m3_vl.md has the account, with lines.

Pixels: Qwen2-VL's rows and steps (bicubic resize with torchvision, CLIP
mean/std, patch 14, temporal patch 2, merge 2), sized by the processor's own
``smart_resize``: the Qwen area bound (images ``max_pixels`` 451584 with a fixed
``min_pixels`` of 3136; video frames ``min_pixels`` / ``max_pixels`` each), or,
where a folder sets ``max_long_side_pixel``, the long side shrunk to it (a short
side under 112 enlarged instead), with area caps that refuse rather than shrink.

Frames: vLLM's ``MiniMaxM3VideoBackend`` (registered for
``MiniMaxM3VLVideoProcessor``) keeps one frame per second of clip (a greedy walk
at 1 fps, no frame cap); the processor keeps them (``do_sample_frames`` off).

Prompt: each ``]<]image[>[`` becomes ``]<]start of image[>[`` + t·h·w/4 of
itself + ``]<]end of image[>[``; each ``]<]video[>[`` becomes, per temporal
patch, ``"]<]3.0 seconds[>["`` (the first frame's time: its index over the
clip's frame rate) tokenized alone, then the same start, t·h·w/4 ×
``]<]video[>[`` per frame, and the end. Both embed at their own placeholder.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mmctl.choices import LayoutKind, PixelFormat
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind, dimensions
from mmctl.models import kinds
from mmctl.models.family import Family, ModelView
from mmctl.models.qwen_vl.parts import (
    QwenContract,
    QwenProcessor,
    QwenWire,
    patch_settings,
    qwen_fields,
    token_ids,
)
from mmctl.models.qwen_vl.settings import PATCH14_CLIP, PatchSteps, TokenIds
from mmctl.models.settings import File, HFClass, setting
from mmctl.prompt.layout import placeholders_for
from mmctl.values.items import Frames, ItemFacts
from mmctl.values.layout import Layout, LayoutCheck, Span

IMAGE, VIDEO = File.IMAGE, File.VIDEO

#: The special tokens vLLM reads from the tokenizer's vocabulary (``MiniMaxM3VLProcessingInfo``).
IMAGE_TOKEN = "]<]image[>["
VIDEO_TOKEN = "]<]video[>["
START_TOKEN = "]<]start of image[>["
END_TOKEN = "]<]end of image[>["

#: The vendored classes' fixed bounds (not settings: the processors read them off the module).
MAX_RATIO = 200
MIN_SHORT_SIDE_PIXEL = 112
IMAGE_MAX_TOTAL_PIXELS = 12_845_056
VIDEO_MAX_TOTAL_PIXELS = 301_056_000
#: ``smart_resize``'s own ``min_pixels`` default: the image processor passes none.
IMAGE_MIN_PIXELS = 4 * 28 * 28
#: ``MiniMaxM3VideoBackend.load_bytes``'s ``fps`` (its caller passes only ``num_frames``,
#: which the backend's sampler ignores) and the sampler's tolerance.
LOADER_FPS = 1.0
LOADER_EPS = 1e-4

_SIZE = {"size": {"height": 672, "width": 672}}
#: vLLM 0.33's vendored classes (their class attributes).
IMAGE_CLASS = HFClass("MiniMaxM3VLImageProcessor", {**PATCH14_CLIP, **_SIZE, "max_pixels": 451584})
VIDEO_CLASS = HFClass(
    "MiniMaxM3VLVideoProcessor",
    {**PATCH14_CLIP, **_SIZE, "min_pixels": IMAGE_MIN_PIXELS, "max_pixels": 768 * 28 * 28},
)
_PIXELS = kinds.Int(1, 2**40)
_LONG_SIDE = kinds.Int(1, kinds.MAX_SIDE * 4)


@dataclass(frozen=True)
class MiniMaxVision(PatchSteps):
    """Every setting that shapes a MiniMax-M3-VL item's pixels, grid and tokens;
    defaults are the vendored classes' (which vLLM says it copied from the
    checkpoint's remote code; scripts/families/minimax_m3_vl.md)."""

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (IMAGE_CLASS,)
    VIDEO_CLASSES: ClassVar[tuple[HFClass, ...]] = (VIDEO_CLASS,)
    PUBLISHED: ClassVar[Mapping[str, Any]] = {
        "patch_size": 14,
        "image_mean": kinds.CLIP_MEAN,
        "image_std": kinds.CLIP_STD,
    }
    #: Keys the classes have that change no tensor vLLM makes: ``size`` (a placeholder
    #: for validation), the video class's own sampling (vLLM's loader picks the frames
    #: and ``do_sample_frames`` stays off), ``total_pixels`` (read by nothing), and an
    #: image file's ``min_pixels`` (the image class does not read it).
    INERT: ClassVar[frozenset[str]] = frozenset(
        {
            "size",
            "fps",
            "min_frames",
            "max_frames",
            "num_frames",
            "total_pixels",
            "do_sample_frames",
            "return_metadata",
            "video_metadata",
            "min_pixels",
            "min_short_side_pixel",
            "max_total_pixels",
        }
    )

    image_max_pixels: int = setting(IMAGE, "max_pixels", 451584, _PIXELS)
    image_max_long_side: int | None = setting(IMAGE, "max_long_side_pixel", None, _LONG_SIDE)
    video_min_pixels: int = setting(
        VIDEO, "min_pixels", IMAGE_MIN_PIXELS, kinds.Int(1, kinds.MAX_MIN_PIXELS)
    )
    video_max_pixels: int = setting(VIDEO, "max_pixels", 768 * 28 * 28, _PIXELS)
    video_max_long_side: int | None = setting(VIDEO, "max_long_side_pixel", None, _LONG_SIDE)


# ---- sizes ------------------------------------------------------------------------


def _round(value: float, factor: int) -> int:
    return round(value / factor) * factor


def smart_resize(
    height: int,
    width: int,
    factor: int,
    min_pixels: int,
    max_pixels: int,
    max_long_side: int | None,
    max_total: int | None,
) -> tuple[int, int]:
    """The vendored ``smart_resize``: the long-side rule where ``max_long_side`` is
    set, else Qwen's area bound. Python floats and ``round`` (half to even), as there."""
    ratio = max(height, width) / min(height, width)
    if ratio > MAX_RATIO:
        raise InputError(
            f"a {dimensions(width, height)} item: aspect ratio {ratio:.1f} is over {MAX_RATIO}, "
            "which vLLM's MiniMax-M3-VL processor refuses"
        )
    if max_long_side is not None:
        scaled_h, scaled_w = float(height), float(width)
        if max(height, width) > max_long_side:
            beta = max_long_side / max(height, width)
            scaled_h, scaled_w = height * beta, width * beta
        elif min(height, width) < MIN_SHORT_SIDE_PIXEL:
            beta = MIN_SHORT_SIDE_PIXEL / min(height, width)
            scaled_h, scaled_w = height * beta, width * beta
        h, w = max(factor, _round(scaled_h, factor)), max(factor, _round(scaled_w, factor))
        if max_total is not None and h * w > max_total:
            raise InputError(
                f"a {dimensions(width, height)} image resizes to {dimensions(w, h)}, over the {max_total:,}-pixel "
                "area vLLM's MiniMax-M3-VL processor refuses"
            )
        return h, w
    h, w = max(factor, _round(height, factor)), max(factor, _round(width, factor))
    if h * w > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h, w = (
            math.floor(height / beta / factor) * factor,
            math.floor(width / beta / factor) * factor,
        )
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    if h < 1 or w < 1:
        raise InputError(f"a {dimensions(width, height)} item resizes to nothing under max_pixels")
    return h, w


def image_size(height: int, width: int, s: MiniMaxVision) -> tuple[int, int]:
    return smart_resize(
        height,
        width,
        s.factor,
        IMAGE_MIN_PIXELS,
        s.image_max_pixels,
        s.image_max_long_side,
        IMAGE_MAX_TOTAL_PIXELS,
    )


def video_size(num_frames: int, height: int, width: int, s: MiniMaxVision) -> tuple[int, int]:
    """One size for every frame; the clip's volume is capped only under the long-side rule."""
    h, w = smart_resize(
        height, width, s.factor, s.video_min_pixels, s.video_max_pixels, s.video_max_long_side, None
    )
    if s.video_max_long_side is not None and h * w * num_frames > VIDEO_MAX_TOTAL_PIXELS:
        raise InputError(
            f"{num_frames} frames of {dimensions(w, h)} are {h * w * num_frames:,} pixels, over the "
            f"{VIDEO_MAX_TOTAL_PIXELS:,} vLLM's MiniMax-M3-VL processor refuses"
        )
    return h, w


# ---- frames -----------------------------------------------------------------------


def loader_indices(total: int, source_fps: float, fps: float = LOADER_FPS) -> list[int]:
    """``MiniMaxM3VideoBackend.compute_frames_index_to_sample``: frame 0, then the
    first frame at least one interval (less 1e-4 s) after the last kept one."""
    if total <= 0 or source_fps <= 0 or fps <= 0:
        return [0] if total > 0 else []
    interval = 1.0 / fps
    indices: list[int] = []
    prev = -math.inf
    while True:
        target = (
            0
            if not indices
            else max(math.ceil((prev + interval - LOADER_EPS) * source_fps), indices[-1] + 1)
        )
        if target >= total:
            break
        indices.append(target)
        prev = target / source_fps
    return indices or [0]


def patch_seconds(indices: Sequence[int], source_fps: float, temporal: int) -> list[float]:
    """The time of each temporal patch's first frame (``frames_indices[i·tp] / fps``)."""
    last = len(indices) - 1
    patches = max(-(-len(indices) // temporal), 1)
    return [indices[min(i * temporal, last)] / source_fps for i in range(patches)]


@dataclass(frozen=True)
class MiniMaxVariant:
    """What the Qwen-VL pipeline and layout read of MiniMax-M3-VL."""

    name: str = "minimax-m3-vl"
    per_frame_markers: bool = True

    def sample_indices(
        self, total_frames: int, source_fps: float, vision: MiniMaxVision
    ) -> np.ndarray:
        return np.asarray(loader_indices(total_frames, source_fps), dtype=np.int64)

    def video_frame_times(
        self, indices: np.ndarray, source_fps: float, vision: MiniMaxVision
    ) -> list[float]:
        return patch_seconds(indices.tolist(), source_fps, vision.temporal_patch_size)

    def video_size(
        self, num_frames: int, height: int, width: int, vision: MiniMaxVision
    ) -> tuple[int, int]:
        return video_size(num_frames, height, width, vision)

    def image_size(self, height: int, width: int, vision: MiniMaxVision) -> tuple[int, int]:
        return image_size(height, width, vision)

    def content_size(
        self, kind: MediaKind, canvas: tuple[int, int], num_frames: int, height: int, width: int,
        vision: MiniMaxVision,
    ) -> tuple[int, int]:  # fmt: skip
        return canvas

    def frame_label(self, seconds: float) -> str:
        # The processor and vLLM's prompt update both format with Python's .1f.
        return f"]<]{seconds:.1f} seconds[>["

    def video_tensors(
        self, indices: np.ndarray, total_frames: int, source_fps: float, vision: MiniMaxVision
    ) -> dict[str, np.ndarray]:
        return {}


# ---- tokens and prompt ------------------------------------------------------------


def read_tokens(config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> TokenIds:
    """The four ids vLLM takes from the tokenizer's vocabulary (config.json names none)."""
    names = {
        "vision_start_token_id": START_TOKEN,
        "vision_end_token_id": END_TOKEN,
        "image_token_id": IMAGE_TOKEN,
        "video_token_id": VIDEO_TOKEN,
    }
    found = {key: vocab(token) for key, token in names.items()}
    missing = [names[k] for k, v in found.items() if v is None]
    if missing:
        raise InputError(
            f"the tokenizer lacks {', '.join(missing)}, which vLLM's MiniMax-M3-VL "
            "processor looks up by name",
            hint="point --model-dir at a MiniMax-M3 checkpoint's tokenizer",
        )
    return TokenIds(**{k: int(v) for k, v in found.items() if v is not None})


@dataclass(frozen=True)
class MiniMaxPrompt:
    """The bare ``]<]image[>[`` / ``]<]video[>[`` placeholders, expanded as
    ``_get_prompt_updates`` expands them (an image's start and end included in its span)."""

    variant: MiniMaxVariant
    default_system: str | None = None
    check_name: str = "placeholder_spans"

    def knows_media(self, template: str) -> bool:
        return IMAGE_TOKEN in template or VIDEO_TOKEN in template

    def placeholder_text(self, kind: MediaKind, model: ModelView) -> str:
        return VIDEO_TOKEN if kind is MediaKind.VIDEO else IMAGE_TOKEN

    def chat_format(self, body: str, system: str | None) -> str:
        """The MiniMax chat turns (scripts/families/minimax_m3_vl.md: reconstructed)."""
        turns = [f"]~!b[]~b]system\n{system}[e~[\n"] if system else ["]~!b["]
        turns.append(f"]~b]user\n{body}[e~[\n]~b]ai\n")
        return "".join(turns)

    def expand(
        self, ids: Sequence[int], items: Sequence[ItemFacts], model: ModelView, layout: LayoutKind
    ) -> Layout:
        tok = token_ids(model)
        merge = patch_settings(model).merge_size
        prompt = list(ids)
        where = placeholders_for(prompt, items, tok)
        out: list[int] = []
        spans: list[Span] = []
        cursor = 0
        vs, ve = tok.vision_start_token_id, tok.vision_end_token_id
        for n, (pos, item) in enumerate(zip(where, items, strict=True)):
            assert item.grid_thw is not None, "MiniMax items carry their grid"
            t, h, w = item.grid_thw
            per_frame = h * w // (merge * merge)
            pad = tok.placeholder(item.kind)
            if item.kind is MediaKind.IMAGE:
                block = [vs, *[pad] * (t * per_frame), ve]
            else:
                if len(item.patch_times) != t:
                    raise InputError(
                        f"video item {n + 1}: {len(item.patch_times)} timestamps for {t} frames"
                    )
                block = []
                for s in item.patch_times:
                    block.extend(model.tokenizer.encode_cached(self.variant.frame_label(s)))
                    block.extend([vs, *[pad] * per_frame, ve])
            out.extend(prompt[cursor:pos])
            spans.append(Span(n, item.kind, len(out), len(block)))
            out.extend(block)
            cursor = pos + 1
        out.extend(prompt[cursor:])
        return Layout(kind=layout, ids=np.asarray(out, dtype=np.int64), spans=tuple(spans))

    def frames(self, item: ItemFacts, model: ModelView) -> Frames | None:
        if item.kind is not MediaKind.VIDEO:
            return None
        t, h, w = item.grid
        merge = patch_settings(model).merge_size
        return Frames(t, h * w // (merge * merge))  # one block per temporal patch

    def check(self, layout: Layout, items: Sequence[ItemFacts], model: ModelView) -> LayoutCheck:
        from mmctl.prompt.mrope import walk

        # Each image and each frame block is one start, its pads, one end: the walk's check.
        return walk(
            layout.ids,
            layout.spans,
            [it.grid for it in items],
            token_ids(model),
            patch_settings(model).merge_size,
            per_frame_markers=True,
        )


VARIANT = MiniMaxVariant()
WIRE = QwenWire(
    {MediaKind.IMAGE: qwen_fields(MediaKind.IMAGE), MediaKind.VIDEO: qwen_fields(MediaKind.VIDEO)}
)
FAMILY = Family(
    name=VARIANT.name,
    aliases=("minimax_m3_vl", "minimax-m3"),
    model_types=("minimax_m3_vl",),
    modalities=(MediaKind.IMAGE, MediaKind.VIDEO),
    settings=MiniMaxVision,
    tokens=read_tokens,
    # vLLM 0.33's MiniMax-M3 model normalizes nothing on the device: float pixels.
    processor=QwenProcessor(VARIANT, PixelFormat.FLOAT32, device_normalize=False),
    prompt=MiniMaxPrompt(VARIANT),
    wire=WIRE,
    contract=QwenContract(WIRE),
)
