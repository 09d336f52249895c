"""InternVL in the transformers format (``internvl``; ``OpenGVLab/InternVL3-1B-hf``):
image and video pixels, token counts and prompt replacements, as vLLM 0.33 makes them.

vLLM serves ``InternVLForConditionalGeneration`` with its InternS1 model
(``interns1.py``) and drives transformers 5.20's ``InternVLProcessor`` itself:
once per image (``text=<IMG_CONTEXT>``) and once per video (``text=<video>``),
so items never pad or group with each other; the HF processor's own prompt is
dropped and every placeholder of the tokenized prompt is replaced as
``InternS1MultiModalProcessor._get_prompt_updates`` says.

Images (``GotOcr2ImageProcessor``, torchvision backend, ``crop_to_patches`` on —
the processor's call default, whatever the file says): the tile grid whose
aspect ratio is closest to the image's among 1..12 tiles
(:func:`tile_grid`), the image resized to it (uint8 antialiased bicubic) and
cut into 448x448 tiles row by row, then — when there is more than one tile —
the whole image resized to 448x448 as a thumbnail, last; each patch rescaled
and normalised (ImageNet mean/std) in float32: ``float32 [P, 3, 448, 448]``.

Videos (``InternVLVideoProcessor``, rebuilt by vLLM with ``size`` = the image
processor's size): every sampled frame resized to 448x448, normalised with the
video processor's mean/std — one patch per frame, no tiles:
``float32 [F, 3, 448, 448]``. Frames are vLLM's default (OpenCV) loader's: no
loader is registered for ``InternVLVideoProcessor`` (:func:`sample_indices`).

Tokens: an image becomes ``<img>`` + ``<IMG_CONTEXT>`` x (P x 256) +
``</img>``; a video ``Frame1: <img>`` + ``<video>`` x 256 + ``</img>``, one
line per frame joined by ``\\n`` — vLLM fills video frames with ``<video>``
where HF's processor writes ``<IMG_CONTEXT>``. Embeddings go to the
``<IMG_CONTEXT>`` (image) and ``<video>`` (video) positions only.
scripts/families/internvl.md has the sources, line by line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import dimensions
from mmctl.models import llava_onevision
from mmctl.preprocessing import tiles
from mmctl.preprocessing.resize import resize_rgb

#: ``image_utils.IMAGENET_STANDARD_MEAN``-like values the published configs carry
#: (``convert_internvl_weights_to_hf.write_image_processor``).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
#: ``OPENAI_CLIP_MEAN`` / ``OPENAI_CLIP_STD``: ``InternVLVideoProcessor``'s class
#: defaults, which a video file without ``image_mean``/``image_std`` falls back to.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

START_IMAGE = "<img>"
END_IMAGE = "</img>"
CONTEXT = "<IMG_CONTEXT>"
VIDEO = "<video>"


@dataclass(frozen=True)
class Settings:
    """Every setting that shapes InternVL's pixels and tokens under vLLM.

    Defaults are ``OpenGVLab/InternVL3-1B-hf``'s published values (or the class
    defaults those files leave in force).
    """

    tile: tuple[int, int] = (448, 448)  # preprocessor size {height, width}; also the video size
    resample: int = tiles.BICUBIC  # preprocessor resample (bicubic only)
    do_resize: bool = True  # preprocessor do_resize
    do_rescale: bool = True  # preprocessor do_rescale
    rescale_factor: float = 1 / 255  # preprocessor rescale_factor
    do_normalize: bool = True  # preprocessor do_normalize
    image_mean: tuple[float, float, float] = IMAGENET_MEAN  # preprocessor image_mean
    image_std: tuple[float, float, float] = IMAGENET_STD  # preprocessor image_std
    #: ``InternVLProcessorKwargs._defaults["images_kwargs"]``: the processor passes it on
    #: every call, over the file's ``crop_to_patches`` (false as published).
    crop_to_patches: bool = True
    min_patches: int = 1  # preprocessor min_patches
    max_patches: int = 12  # preprocessor max_patches (tiles; the thumbnail is extra)
    # The video processor's own settings: video_preprocessor_config.json, else (as for
    # InternVL3-1B-hf, which has none) preprocessor_config.json. Its ``size`` never
    # counts: vLLM rebuilds it with the image processor's size.
    video_resample: int = tiles.BICUBIC  # video resample
    video_do_resize: bool = True  # video do_resize
    video_do_rescale: bool = True  # video do_rescale
    video_rescale_factor: float = 1 / 255  # video rescale_factor
    video_do_normalize: bool = True  # video do_normalize
    video_mean: tuple[float, float, float] = IMAGENET_MEAN  # video image_mean
    video_std: tuple[float, float, float] = IMAGENET_STD  # video image_std
    #: processor_config.json ``image_seq_length``: tokens per 448x448 patch,
    #: ``(448 // 14) ** 2 * downsample_ratio ** 2`` = 256.
    image_seq_length: int = 256
    #: Frames vLLM's default loader keeps (``VideoMediaIO(num_frames=32)``; a server's
    #: ``--media-io-kwargs '{"video": {"num_frames": N}}'``).
    num_frames: int = 32


@dataclass(frozen=True)
class Tokens:
    """The special token ids of InternVL's prompt (the tokenizer's, as vLLM reads them:
    ``hf_processor.start_image_token`` etc. come from ``tokenizer_config.json``)."""

    start_image: int = 151665  # <img> (tokenizer start_image_token)
    end_image: int = 151666  # </img> (tokenizer end_image_token)
    context: int = 151667  # <IMG_CONTEXT> (context_image_token; config image_token_id)
    video: int = 151674  # <video> (tokenizer video_token)

    @classmethod
    def from_vocab(cls, token_to_id: Callable[[str], int | None]) -> Tokens:
        """The ids from a tokenizer's ``token_to_id``; :class:`InputError` naming the
        first token the vocabulary lacks (vLLM asserts ``<video>`` is one token)."""

        def look_up(token: str) -> int:
            found = token_to_id(token)
            if found is None:
                raise InputError(
                    f"the tokenizer has no {token} token, which InternVL's prompt needs",
                    hint="check that the model folder's tokenizer.json is InternVL's (-hf)",
                )
            return found

        return cls(
            start_image=look_up(START_IMAGE),
            end_image=look_up(END_IMAGE),
            context=look_up(CONTEXT),
            video=look_up(VIDEO),
        )


# ---- images ----


@functools.lru_cache(maxsize=16)
def _arrangements(min_tiles: int, max_tiles: int) -> tuple[tuple[int, int], ...]:
    # get_all_supported_aspect_ratios: (columns, rows) in loop order, stably sorted by count.
    found = [
        (cols, rows)
        for cols in range(1, max_tiles + 1)
        for rows in range(1, max_tiles + 1)
        if min_tiles <= cols * rows <= max_tiles
    ]
    return tuple(sorted(found, key=lambda grid: grid[0] * grid[1]))


def tile_grid(height: int, width: int, settings: Settings = Settings()) -> tuple[int, int]:
    """(columns, rows) of tiles for an image (HF ``get_optimal_tiled_canvas``): the
    arrangement of ``min_patches..max_patches`` tiles whose columns/rows ratio is closest
    to width/height; on an exact tie the later (more tiles) one, while the image's
    area is over half the tiles' area."""
    if height <= 0 or width <= 0:
        raise InputError(f"image has no pixels: {dimensions(width, height)}")
    tile_h, tile_w = settings.tile
    aspect, area = width / height, width * height
    best_diff, best = float("inf"), (1, 1)
    for cols, rows in _arrangements(settings.min_patches, settings.max_patches):
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best_diff, best = diff, (cols, rows)
        elif diff == best_diff and area > 0.5 * tile_h * tile_w * cols * rows:
            best = (cols, rows)
    return best


