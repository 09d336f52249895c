"""Nemotron-3-Nano-Omni (``nemotron_h_omni``; ``NemotronH_Nano_Omni_Reasoning_V3``):
image and video pixels, token counts and prompt expansion as vLLM 0.33 makes them.

vLLM runs its own ``NanoNemotronVLProcessor`` (``transformers_utils/processors/
nano_nemotron_vl.py``), built from config.json; scripts/families/nemotron_h_omni.md has
every rule below with its source line. In short:

- Images (the published config has ``vision_config.args.min_num_patches``: vLLM's
  ``DynamicResolutionImageTiler``): a 16-px patch grid per image from its size and a
  budget of patches (:func:`image_grids`), the image resized to it by torch's float32
  antialiased bicubic (:func:`resize_bicubic_aa`), ``(x / 255 - mean) / std``, cast to
  the config's dtype (bfloat16). One ``[3, H, W]`` tensor per image; ``(H/16)(W/16)/4``
  tokens.
- Videos: vLLM's default (OpenCV) loader's frames, each resized to one aspect-kept
  grid of about ``video_target_num_patches`` patches (:func:`video_grid`), normalized
  the same way; tubelets of ``video_temporal_patch_size`` frames, each written as
  ``"Frame i sampled at t seconds and frame j sampled at u seconds: "`` + ``<img>`` +
  ``<image>`` x tokens + ``</img>`` (:func:`video_token_ids`).
- The prompt (:func:`expand`): ``<image>`` (one token) is replaced token-wise;
  ``<video>`` is no token of Nemotron's tokenizer, so where its pieces do not stand alone
  in the prompt (``">\\n"`` merges) vLLM decodes the prompt, replaces the text and
  encodes it again (``_apply_prompt_updates_via_text``), as done here.

Pure functions of the settings (:class:`OmniVision`); torch-free. The family
(:data:`FAMILY`) preprocesses VIDEO only: vLLM 0.33's model asserts that an image's
``imgs_sizes`` and ``num_tokens_per_image`` are Python lists, which no preprocessed
gRPC request can give it (smg-grpc-servicer 0.14.1 makes every wire value a tensor),
so a request with an image is the worker's to process as a whole
(:data:`IMAGES_BY_WORKER`, ``Family.worker_kinds``). Its video path reads tensors:
``pixel_values_flat_video`` (flat by ``video_num_patches``; the batch names it with
``encoder_input_key``, as the servicer would otherwise register it as
``pixel_values_videos``), ``video_num_patches``, ``frames_indices`` and
``frame_duration_ms``; the model embeds every position of a video's span (its
replacement is ``PromptUpdateDetails.from_seq``), so the batch leaves ``im_token_id``
unset. nemotron_h_omni.md, "Over the gRPC wire", has the lines.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mmctl.choices import LayoutKind, PixelFormat, PruningMethod
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind, dimensions
from mmctl.models import kinds, tiled
from mmctl.models.family import Family, ModelView
from mmctl.models.settings import REQUIRED, File, Settings, setting
from mmctl.preprocessing.pixels import float32_to_bfloat16_bits
from mmctl.values.fields import PIXELS, ROWS, FieldLayout, WireField
from mmctl.values.items import Frames, ItemFacts, ItemOptions, Preprocessed
from mmctl.values.layout import Layout, LayoutCheck, span_outside
from mmctl.values.layout import Span as LayoutSpan
from mmctl.values.received import ContractError, Received

CONFIG = File.CONFIG

F32 = np.float32

IMG_START = "<img>"
IMG_END = "</img>"
IMG_CONTEXT = "<image>"
VIDEO = "<video>"
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class OmniVision:
    """What shapes the pixels and tokens (config.json, as vLLM's processor reads it).
    Defaults: ``nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16``'s values."""

    patch_size: int = 16
    downsample_ratio: float = 0.5
    min_num_patches: int = 1024
    max_num_patches: int = 13312
    video_target_num_patches: int = 1024
    video_maintain_aspect_ratio: bool = True
    video_temporal_patch_size: int = 2
    norm_mean: tuple[float, float, float] = CLIP_MEAN
    norm_std: tuple[float, float, float] = CLIP_STD
    #: ``config.dtype``: the pixels' dtype (``torch_dtype`` ``bfloat16`` as published).
    bfloat16: bool = True
    #: The server's ``max_model_len`` (vLLM's default: the text model's
    #: ``max_position_embeddings``); it bounds the images' patch budget.
    max_model_len: int = 262144
    #: Frames vLLM's default loader keeps (``VideoMediaIO(num_frames=32)``).
    num_frames: int = 32

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> OmniVision:
        """The settings from a config.json dict (transformers' legacy names included)."""
        vision = config.get("vision_config") or {}
        args = vision.get("args") or {}
        text = config.get("llm_config") or config.get("text_config") or {}
        if "min_num_patches" not in args:
            raise InputError(
                "config.json has no vision_config.args.min_num_patches: vLLM tiles this "
                "checkpoint's images InternVL-style, which mmctl does not do for Nemotron"
            )
        if vision.get("video_target_img_size") is not None:
            raise InputError("config.json sets video_target_img_size, which mmctl does not read")
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "float32")
        return cls(
            patch_size=int(config.get("patch_size", 16)),
            downsample_ratio=float(config.get("downsample_ratio", 0.5)),
            min_num_patches=int(args["min_num_patches"]),
            max_num_patches=int(args.get("max_num_patches", 0)),
            video_target_num_patches=int(vision.get("video_target_num_patches", 1024)),
            video_maintain_aspect_ratio=bool(vision.get("video_maintain_aspect_ratio", False)),
            video_temporal_patch_size=int(vision.get("video_temporal_patch_size", 1)),
            norm_mean=tuple(float(x) for x in config.get("norm_mean", CLIP_MEAN)),  # type: ignore[arg-type]
            norm_std=tuple(float(x) for x in config.get("norm_std", CLIP_STD)),  # type: ignore[arg-type]
            bfloat16=dtype == "bfloat16",
            max_model_len=int(text.get("max_position_embeddings", 262144)),
        )


