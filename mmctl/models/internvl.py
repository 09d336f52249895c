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

The family (:data:`FAMILY`) is the tile families' parts (:mod:`mmctl.models.tiled`)
around these functions: pixels flat by ``{image,video}_num_patches``, and the
token ids the model reads from each batch shared by its items (one ``[1]``
value: vLLM's are 0-d, which the wire cannot carry).
scripts/families/internvl.md has the sources, line by line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mmctl.errors import InputError
from mmctl.media.probe import MediaKind, dimensions
from mmctl.models import kinds, llava_onevision, tiled
from mmctl.models.family import Family, ModelView
from mmctl.models.settings import REQUIRED, File, HFClass, Settings, setting
from mmctl.preprocessing import tiles
from mmctl.preprocessing.resize import resize_rgb
from mmctl.preprocessing.tiles import Size
from mmctl.values.fields import EMBED, ROWS, FieldLayout, WireField
from mmctl.values.items import Frames, ItemFacts
from mmctl.values.received import ContractError, Received

IMAGE, VIDEO, PROCESSOR, CONFIG = File.IMAGE, File.VIDEO, File.PROCESSOR, File.CONFIG

#: The values the published configs carry (``convert_internvl_weights_to_hf``).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
TILE = Size(height=448, width=448)

START_IMAGE = "<img>"
END_IMAGE = "</img>"
CONTEXT = "<IMG_CONTEXT>"
VIDEO_TOKEN = "<video>"
#: :class:`Tokens`' fields and the tokens they are (``hf_processor.start_image_token``, …).
VOCAB = {
    "start_image": START_IMAGE,
    "end_image": END_IMAGE,
    "context": CONTEXT,
    "video": VIDEO_TOKEN,
}

_STEPS = tiled.square_steps(384)
#: transformers 5.20.2's class attributes.
IMAGE_CLASS = HFClass(
    "GotOcr2ImageProcessor",
    {**_STEPS, "crop_to_patches": False, "min_patches": 1, "max_patches": 12},
)
VIDEO_CLASS = HFClass("InternVLVideoProcessor", {**_STEPS, "do_sample_frames": False})
_BICUBIC_ONLY = kinds.OneOf((kinds.BICUBIC,), "bicubic (3) only")
#: Tiles of one image: published 12; each is 256 tokens and a 448x448 encoder pass.
MAX_TILES = 144


@dataclass(frozen=True)
class _Side(kinds.Kind):
    """``vision_config.image_size``/``patch_size``: one side, or a square ``[h, w]``."""

    hi: int = kinds.MAX_SIDE

    def parse(self, raw: Any, where: str) -> int:
        side = kinds.Int(1, self.hi)
        if isinstance(raw, list | tuple) and len(raw) == 2:
            h, w = side.parse(raw[0], f"{where}[0]"), side.parse(raw[1], f"{where}[1]")
            if h != w:
                raise InputError(f"{where} must be square, got {list(raw)}")
            return h
        return side.parse(raw, where)


@dataclass(frozen=True)
class Vision(Settings):
    """Every setting that shapes InternVL's pixels and tokens under vLLM.

    Defaults are ``OpenGVLab/InternVL3-1B-hf``'s published values (or the class
    defaults those files leave in force). The video processor reads
    video_preprocessor_config.json, else (InternVL3-*-hf ship none)
    preprocessor_config.json; its ``size`` never counts: vLLM rebuilds it
    with the image processor's size.
    """

    IMAGE_CLASSES: ClassVar[tuple[HFClass, ...]] = (IMAGE_CLASS,)
    VIDEO_CLASSES: ClassVar[tuple[HFClass, ...]] = (VIDEO_CLASS,)
    OVERRIDABLE: ClassVar[tuple[str, ...]] = ("num_frames",)
    #: ``crop_to_patches``: the processor passes true on every call
    #: (``InternVLProcessorKwargs._defaults``), over the file's false; no
    #: GotOcr2 step reads a crop; the video ``size`` is replaced by vLLM; the
    #: sampling keys run only with ``do_sample_frames`` (refused).
    INERT: ClassVar[frozenset[str]] = frozenset(
        {
            "crop_to_patches",
            "crop_size",
            "do_center_crop",
            "default_to_square",
            "num_frames",
            "fps",
            "initial_shift",
            "video_metadata",
            "return_metadata",
        }
    )

    image_processor_type: str = setting(
        IMAGE, "image_processor_type", IMAGE_CLASS.name, kinds.OneOf((IMAGE_CLASS.name,))
    )
    #: The tile side; also every video frame's (vLLM's ``size=`` override).
    size: Size = setting(IMAGE, "size", TILE, kinds.SizeKind(square=True))
    resample: int = setting(IMAGE, "resample", kinds.BICUBIC, _BICUBIC_ONLY)
    do_rescale: bool = setting(IMAGE, "do_rescale", True, kinds.Flag())
    rescale_factor: float = setting(IMAGE, "rescale_factor", kinds.RESCALE, kinds.Number(0, 1))
    do_normalize: bool = setting(IMAGE, "do_normalize", True, kinds.Flag())
    image_mean: tuple[float, float, float] = setting(
        IMAGE, "image_mean", IMAGENET_MEAN, kinds.Triple()
    )
    image_std: tuple[float, float, float] = setting(
        IMAGE, "image_std", IMAGENET_STD, kinds.Triple(std=True)
    )
    #: Tiles are cut to ``size`` whatever this says (the last resize is a no-op).
    do_resize: bool = setting(IMAGE, "do_resize", True, kinds.Flag())
    min_patches: int = setting(IMAGE, "min_patches", 1, kinds.Int(1, MAX_TILES))
    #: Tiles; the thumbnail is extra.
    max_patches: int = setting(IMAGE, "max_patches", 12, kinds.Int(1, MAX_TILES))
    video_processor_type: str = setting(
        VIDEO, "video_processor_type", VIDEO_CLASS.name, kinds.OneOf((VIDEO_CLASS.name,))
    )
    #: A frame of another size is refused by vLLM's model (``h = w = image_size``).
    video_do_resize: bool = setting(VIDEO, "do_resize", True, kinds.Flag(only=True))
    video_resample: int = setting(VIDEO, "resample", kinds.BICUBIC, _BICUBIC_ONLY)
    video_do_rescale: bool = setting(VIDEO, "do_rescale", True, kinds.Flag())
    video_rescale_factor: float = setting(
        VIDEO, "rescale_factor", kinds.RESCALE, kinds.Number(0, 1)
    )
    video_do_normalize: bool = setting(VIDEO, "do_normalize", True, kinds.Flag())
    video_mean: tuple[float, float, float] = setting(
        VIDEO, "image_mean", IMAGENET_MEAN, kinds.Triple()
    )
    video_std: tuple[float, float, float] = setting(
        VIDEO, "image_std", IMAGENET_STD, kinds.Triple(std=True)
    )
    #: vLLM drops the video metadata HF's own sampling needs; mmctl reproduces
    #: vLLM's loader's frames only.
    do_sample_frames: bool = setting(VIDEO, "do_sample_frames", False, kinds.Flag(only=False))
    #: Tokens per patch: ``(image_size // patch_size) ** 2 * downsample_ratio ** 2``.
    image_seq_length: int = setting(
        PROCESSOR, "image_seq_length", 256, kinds.Int(1, 65_536), default=256
    )
    image_size: int = setting(CONFIG, "vision_config.image_size", 448, _Side(), default=REQUIRED)
    patch_size: int = setting(CONFIG, "vision_config.patch_size", 14, _Side(256), default=REQUIRED)
    downsample_ratio: float = setting(
        CONFIG, "downsample_ratio", 0.5, kinds.Number(0, 1), default=0.5
    )
    #: Frames vLLM's default loader keeps (``VideoMediaIO(num_frames=32)``; a server's
    #: ``--media-io-kwargs '{"video": {"num_frames": N}}'``; mmctl's ``--num-frames``).
    num_frames: int = llava_onevision.NUM_FRAMES

    @property
    def tile(self) -> tuple[int, int]:
        """(height, width) of a tile and of a video frame."""
        return self.size.target(0, 0)

    def check(self) -> None:
        if self.min_patches > self.max_patches:
            raise InputError(
                f"the image processor's min_patches ({self.min_patches}) is above its "
                f"max_patches ({self.max_patches})"
            )
        if self.tile != (self.image_size, self.image_size):
            raise InputError(
                f"the image processor makes tiles of {dimensions(self.tile[1], self.tile[0])} but "
                f"config.json's vision_config.image_size is {self.image_size}: vLLM's "
                "model refuses pixels of any other size"
            )
        side = self.image_size // self.patch_size
        if side * side * self.downsample_ratio**2 != self.image_seq_length:
            raise InputError(
                f"processor_config.json's image_seq_length ({self.image_seq_length}) is not "
                f"the tokens the model makes of a tile: ({self.image_size} // "
                f"{self.patch_size})^2 x {self.downsample_ratio}^2"
            )


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
        return cls(**tiled.vocab_ids(token_to_id, VOCAB, "InternVL"))

    def placeholder(self, kind: MediaKind) -> int:
        return self.video if kind is MediaKind.VIDEO else self.context

    #: Only the placeholder's own token takes embeddings (not ``<img>``/``</img>``).
    embed = placeholder

    def markers(self) -> dict[int, str]:
        return {self.start_image: "vision_start", self.end_image: "vision_end"}

    def as_dict(self) -> dict[str, int]:
        return {token: getattr(self, name) for name, token in VOCAB.items()}


def internvl_tokens(config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> Tokens:
    """The family's :class:`~mmctl.models.family.TokenReader`: the tokenizer's ids."""
    return Tokens.from_vocab(vocab)


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


def tile_grid(height: int, width: int, settings: Vision = Vision()) -> tuple[int, int]:
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


def num_patches(height: int, width: int, settings: Vision = Vision()) -> int:
    """Patches of one image: the tiles, plus the thumbnail when there is more than one."""
    cols, rows = tile_grid(height, width, settings)
    return cols * rows + (1 if cols * rows > 1 else 0)


def image_patches(rgb: np.ndarray, settings: Vision = Vision()) -> list[np.ndarray]:
    """The uint8 ``[448, 448, 3]`` patches of one image, in HF's order: tiles row by
    row, then the thumbnail (``crop_image_to_patches``, then ``_preprocess``'s resize,
    which leaves 448x448 patches as they are)."""
    tiles.check_rgb(rgb)
    tile_h, tile_w = settings.tile
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


def image_pixels(rgb: np.ndarray, settings: Vision = Vision()) -> np.ndarray:
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


def sample_indices(total_frames: int, settings: Vision = Vision()) -> np.ndarray:
    """The frames vLLM's default (OpenCV) loader keeps — the same rule as OneVision's."""
    return llava_onevision.sample_indices(total_frames, settings.num_frames)


def video_pixels(frames: np.ndarray, settings: Vision = Vision()) -> np.ndarray:
    """``[F, H, W, 3]`` uint8 sampled frames → ``float32 [F, 3, 448, 448]``: one patch a
    frame, at the image tile's size (vLLM's ``size=`` override)."""
    if frames.ndim != 4 or frames.shape[0] == 0:
        raise InputError(f"expected [F, H, W, 3] frames, got shape {frames.shape}")
    tiles.check_rgb(frames[0])
    return tiles.rescale_normalize(
        np.stack([_resize(f, settings.tile, settings.video_resample) for f in frames]),
        do_rescale=settings.video_do_rescale,
        rescale_factor=settings.video_rescale_factor,
        do_normalize=settings.video_do_normalize,
        mean=settings.video_mean,
        std=settings.video_std,
    )


# ---- prompt ----


def image_token_ids(
    patches: int, tokens: Tokens = Tokens(), settings: Vision = Vision()
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
    settings: Vision = Vision(),
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


def image_tokens(patches: int, settings: Vision = Vision()) -> int:
    """Length of one image's replacement: its patches' tokens and ``<img>``/``</img>``."""
    return patches * settings.image_seq_length + 2


def embed_mask(replacement: Sequence[int], embed_token: int) -> np.ndarray:
    """Which positions of a replacement receive the item's embeddings
    (``PromptUpdateDetails.select_token_id``): those holding ``embed_token`` —
    ``tokens.context`` for an image, ``tokens.video`` for a video."""
    return np.asarray(replacement, dtype=np.int64) == embed_token


# ---- the family's parts ----


def image_item(rgb: np.ndarray, vision: Vision) -> tiled.Item:
    pixels = image_pixels(rgb, vision)
    count = int(pixels.shape[0])
    return tiled.Item(pixels, count * vision.image_seq_length, extra={"patches": count}, rows=count)


def video_item(frames: np.ndarray, vision: Vision) -> tiled.Item:
    count = int(frames.shape[0])
    return tiled.Item(
        video_pixels(frames, vision),
        count * vision.image_seq_length,
        extra={"frames": count},
        rows=count,
    )


def _tokens(model: ModelView) -> Tokens:
    found = model.token_ids
    assert isinstance(found, Tokens), "the InternVL family resolves its Tokens"
    return found


def replacement(item: ItemFacts, model: ModelView) -> list[int]:
    """vLLM's ``get_replacement_interns1_image`` / ``_video`` for one item."""
    vision, tokens = tiled.settings_of(model, Vision), _tokens(model)
    rows = int(item.rows or 0)
    if item.kind is MediaKind.IMAGE:
        return image_token_ids(rows, tokens, vision)
    return video_token_ids(rows, model.tokenizer.encode_cached, tokens, vision)


def frames(item: ItemFacts, model: ModelView) -> Frames | None:
    """A video's ``<video>`` runs: one of ``image_seq_length`` per frame."""
    if item.kind is not MediaKind.VIDEO:
        return None
    return Frames(int(item.rows or 0), tiled.settings_of(model, Vision).image_seq_length)


def chat_format(body: str, system: str | None) -> str:
    """The Qwen2 chat format InternVL's template writes for one user turn."""
    turns = [f"<|im_start|>system\n{system}<|im_end|>\n"] if system else []
    turns.append(f"<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n")
    return "".join(turns)


def _fields(kind: MediaKind) -> tuple[WireField, ...]:
    """vLLM's ``InternS1MultiModalProcessor._get_mm_fields_config`` for one modality:
    the patches flat by ``<kind>_num_patches`` (batched, on the CPU), and the
    embedding token id shared by the batch (the model reads ``kwargs[…]``).
    vLLM's token id is 0-d, which the wire cannot carry; the model flattens it."""
    what = "patches: tiles, then the thumbnail" if kind is MediaKind.IMAGE else "frames"
    sizes = f"{kind.value}_num_patches"
    renamed = " (pixel_values_videos at the worker)" if kind is MediaKind.VIDEO else ""
    return (
        tiled.flat_pixels(f"[Σ {what.split(':')[0]}, 3, S, S] normalized {what}{renamed}", sizes),
        WireField(
            sizes,
            FieldLayout.BATCHED,
            ROWS,
            "int64",
            (),
            f"[{kind.value}s] {what.split(':')[0]} per {kind.value} (the flat sizes)",
            keep_on_cpu=True,
        ),
        WireField(
            f"{kind.value}_token_id",
            FieldLayout.SHARED,
            EMBED,
            "int64",
            (),
            f"[1] the {kind.value} embedding token id",
            keep_on_cpu=True,
        ),
    )


FIELDS = {kind: _fields(kind) for kind in (MediaKind.IMAGE, MediaKind.VIDEO)}


def received_items(batch: Received, model: ModelView) -> list[ItemFacts]:
    kind, count = batch.kind, batch.count
    vision = tiled.settings_of(model, Vision)
    key = f"{kind.value}_num_patches"
    if key not in batch.tensors:
        raise ContractError(f"carries no {key} tensor")
    sizes = np.asarray(batch.tensors[key])
    if list(sizes.shape) != [count]:
        raise ContractError(
            f"has shape {list(sizes.shape)}; {count} placeholder(s) need [{count}]", key
        )
    most = vision.max_patches + 1 if kind is MediaKind.IMAGE else None
    out = []
    for n in sizes.tolist():
        if n < 1 or (most is not None and n > most):
            bound = f"1 to {most}" if most is not None else "at least 1"
            raise ContractError(f"holds {n} patches for one {kind.value}; {bound} fit", key)
        unit = "patches" if kind is MediaKind.IMAGE else "frames"
        out.append(ItemFacts(kind, n * vision.image_seq_length, extra={unit: n}, rows=n))
    return out


NAME = "internvl"
FAMILY = Family(
    name=NAME,
    aliases=("internvl3", "interns1"),
    model_types=("internvl",),
    modalities=(MediaKind.IMAGE, MediaKind.VIDEO),
    settings=Vision,
    tokens=internvl_tokens,
    processor=tiled.TileProcessor(
        NAME, image_item, video_item, lambda total, fps, vision: sample_indices(total, vision)
    ),
    prompt=tiled.RunPrompt(
        NAME,
        replacement,
        media_words=(CONTEXT, VIDEO_TOKEN),
        chat=chat_format,
        frame_runs=frames,
    ),
    wire=tiled.TileWire(
        FIELDS, {MediaKind.IMAGE: tiled.concatenate, MediaKind.VIDEO: tiled.concatenate}
    ),
    contract=tiled.TileContract(
        NAME, received_items, tiled.flat_expected(Vision), tiled.flat_tiles, tiled.last_tile
    ),
)