def num_patches(height: int, width: int, settings: Settings = Settings()) -> int:
    """Patches of one image: the tiles, plus the thumbnail when there is more than one."""
    if not settings.crop_to_patches:
        return 1
    cols, rows = tile_grid(height, width, settings)
    return cols * rows + (1 if cols * rows > 1 else 0)


def image_patches(rgb: np.ndarray, settings: Settings = Settings()) -> list[np.ndarray]:
    """The uint8 ``[448, 448, 3]`` patches of one image, in HF's order: tiles row by
    row, then the thumbnail (``crop_image_to_patches``, then ``_preprocess``'s resize,
    which leaves 448x448 patches as they are)."""
    tiles.check_rgb(rgb)
    tile_h, tile_w = settings.tile
    if not settings.crop_to_patches:
        return [_resize(rgb, settings.tile, settings.resample) if settings.do_resize else rgb]
    cols, rows = tile_grid(rgb.shape[0], rgb.shape[1], settings)
    canvas = _resize(rgb, (tile_h * rows, tile_w * cols), settings.resample)
    out = [
        canvas[r * tile_h : (r + 1) * tile_h, c * tile_w : (c + 1) * tile_w]
        for r in range(rows)
        for c in range(cols)
    ]
    if len(out) > 1:
        out.append(_resize(rgb, settings.tile, settings.resample))
    return out