# ---- geometry ----


def _even(
    h: int, w: int, budget: float, divisor: int = 2, *, independent: bool = True
) -> tuple[int, int]:
    """Each side made a multiple of ``divisor`` (pixel shuffle): up where the area stays
    within ``budget``, else down (at least ``divisor``) — height first, then width with
    the new height (``process_media``)."""
    rem = h % divisor
    if rem:
        h = h + divisor - rem if (h + divisor - rem) * w <= budget else max(divisor, h - rem)
    rem = w % divisor
    if rem:
        w = w + divisor - rem if h * (w + divisor - rem) <= budget else max(divisor, w - rem)
    return h, w


def image_grid(
    height: int, width: int, budget: float, s: OmniVision = OmniVision()
) -> tuple[int, int]:
    """(rows, columns) of 16-px patches of one image with ``budget`` patches
    (``DynamicResolutionImageTiler.process_media``)."""
    if height <= 0 or width <= 0:
        raise InputError(f"image has no pixels: {dimensions(width, height)}")
    ch = round(height / s.patch_size + 0.5)
    cw = round(width / s.patch_size + 0.5)
    factor = min(math.sqrt(budget / (ch * cw)), 1.0)
    h, w = math.floor(factor * ch), math.floor(factor * cw)
    if budget > s.min_num_patches and h * w < s.min_num_patches:
        up = math.sqrt(s.min_num_patches / (h * w))
        h, w = math.ceil(up * h), math.ceil(up * w)
    return _even(h, w, budget)


def image_grids(
    sizes: Sequence[tuple[int, int]], text_tokens: int = 0, s: OmniVision = OmniVision()
) -> list[tuple[int, int]]:
    """The patch grids of the images vLLM's processor handles in one call
    (``compute_params``): ``text_tokens`` is that call's dummy text without its
    ``<image>`` placeholders, tokenized — 0 for images alone."""
    available = (s.max_model_len - text_tokens - 4) * 4
    available = max(available, s.min_num_patches * len(sizes))
    cap = s.max_num_patches if s.max_num_patches > 0 else math.inf
    budgets: list[float] = [int(max(min(available, cap), s.min_num_patches))] * len(sizes)
    for _ in range(10):
        grids = [image_grid(h, w, b, s) for (h, w), b in zip(sizes, budgets, strict=True)]
        counts = [gh * gw for gh, gw in grids]
        total = sum(counts)
        if total <= available:
            return grids
        scale = available / total
        scaled = [max(s.min_num_patches, int(c * scale)) for c in counts]
        if any(new < old for new, old in zip(scaled, budgets, strict=True)):
            budgets = list(scaled)
        else:
            budgets = [s.min_num_patches] * len(sizes)
    raise InputError(f"no patch grids fit {len(sizes)} images in {available} patches")


def video_grid(height: int, width: int, s: OmniVision = OmniVision()) -> tuple[int, int]:
    """(rows, columns) of patches of every frame of a video
    (``get_video_target_size_and_feature_size``)."""
    target = s.video_target_num_patches
    divisor = round(1 / s.downsample_ratio)
    if not s.video_maintain_aspect_ratio:
        side = max(divisor, (int(math.sqrt(target)) // divisor) * divisor)
        return side, side
    aspect = width / max(height, 1)
    ph = max(round(math.sqrt(target / aspect)), 1)
    pw = max(round(math.sqrt(target * aspect)), 1)
    if divisor > 1:
        rh, rw = ph % divisor, pw % divisor
        up_h, up_w = ph + (divisor - rh if rh else 0), pw + (divisor - rw if rw else 0)
        if up_h * up_w <= target:
            ph, pw = up_h, up_w
        else:
            ph, pw = max(divisor, ph - rh), max(divisor, pw - rw)
    return ph, pw


def tokens_of(grid: tuple[int, int], s: OmniVision = OmniVision()) -> int:
    """Embedding tokens of a patch grid after the pixel shuffle."""
    return int(grid[0] * s.downsample_ratio) * int(grid[1] * s.downsample_ratio)


# ---- pixels ----


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    # float32 fused multiply-add: the float32 product is exact in float64, and so is its
    # sum with a float32 of these magnitudes, so one rounding to float32 remains.
    return (a.astype(np.float64) * b + c).astype(F32)


def _cubic(x: float) -> np.float32:
    """torch's ``HelperInterpCubic::aa_filter`` (a = -0.5) in float32, its polynomials
    contracted to fused multiply-adds as the compiled kernel computes them."""
    a = F32(abs(F32(x)))
    if a < 1.0:
        u = F32(float(F32(1.5)) * float(a) - 2.5)
        return F32(float(F32(u * a)) * float(a) + 1.0)
    if a < 2.0:
        p = F32(-0.5 * float(a) + 2.5)
        q = F32(float(p) * float(a) - 4.0)
        return F32(float(q) * float(a) + 2.0)
    return F32(0.0)


def _taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first input index, tap count [n_out], weights [n_out, taps]) of torch's
    antialiased bicubic along one axis (``_compute_indices_min_size_weights_aa``;
    align_corners false)."""
    scale = F32(F32(n_in) / F32(n_out))
    support = F32(2.0 * float(scale)) if scale >= 1.0 else F32(2.0)
    taps = math.ceil(support) * 2 + 1
    invscale = F32(1.0 / float(scale)) if scale >= 1.0 else F32(1.0)
    first = np.zeros(n_out, np.int64)
    count = np.zeros(n_out, np.int64)
    weights = np.zeros((n_out, taps), F32)
    for i in range(n_out):
        center = F32(float(scale) * (i + 0.5))
        lo = max(int(float(F32(center - support)) + 0.5), 0)
        size = min(int(float(F32(center + support)) + 0.5), n_in) - lo
        size = min(max(size, 0), taps)
        row = [
            _cubic((float(F32(F32(j + lo) - center)) + 0.5) * float(invscale)) for j in range(size)
        ]
        total = F32(0.0)
        for w in row:
            total = F32(total + w)
        if total != 0:
            row = [F32(w / total) for w in row]
        first[i], count[i] = lo, size
        weights[i, :size] = row
    return first, count, weights


def _resample(src: np.ndarray, axis: int, n_out: int) -> np.ndarray:
    """One separable pass along ``axis`` of float32 ``src``: each output the sum, in tap
    order, of input x weight — as torch's compiled loop does it (measured on its AVX512
    build): the first tap a product, the next taps in whole groups of four a product
    added, the last ``(taps - 1) % 4`` fused multiply-adds. Taps past an output's own
    count have weight 0 and add nothing."""
    first, count, weights = _taps(src.shape[axis], n_out)
    moved = np.moveaxis(src, axis, -1)
    last = moved.shape[-1] - 1
    plain_until = 1 + ((count - 1) // 4) * 4
    acc = moved[..., first] * weights[:, 0]
    for j in range(1, weights.shape[1]):
        values = moved[..., np.minimum(first + j, last)]
        fused = _fma(values, weights[:, j], acc)
        acc = np.where(j < plain_until, acc + values * weights[:, j], fused)
    return np.moveaxis(acc, -1, axis)


def resize_bicubic_aa(rgb: np.ndarray, height: int, width: int) -> np.ndarray:
    """``[H, W, 3]`` uint8 → ``[3, height, width]`` float32 as
    ``torch.nn.functional.interpolate(x.float(), mode="bicubic", align_corners=False,
    antialias=True)`` makes it on the CPU: the width pass, then the height pass, each
    skipped when its size is unchanged."""
    x = np.ascontiguousarray(rgb.transpose(2, 0, 1), dtype=F32)
    if x.shape[2] != width:
        x = _resample(x, 2, width)
    if x.shape[1] != height:
        x = _resample(x, 1, height)
    return x


def normalize(x: np.ndarray, s: OmniVision = OmniVision()) -> np.ndarray:
    """``(x / 255 - mean) / std`` in float32 (``_bicubic_resize_and_normalize``), as
    bfloat16 bits (uint16) when the config's dtype is bfloat16, else float32."""
    mean = np.asarray(s.norm_mean, F32).reshape(3, 1, 1)
    std = np.asarray(s.norm_std, F32).reshape(3, 1, 1)
    out = ((x / F32(255.0)) - mean) / std
    return float32_to_bfloat16_bits(out) if s.bfloat16 else out.astype(F32)


def image_pixels(
    rgb: np.ndarray, grid: tuple[int, int], s: OmniVision = OmniVision()
) -> np.ndarray:
    """One image (uint8 ``[H, W, 3]`` as vLLM loads it) at its patch grid: ``[3, h, w]``."""
    height, width = grid[0] * s.patch_size, grid[1] * s.patch_size
    return normalize(resize_bicubic_aa(rgb, height, width), s)


def video_pixels(frames: np.ndarray, s: OmniVision = OmniVision()) -> np.ndarray:
    """``[F, H, W, 3]`` uint8 frames → ``[F, 3, h, w]``, every frame at the video's grid
    (not resized when it already has that size)."""
    if frames.ndim != 4 or frames.shape[0] == 0:
        raise InputError(f"expected [F, H, W, 3] frames, got shape {frames.shape}")
    gh, gw = video_grid(frames.shape[1], frames.shape[2], s)
    size = (gh * s.patch_size, gw * s.patch_size)
    return np.stack([normalize(resize_bicubic_aa(f, *size), s) for f in frames])