def image_pixels(rgb: np.ndarray, settings: Settings = Settings()) -> np.ndarray:
    """``[H, W, 3]`` uint8 RGB (as vLLM loads it) → ``float32 [P, 3, 448, 448]``."""
    return tiles.rescale_normalize(
        np.stack(image_patches(rgb, settings)),
        do_rescale=settings.do_rescale,
        rescale_factor=settings.rescale_factor,
        do_normalize=settings.do_normalize,
        mean=settings.image_mean,
        std=settings.image_std,
    )


def _resize(rgb: np.ndarray, size: tuple[int, int], resample: int) -> np.ndarray:
    tiles.check_bicubic(resample)
    return resize_rgb(rgb, size[0], size[1])


# ---- videos ----


def sample_indices(total_frames: int, settings: Settings = Settings()) -> np.ndarray:
    """The frames vLLM's default (OpenCV) loader keeps — the same rule as OneVision's."""
    return llava_onevision.sample_indices(total_frames, settings.num_frames)


def video_pixels(frames: np.ndarray, settings: Settings = Settings()) -> np.ndarray:
    """``[F, H, W, 3]`` uint8 sampled frames → ``float32 [F, 3, 448, 448]``: one patch a
    frame, at the image tile's size (vLLM's ``size=`` override)."""
    if frames.ndim != 4 or frames.shape[0] == 0:
        raise InputError(f"expected [F, H, W, 3] frames, got shape {frames.shape}")
    tiles.check_rgb(frames[0])
    if settings.video_do_resize:
        frames = np.stack([_resize(f, settings.tile, settings.video_resample) for f in frames])
    return tiles.rescale_normalize(
        frames,
        do_rescale=settings.video_do_rescale,
        rescale_factor=settings.video_rescale_factor,
        do_normalize=settings.video_do_normalize,
        mean=settings.video_mean,
        std=settings.video_std,
    )


# ---- prompt ----


def image_token_ids(
    patches: int, tokens: Tokens = Tokens(), settings: Settings = Settings()
) -> list[int]:
    """What replaces one ``<IMG_CONTEXT>`` of the prompt (``get_replacement_interns1_image``)."""
    return [
        tokens.start_image,
        *[tokens.context] * (patches * settings.image_seq_length),
        tokens.end_image,
    ]


def video_token_ids(
    frames: int,
    encode: Callable[[str], Sequence[int]],
    tokens: Tokens = Tokens(),
    settings: Settings = Settings(),
) -> list[int]:
    """What replaces one ``<video>`` of the prompt (``get_replacement_interns1_video``):
    ``"\\n".join(f"Frame{i}: <img>" + "<video>" * 256 + "</img>")`` tokenized.

    ``encode`` tokenizes plain text (no special tokens added). The tokenizer cuts
    its input at special tokens before anything else, so each text run between
    them — ``"Frame1: "``, ``"\\nFrame2: "`` — is tokenized on its own, which is
    what is done here.
    """
    if frames <= 0:
        raise InputError(f"a video with {frames} frames has nothing to show")
    frame = [tokens.start_image, *[tokens.video] * settings.image_seq_length, tokens.end_image]
    ids: list[int] = []
    for i in range(frames):
        ids += encode(f"Frame{i + 1}: " if i == 0 else f"\nFrame{i + 1}: ")
        ids += frame
    return ids


def image_tokens(patches: int, settings: Settings = Settings()) -> int:
    """Length of one image's replacement: its patches' tokens and ``<img>``/``</img>``."""
    return patches * settings.image_seq_length + 2


def embed_mask(replacement: Sequence[int], embed_token: int) -> np.ndarray:
    """Which positions of a replacement receive the item's embeddings
    (``PromptUpdateDetails.select_token_id``): those holding ``embed_token`` —
    ``tokens.context`` for an image, ``tokens.video`` for a video."""
    return np.asarray(replacement, dtype=np.int64) == embed_token