# ---- prompt ----


@dataclass(frozen=True)
class Tokens:
    """The ids of the media tokens (the tokenizer's; vLLM encodes the strings)."""

    img_start: int = 19
    img_end: int = 20
    context: int = 18

    @classmethod
    def from_vocab(cls, token_to_id: Callable[[str], int | None]) -> Tokens:
        found = {}
        for name, token in (
            ("img_start", IMG_START),
            ("img_end", IMG_END),
            ("context", IMG_CONTEXT),
        ):
            value = token_to_id(token)
            if value is None:
                raise InputError(
                    f"the tokenizer has no {token} token, which Nemotron's prompt needs"
                )
            found[name] = value
        return cls(**found)


def frame_duration_ms(fps: float) -> int:
    """``int(1000.0 / fps)``: vLLM's frame step (its timestamps are index x this)."""
    return int(1000.0 / fps)


def frame_separators(indices: Sequence[int], duration_ms: int, temporal: int) -> list[str]:
    """The text before each tubelet (``get_video_repl``): frames numbered from 1 and
    stamped with ``index x duration_ms / 1000`` seconds, two decimals."""
    stamps = [int(i) * duration_ms / 1000.0 for i in indices]
    if temporal <= 1:
        return [
            ("\n" if k else "") + f"Frame {k + 1} sampled at {t:.2f} seconds: "
            for k, t in enumerate(stamps)
        ]
    out = []
    for group, start in enumerate(range(0, len(stamps), temporal)):
        parts = [
            f"{'Frame' if j == 0 else 'frame'} {start + j + 1} sampled at {stamps[start + j]:.2f} seconds"
            for j in range(temporal)
            if start + j < len(stamps)
        ]
        out.append(("\n" if group else "") + " and ".join(parts) + ": ")
    return out


def image_token_ids(count: int, tokens: Tokens = Tokens()) -> list[int]:
    """What replaces one ``<image>``: ``<img>`` + ``<image>`` x count + ``</img>``."""
    return [tokens.img_start, *[tokens.context] * count, tokens.img_end]


def tubelet_tokens(per_tubelet: int, tubelets: int, pruning_rate: float = 0.0) -> list[int]:
    """The ``<image>`` count of each tubelet's run in the prompt. With EVS pruning
    (``--video-pruning-rate q``) the first run holds every retained token,
    ``max(per_tubelet, int(per_tubelet * tubelets * (1 - q)))``
    (``compute_retained_tokens_count``), and the others none: the model itself lays
    the retained tokens out per frame."""
    if pruning_rate <= 0.0:
        return [per_tubelet] * tubelets
    kept = max(per_tubelet, int(per_tubelet * tubelets * (1 - pruning_rate)))
    return [kept] + [0] * (tubelets - 1)


def video_token_ids(
    separators: Sequence[str],
    per_tubelet: int | Sequence[int],
    encode: Callable[[str], Sequence[int]],
    tokens: Tokens = Tokens(),
) -> list[int]:
    """What replaces one ``<video>``: per tubelet its separator (tokenized on its own),
    ``<img>``, ``<image>`` x its count (``per_tubelet``: one for all, or each's:
    :func:`tubelet_tokens`), ``</img>``."""
    counts = [per_tubelet] * len(separators) if isinstance(per_tubelet, int) else per_tubelet
    ids: list[int] = []
    for text, count in zip(separators, counts, strict=True):
        ids += encode(text)
        ids += image_token_ids(count, tokens)
    return ids


@dataclass(frozen=True)
class Span:
    """One item's placeholder range in the expanded prompt."""

    offset: int
    length: int


def _find(ids: Sequence[int], target: Sequence[int], start: int) -> int:
    n = len(target)
    for i in range(start, len(ids) - n + 1):
        if list(ids[i : i + n]) == list(target):
            return i
    return -1


def expand(
    ids: Sequence[int],
    items: Sequence[tuple[str, list[int]]],
    encode: Callable[[str], Sequence[int]],
    decode: Callable[[Sequence[int]], str],
    tokens: Tokens = Tokens(),
) -> tuple[list[int], list[Span]]:
    """The prompt ``ids`` with each placeholder replaced by its item's replacement
    (``items``: (``"image"`` | ``"video"``, replacement ids) in prompt order), as
    vLLM's ``_apply_prompt_updates`` does: token-wise when every target is found
    (``<image>``; ``<video>``'s own pieces), else in text space — the prompt decoded,
    each ``<image>`` / ``<video>`` replaced by its replacement's text and the whole
    encoded again — and each replacement then found in the result."""
    targets = {"image": [tokens.context], "video": list(encode(VIDEO))}
    out: list[int] = []
    spans: list[Span] = []
    pos = 0
    for kind, repl in items:
        at = _find(ids, targets[kind], pos)
        if at < 0:
            return _expand_text(ids, items, encode, decode)
        out += ids[pos:at]
        spans.append(Span(len(out), len(repl)))
        out += repl
        pos = at + len(targets[kind])
    out += ids[pos:]
    return out, spans


def _expand_text(
    ids: Sequence[int],
    items: Sequence[tuple[str, list[int]]],
    encode: Callable[[str], Sequence[int]],
    decode: Callable[[Sequence[int]], str],
) -> tuple[list[int], list[Span]]:
    text = decode(ids)
    words = {"image": IMG_CONTEXT, "video": VIDEO}
    pieces: list[str] = []
    pos = 0
    for kind, repl in items:
        at = text.find(words[kind], pos)
        if at < 0:
            raise InputError(f"the prompt has fewer {words[kind]} placeholders than {kind}s")
        pieces += [text[pos:at], decode(repl)]
        pos = at + len(words[kind])
    pieces.append(text[pos:])
    out = list(encode("".join(pieces)))
    spans: list[Span] = []
    start = 0
    for _, repl in items:
        at = _find(out, repl, start)
        if at < 0:
            raise InputError("a replacement is tokenized differently inside the prompt")
        spans.append(Span(at, len(repl)))
        start = at + len(repl)
    return out, spans


# ---- the family (video client-side; images the worker's) ----

#: Why a Nemotron request carrying an image goes to the worker whole (``Family.worker_kinds``).
IMAGES_BY_WORKER = (
    "vLLM 0.33's Nemotron-3-Nano-Omni model asserts that an image's imgs_sizes and "
    "num_tokens_per_image are Python lists (nano_nemotron_vl.py, "
    "_parse_and_validate_image_input), and smg-grpc-servicer 0.14.1 makes every "
    "preprocessed value a tensor, so a request with an image is processed by the worker "
    "as a whole"
)
NAME = "nemotron-omni"
#: The video pixels' kwarg in vLLM's model (sent with ``encoder_input_key``).
PIXEL_KEY = "pixel_values_flat_video"
_DTYPES = ("bfloat16", "float32", "float16")


@dataclass(frozen=True)
class Vision(Settings):
    """config.json's settings as vLLM's ``NanoNemotronVLProcessor`` reads them;
    defaults: ``nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16``'s. No processor
    file: vLLM builds the processor from config.json alone."""

    OVERRIDABLE: ClassVar[tuple[str, ...]] = ("num_frames",)

    patch_size: int = setting(CONFIG, "patch_size", 16, kinds.Int(1, 256), default=16)
    downsample_ratio: float = setting(
        CONFIG, "downsample_ratio", 0.5, kinds.OneOf((0.5,), "0.5 (a 2x2 pixel shuffle)"),
        default=0.5,
    )  # fmt: skip
    min_num_patches: int = setting(
        CONFIG, "vision_config.args.min_num_patches", 1024, kinds.Int(1, 1 << 20),
        default=REQUIRED,
    )  # fmt: skip
    max_num_patches: int = setting(
        CONFIG, "vision_config.args.max_num_patches", 13312, kinds.Int(0, 1 << 20), default=0
    )
    video_target_num_patches: int = setting(
        CONFIG, "vision_config.video_target_num_patches", 1024, kinds.Int(4, 1 << 16),
        default=1024,
    )  # fmt: skip
    video_maintain_aspect_ratio: bool = setting(
        CONFIG, "vision_config.video_maintain_aspect_ratio", True, kinds.Flag(), default=False
    )
    video_temporal_patch_size: int = setting(
        CONFIG, "vision_config.video_temporal_patch_size", 2, kinds.Int(1, 16), default=1
    )
    #: config.json's ``norm_mean`` / ``norm_std`` (named as every family's).
    image_mean: tuple[float, float, float] = setting(
        CONFIG, "norm_mean", CLIP_MEAN, kinds.Triple(), default=CLIP_MEAN
    )
    image_std: tuple[float, float, float] = setting(
        CONFIG, "norm_std", CLIP_STD, kinds.Triple(std=True), default=CLIP_STD
    )
    torch_dtype: str = setting(
        CONFIG, "torch_dtype", "bfloat16", kinds.OneOf(_DTYPES), default="float32",
        aliases=("dtype",),
    )  # fmt: skip
    #: Frames vLLM's default loader keeps (``VideoMediaIO(num_frames=32)``; ``--num-frames``).
    num_frames: int = tiled.LOADER_FRAMES
    #: The steps vLLM's processor runs whatever the files say (no processor file is
    #: read): torch's antialiased bicubic, ``x / 255``, then the mean and std. Named
    #: so ``preprocess --json`` names every family's steps.
    do_resize: bool = True
    resample: int = kinds.BICUBIC
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True

    def check(self) -> None:
        frame = self.patch_size**2 * self.video_target_num_patches
        if frame > kinds.MAX_MIN_PIXELS:
            raise InputError(
                f"config.json: vision_config.video_target_num_patches "
                f"({self.video_target_num_patches}) of patch_size {self.patch_size} "
                f"patches make frames of {frame:,} pixels, over the "
                f"{kinds.MAX_MIN_PIXELS:,} mmctl preprocesses"
            )
        image = self.patch_size**2 * max(self.min_num_patches, self.max_num_patches)
        if image > kinds.MAX_MIN_PIXELS * 4:
            raise InputError(
                f"config.json: vision_config.args' patch budget ({max(self.min_num_patches, self.max_num_patches)}) "
                f"of patch_size {self.patch_size} patches makes images of {image:,} pixels, over the "
                f"{kinds.MAX_MIN_PIXELS * 4:,} mmctl preprocesses"
            )

    def omni(self) -> OmniVision:
        """The pure functions' settings."""
        return OmniVision(
            patch_size=self.patch_size,
            downsample_ratio=self.downsample_ratio,
            min_num_patches=self.min_num_patches,
            max_num_patches=self.max_num_patches,
            video_target_num_patches=self.video_target_num_patches,
            video_maintain_aspect_ratio=self.video_maintain_aspect_ratio,
            video_temporal_patch_size=self.video_temporal_patch_size,
            norm_mean=self.image_mean,
            norm_std=self.image_std,
            bfloat16=self.torch_dtype == "bfloat16",
            num_frames=self.num_frames,
        )


@dataclass(frozen=True)
class FamilyTokens:
    """The ids of the media tokens (:class:`Tokens`) as the family's token reader gives
    them. ``<video>`` is no token of Nemotron's tokenizer: the prompt finds it as text;
    every position of a video's span receives embeddings."""

    ids: Tokens

    def placeholder(self, kind: MediaKind) -> int:
        return self.ids.context

    def embed(self, kind: MediaKind) -> int:
        return self.ids.context

    def markers(self) -> dict[int, str]:
        return {self.ids.img_start: "vision_start", self.ids.img_end: "vision_end"}

    def as_dict(self) -> dict[str, int]:
        return {
            IMG_START: self.ids.img_start,
            IMG_END: self.ids.img_end,
            IMG_CONTEXT: self.ids.context,
        }


def read_tokens(config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> FamilyTokens:
    """The family's :class:`~mmctl.models.family.TokenReader`: vLLM encodes the strings."""
    return FamilyTokens(Tokens.from_vocab(vocab))


def _vision(model: ModelView) -> Vision:
    found: Vision = tiled.settings_of(model, Vision)
    return found


def _ids(model: ModelView) -> Tokens:
    found = model.token_ids
    assert isinstance(found, FamilyTokens), "the Nemotron family resolves its FamilyTokens"
    return found.ids


def image_item(rgb: np.ndarray, vision: Vision) -> tiled.Item:
    """One image alone (``mmctl preprocess``): its patch grid with the whole budget
    (:func:`image_grids`, no prompt text: the worker's text counts only where its
    ``max_model_len`` is small) → float32 ``[3, h, w]``. No request carries it: a
    request with an image is the worker's (:data:`IMAGES_BY_WORKER`)."""
    s = replace(vision.omni(), bfloat16=False)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise InputError(f"expected an [H, W, 3] image, got shape {rgb.shape}")
    grid = image_grids([(int(rgb.shape[0]), int(rgb.shape[1]))], 0, s)[0]
    pixels = image_pixels(rgb, grid, s)
    return tiled.Item(pixels, tokens_of(grid, s), extra={"patch_grid": grid})


def video_item(frames: np.ndarray, vision: Vision) -> tiled.Item:
    """A clip's sampled frames → float32 ``[F, 3, h, w]`` (the wire's format casts them:
    bfloat16 by default, as vLLM's processor makes them)."""
    s = replace(vision.omni(), bfloat16=False)
    pixels = video_pixels(frames, s)
    count = int(pixels.shape[0])
    return tiled.Item(pixels, count, extra={"frames": count}, rows=count)


@dataclass(frozen=True)
class NemotronProcessor:
    """Video through the tile pipeline, with the per-video values vLLM's model reads
    (``frames_indices``, ``frame_duration_ms``); images are the worker's. A default
    worker gets float32 offline, as the other float families' do (the servicer casts
    floats to the model's bfloat16, the same rounding); a worker's served dtype
    (``bfloat16`` as published) refines it when sending."""

    tiles: tiled.TileProcessor
    worker_pixels: PixelFormat = PixelFormat.FLOAT32
    device_normalize: bool = False

    def preprocess(
        self, path: Path, kind: MediaKind, settings: Any, fmt: PixelFormat, options: ItemOptions
    ) -> Preprocessed:
        pre = self.tiles.preprocess(path, kind, settings, fmt, options)
        if kind is not MediaKind.VIDEO:
            return pre
        s = settings.omni()
        fps = float(getattr(pre.source, "source_fps", 0.0) or 0.0)
        if fps <= 0:
            raise InputError(f"{path}: the video has no frame rate, which Nemotron's prompt stamps")
        duration = frame_duration_ms(fps)
        indices = np.asarray(pre.frame_indices, dtype=np.int64)
        height, width = pre.resized
        grid = (height // s.patch_size, width // s.patch_size)
        count = len(indices)
        tubelets = -(-count // s.video_temporal_patch_size)
        return replace(
            pre,
            num_tokens=tubelets * tokens_of(grid, s),
            item_tensors={
                "frames_indices": indices,
                "frame_duration_ms": np.asarray(duration, dtype=np.int64),
            },
            extra={
                "frames": count,
                "tubelets": tubelets,
                "frame_duration_ms": duration,
                "frames_indices": tuple(int(i) for i in indices),
                "patch_grid": grid,
            },
        )


def replacement(item: ItemFacts, model: ModelView) -> list[int]:
    """What replaces one ``<video>`` (``_get_prompt_repl_video`` / ``get_video_repl``)."""
    s = _vision(model).omni()
    grid = tuple(item.extra["patch_grid"])
    indices = list(item.extra["frames_indices"])
    tubelets = -(-len(indices) // s.video_temporal_patch_size)
    rate = model.pruning.rate if model.pruning.enabled else 0.0
    counts = tubelet_tokens(tokens_of((int(grid[0]), int(grid[1])), s), tubelets, rate)
    separators = frame_separators(
        indices, int(item.extra["frame_duration_ms"]), s.video_temporal_patch_size
    )
    return video_token_ids(separators, counts, model.tokenizer.encode_cached, _ids(model))


def chat_format(body: str, system: str | None) -> str:
    """The checkpoint template's turns (``<|im_start|>role\\n … <|im_end|>\\n``)."""
    turns = [f"<|im_start|>system\n{system}<|im_end|>\n"] if system else []
    turns.append(f"<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n")
    return "".join(turns)


@dataclass(frozen=True)
class NemotronPrompt:
    """``<video>`` found token-wise or, where its pieces merge with the text around
    it, in text space (:func:`expand`); every span embeds whole."""

    default_system: str | None = None
    check_name: str = "placeholder_spans"

    def knows_media(self, template: str) -> bool:
        return VIDEO in template

    def placeholder_text(self, kind: MediaKind, model: ModelView) -> str:
        if kind is not MediaKind.VIDEO:
            raise InputError(IMAGES_BY_WORKER)
        return VIDEO + "\n"

    def chat_format(self, body: str, system: str | None) -> str:
        return chat_format(body, system)

    def expand(
        self, ids: Sequence[int], items: Sequence[ItemFacts], model: ModelView, layout: LayoutKind
    ) -> Layout:
        if layout is not LayoutKind.VLLM:
            raise UsageError(f"--layout {layout.value} is a Qwen3-VL video layout")
        if any(item.kind is not MediaKind.VIDEO for item in items):
            raise InputError(IMAGES_BY_WORKER)
        tok = model.tokenizer
        out, spans = expand(
            list(ids),
            [("video", replacement(item, model)) for item in items],
            tok.encode_cached,
            tok.decode,
            _ids(model),
        )
        return Layout(
            kind=layout,
            ids=np.asarray(out, dtype=np.int64),
            spans=tuple(
                LayoutSpan(n, MediaKind.VIDEO, sp.offset, sp.length, embeds_all=True)
                for n, sp in enumerate(spans)
            ),
        )

    def check(self, layout: Layout, items: Sequence[ItemFacts], model: ModelView) -> LayoutCheck:
        """Each span is exactly its video's replacement (the model builds the same ids
        and embeds every one of them)."""
        for span, item in zip(layout.spans, items, strict=True):
            outside = span_outside(span, len(layout.ids))
            if outside is not None:
                return outside
            want = replacement(item, model)
            got = layout.ids[span.offset : span.end].tolist()
            if got != want:
                return LayoutCheck(
                    False,
                    f"item {span.item + 1}: its span of {len(got)} tokens is not the "
                    f"{len(want)}-token replacement vLLM's model embeds for this video",
                    span.item + 1,
                )
        return LayoutCheck(True)

    def frames(self, item: ItemFacts, model: ModelView) -> Frames | None:
        if item.kind is not MediaKind.VIDEO or model.pruning.enabled:
            return None
        grid = item.extra["patch_grid"]
        s = _vision(model).omni()
        return Frames(int(item.extra["tubelets"]), tokens_of((int(grid[0]), int(grid[1])), s))


def _fields() -> tuple[WireField, ...]:
    """vLLM's ``_get_video_fields_config``. ``frames_indices`` is batched there (a list
    of per-video tensors); the wire holds one dense tensor per key, so it travels flat by
    ``video_num_patches`` (one index per frame): the model flattens and splits it by
    ``video_num_patches`` either way (``_parse_and_validate_video_input``)."""
    sizes = "video_num_patches"
    return (
        WireField(
            PIXEL_KEY,
            FieldLayout.FLAT,
            PIXELS,
            PIXELS,
            (3, "h", "w"),
            "[Σ frames, 3, h, w] normalized frames (encoder_input_key)",
            sizes=sizes,
        ),
        WireField(
            sizes,
            FieldLayout.BATCHED,
            ROWS,
            "int64",
            (),
            "[videos] frames per video",
            keep_on_cpu=True,
        ),
        WireField(
            "frames_indices",
            FieldLayout.FLAT,
            "frames_indices",
            "int64",
            (),
            "[Σ frames] each frame's index in its clip",
            sizes=sizes,
            keep_on_cpu=True,
        ),
        WireField(
            "frame_duration_ms",
            FieldLayout.BATCHED,
            "frame_duration_ms",
            "int64",
            (),
            "[videos] int(1000 / fps) per video",
            keep_on_cpu=True,
        ),
    )


#: Images have no fields: no image batch travels (:data:`IMAGES_BY_WORKER`).
FIELDS: dict[MediaKind, tuple[WireField, ...]] = {MediaKind.VIDEO: _fields(), MediaKind.IMAGE: ()}


def _tensor(batch: Received, key: str) -> np.ndarray:
    if key not in batch.tensors:
        raise ContractError(f"carries no {key} tensor")
    return np.asarray(batch.tensors[key])


def received_items(batch: Received, model: ModelView) -> list[ItemFacts]:
    """The videos of a batch as vLLM's model reads them (its TensorSchema:
    ``pixel_values_flat [bvf, 3, h, w]``, ``num_patches [bn]``, ``frames_indices [bvf]``,
    ``frame_duration_ms [bn]``)."""
    if batch.kind is not MediaKind.VIDEO:
        raise ContractError(IMAGES_BY_WORKER)
    count = batch.count
    s = _vision(model).omni()
    frames = _tensor(batch, "video_num_patches")
    durations = _tensor(batch, "frame_duration_ms")
    indices = _tensor(batch, "frames_indices").reshape(-1)
    pixels = _tensor(batch, PIXEL_KEY)
    for key, arr in (("video_num_patches", frames), ("frame_duration_ms", durations)):
        if list(arr.shape) != [count]:
            raise ContractError(
                f"has shape {list(arr.shape)}; {count} placeholder(s) need [{count}]", key
            )
    if pixels.ndim != 4 or pixels.shape[1] != 3:
        raise ContractError(f"has shape {list(pixels.shape)}; vLLM's schema is [bvf, 3, h, w]")
    height, width = int(pixels.shape[2]), int(pixels.shape[3])
    unit = s.patch_size * round(1 / s.downsample_ratio)
    grid = (height // s.patch_size, width // s.patch_size)
    if height % unit or width % unit or grid[0] * grid[1] > s.video_target_num_patches:
        raise ContractError(
            f"frames of {dimensions(width, height)} are no grid of at most "
            f"{s.video_target_num_patches} {s.patch_size}-px patches with even sides",
            PIXEL_KEY,
        )
    total = int(frames.sum())
    if pixels.shape[0] != total or len(indices) != total or (frames < 1).any():
        raise ContractError(
            f"video_num_patches {frames.tolist()} do not split {pixels.shape[0]} frames and "
            f"{len(indices)} frames_indices",
            "video_num_patches",
        )
    if (durations < 1).any():
        raise ContractError(
            f"holds {durations.tolist()}; each is int(1000 / fps) > 0", "frame_duration_ms"
        )
    out = []
    start = 0
    for n, duration in zip(frames.tolist(), durations.tolist(), strict=True):
        own = tuple(int(i) for i in indices[start : start + n])
        start += n
        tubelets = -(-n // s.video_temporal_patch_size)
        facts = ItemFacts(
            MediaKind.VIDEO,
            0,
            extra={
                "frames": n,
                "tubelets": tubelets,
                "frame_duration_ms": int(duration),
                "frames_indices": own,
                "patch_grid": grid,
            },
            rows=n,
        )
        # Every position of the span receives embeddings (im_token_id unset).
        out.append(replace(facts, tokens=len(replacement(facts, model))))
    return out


@dataclass(frozen=True)
class NemotronContract:
    """A received video batch read as vLLM's model reads it (:func:`received_items`);
    an image batch is refused with :data:`IMAGES_BY_WORKER`."""

    def received_items(self, batch: Received, model: ModelView) -> list[ItemFacts]:
        return received_items(batch, model)

    def check_received(self, batch: Received, model: ModelView) -> None:
        if batch.raw:
            raise ContractError(
                "holds raw uint8 pixels; vLLM normalizes Nemotron's pixels in its processor "
                "(no device normalization for this model)",
                PIXEL_KEY,
            )
        received_items(batch, model)

    def unit_means(
        self, kind: MediaKind, pixels: np.ndarray, items: Sequence[ItemFacts], model: ModelView
    ) -> list[list[np.ndarray]]:
        """Per video, each frame's pixels on a stride (the stub's colours answer)."""
        return [
            [
                np.asarray(f[:, :: tiled.COLOUR_STRIDE, :: tiled.COLOUR_STRIDE]).reshape(3, -1).T
                for f in share
            ]
            for share in tiled.flat_tiles(pixels, items)
        ]


FAMILY = Family(
    name=NAME,
    aliases=("nemotron_h_omni", "nemotron-3-nano-omni", "nemotron-omni"),
    model_types=("nemotron_h_omni",),
    modalities=(MediaKind.IMAGE, MediaKind.VIDEO),
    settings=Vision,
    tokens=read_tokens,
    processor=NemotronProcessor(
        tiled.TileProcessor(
            NAME,
            image_item,
            video_item,
            lambda total, fps, vision: tiled.loader_indices(total, fps, vision.num_frames),
        )
    ),
    prompt=NemotronPrompt(),
    wire=tiled.TileWire(FIELDS, {MediaKind.VIDEO: tiled.concatenate}),
    contract=NemotronContract(),
    video_pruning=(("nemotron_h_omni", (PruningMethod.EVS,)),),
    worker_kinds=((MediaKind.IMAGE, IMAGES_BY_WORKER),),
)
