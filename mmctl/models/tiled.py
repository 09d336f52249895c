"""What the tile families (LLaVA-1.5, LLaVA-NeXT, LLaVA-OneVision, Llama 4)
share, as parts a family module fills in with its own pure functions.

Their items are channel-first float tiles as the HF processor returns them
(``[3, S, S]`` for LLaVA-1.5, ``[tiles, 3, S, S]`` for anyres and Llama 4,
``[frames, 3, S, S]`` for a OneVision video), normalized on the client: vLLM
normalizes only the Qwen families on the device, so raw uint8 is refused.

- :class:`TileProcessor`: media → one :class:`Item` per file (the family's
  ``image_item`` / ``video_item``), its frames sampled as vLLM's loader does.
- :class:`RunPrompt`: vLLM's ``PromptReplacement``: each placeholder becomes
  its item's replacement (a run of the embedding token unless the family
  says otherwise: Llama 4); the check is that every span is exactly that.
- :class:`TileWire`: the field table, and how the HF processor batches items.
- :class:`TileContract`: items read back from received tensors, and the
  pixel shape vLLM's TensorSchema takes for them.

:class:`ClipImage` declares the CLIP-style image processor settings and the
vision tower's config keys the LLaVA families share.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from mmctl.choices import LayoutKind, PixelFormat
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models import kinds
from mmctl.models.family import ModelView
from mmctl.models.settings import REQUIRED, File, Settings, setting
from mmctl.preprocessing.tiles import Size
from mmctl.values.fields import PIXELS, FieldLayout, WireField
from mmctl.values.items import (
    FrameCallback,
    Frames,
    ItemFacts,
    ItemOptions,
    Preprocessed,
    Timings,
)
from mmctl.values.layout import Layout, LayoutCheck, span_outside
from mmctl.values.received import ContractError, Received

IMAGE, VIDEO, CONFIG = File.IMAGE, File.VIDEO, File.CONFIG

#: One unit's pixels are sampled on this stride for the stub's colour answer.
COLOUR_STRIDE = 8

#: ``CLIPImageProcessor``'s class attributes (transformers 5.20.2), as file values.
CLIP_IMAGE_DEFAULTS: Mapping[str, Any] = {
    "do_resize": True,
    "size": {"shortest_edge": 224},
    "resample": kinds.BICUBIC,
    "do_center_crop": True,
    "crop_size": {"height": 224, "width": 224},
    "do_rescale": True,
    "rescale_factor": kinds.RESCALE,
    "do_normalize": True,
    "image_mean": kinds.CLIP_MEAN,
    "image_std": kinds.CLIP_STD,
    "do_pad": False,
}
_BICUBIC_ONLY = kinds.OneOf((kinds.BICUBIC,), "bicubic (3) only")


def square_steps(side: int) -> dict[str, Any]:
    """The class attributes of a processor that resizes to ``side`` x ``side``
    (bicubic), rescales and normalizes with CLIP's mean/std, as file values
    (OneVision's image and video processors, InternVL's)."""
    return {
        "do_resize": True,
        "size": {"height": side, "width": side},
        "resample": kinds.BICUBIC,
        "do_rescale": True,
        "rescale_factor": kinds.RESCALE,
        "do_normalize": True,
        "image_mean": kinds.CLIP_MEAN,
        "image_std": kinds.CLIP_STD,
    }


def vocab_ids(
    token_to_id: Callable[[str], int | None], tokens: Mapping[str, str], family: str
) -> dict[str, int]:
    """``{field: id}`` of each ``{field: token}`` from a tokenizer's ``token_to_id``;
    :class:`InputError` naming the first token the vocabulary lacks."""
    found: dict[str, int] = {}
    for name, token in tokens.items():
        value = token_to_id(token)
        if value is None:
            raise InputError(
                f"the tokenizer has no {token} token, which {family}'s prompt needs",
                hint=f"check that the model folder's tokenizer.json is {family}'s",
            )
        found[name] = value
    return found


@dataclass(frozen=True)
class ClipImage(Settings):
    """The CLIP-style image steps (shortest-edge resize, centre crop, fused
    rescale + normalize) and the vision tower's geometry from config.json.
    Defaults: LLaVA-1.5's published values; a family's ``PUBLISHED`` differs."""

    #: Keys of these processors' files that do not change the tensors vLLM gets.
    INERT: ClassVar[frozenset[str]] = frozenset({"default_to_square"})

    image_processor_type: str = setting(
        IMAGE, "image_processor_type", "CLIPImageProcessor", kinds.OneOf(())
    )
    do_resize: bool = setting(IMAGE, "do_resize", True, kinds.Flag())
    size: Size = setting(IMAGE, "size", Size(shortest_edge=336), kinds.SizeKind())
    resample: int = setting(IMAGE, "resample", kinds.BICUBIC, _BICUBIC_ONLY)
    do_center_crop: bool = setting(IMAGE, "do_center_crop", True, kinds.Flag())
    #: (height, width); ``None`` where the class has no crop (OneVision).
    crop_size: tuple[int, int] | None = setting(IMAGE, "crop_size", (336, 336), kinds.Crop())
    do_rescale: bool = setting(IMAGE, "do_rescale", True, kinds.Flag())
    rescale_factor: float = setting(IMAGE, "rescale_factor", kinds.RESCALE, kinds.Number(0, 1))
    do_normalize: bool = setting(IMAGE, "do_normalize", True, kinds.Flag())
    image_mean: tuple[float, float, float] = setting(
        IMAGE, "image_mean", kinds.CLIP_MEAN, kinds.Triple()
    )
    image_std: tuple[float, float, float] = setting(
        IMAGE, "image_std", kinds.CLIP_STD, kinds.Triple(std=True)
    )
    do_pad: bool = setting(IMAGE, "do_pad", False, kinds.Flag())
    image_size: int = setting(
        CONFIG, "vision_config.image_size", 336, kinds.Int(1, kinds.MAX_SIDE), default=REQUIRED
    )
    patch_size: int = setting(
        CONFIG, "vision_config.patch_size", 14, kinds.Int(1, 256), default=REQUIRED
    )
    vision_model_type: str = setting(
        CONFIG,
        "vision_config.model_type",
        "clip_vision_model",
        kinds.OneOf(("clip_vision_model", "siglip_vision_model"), "a CLIP or SigLIP tower"),
        default=REQUIRED,
    )
    image_token_index: int = setting(
        CONFIG, "image_token_index", 32000, kinds.TokenId(), aliases=("image_token_id",)
    )
    vision_feature_select_strategy: str = setting(
        CONFIG,
        "vision_feature_select_strategy",
        "default",
        kinds.OneOf(("default", "full", "class")),
    )

    def normalize(self, frames: np.ndarray) -> np.ndarray:
        """``[..., H, W, 3]`` uint8 → ``[..., 3, H, W]`` float32, rescaled and
        normalized as these settings say (HF's fused float order)."""
        from mmctl.preprocessing.tiles import normalized

        return normalized(frames, self)

    def tower_tokens(self) -> int:
        """Tokens of one pass of the vision tower, as vLLM selects them."""
        from mmctl.preprocessing.tiles import vision_tokens

        return vision_tokens(
            self.image_size,
            self.patch_size,
            self.vision_model_type,
            self.vision_feature_select_strategy,
        )

    def check(self) -> None:
        if self.image_size < self.patch_size:
            raise InputError(
                f"config.json: vision_config.image_size ({self.image_size}) is smaller than its "
                f"patch_size ({self.patch_size})"
            )
        if self.do_center_crop and self.crop_size is None:
            raise InputError("do_center_crop is set but crop_size is not")


@dataclass(frozen=True)
class PlaceholderTokens:
    """One token per modality that the chat template writes and vLLM repeats
    (LLaVA's ``<image>``, OneVision's ``<video>``), from ``config.json``."""

    image: int
    video: int | None = None

    def placeholder(self, kind: MediaKind) -> int:
        found = self.image if kind is MediaKind.IMAGE else self.video
        if found is None:
            raise InputError(f"this model has no {kind.value} token (config.json)")
        return found

    def embed(self, kind: MediaKind) -> int:
        return self.placeholder(kind)

    def markers(self) -> dict[int, str]:
        return {}

    def as_dict(self) -> dict[str, int]:
        out = {"image_token_index": self.image}
        if self.video is not None:
            out["video_token_index"] = self.video
        return out


def placeholder_tokens(settings: type[Settings]) -> Callable[..., PlaceholderTokens]:
    """The family's :class:`~mmctl.models.family.TokenReader`: its settings'
    ``image_token_index`` (and ``video_token_index``), read from config.json."""

    def read(config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> PlaceholderTokens:
        from mmctl.checkpoint.files import ModelFiles

        resolved: Any = settings.resolve(ModelFiles(config=config), "").settings
        return PlaceholderTokens(
            resolved.image_token_index, getattr(resolved, "video_token_index", None)
        )

    return read


# ---- the processor --------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One item's pixels and what its prompt expansion and batch need."""

    pixels: np.ndarray  # float32, the HF processor's shape for one item
    tokens: int  # embedding positions
    tensors: Mapping[str, np.ndarray] = field(default_factory=dict)  # its row of each other tensor
    extra: Mapping[str, Any] = field(default_factory=dict)
    rows: int | None = None  # its share of a flat pixel tensor
    #: (height, width) it was resized to, where the pixels' last axes are not that
    #: (Gemma 4's patch rows); default: the pixel tensor's last two axes.
    resized: tuple[int, int] | None = None


@dataclass(frozen=True)
class TileProcessor:
    """Media → :class:`Item` through the family's pure functions."""

    name: str
    image_item: Callable[[np.ndarray, Any], Item]
    video_item: Callable[[np.ndarray, Any], Item] | None = None
    #: ``sample_indices(total_frames, source_fps, settings)``: the frames vLLM's loader keeps.
    sample_indices: Callable[[int, float, Any], np.ndarray] | None = None
    #: ``timestamps(indices, source_fps)``: the time of each kept frame that the
    #: prompt writes (``Preprocessed.patch_times``); ``None``: the prompt writes none.
    timestamps: Callable[[np.ndarray, float], Sequence[float]] | None = None
    worker_pixels: PixelFormat = PixelFormat.FLOAT32
    device_normalize: bool = False

    def preprocess(
        self, path: Path, kind: MediaKind, settings: Any, fmt: PixelFormat, options: ItemOptions
    ) -> Preprocessed:
        from mmctl.media.image import load_image

        start = time.perf_counter()
        indices = np.zeros(0, dtype=np.int64)
        times: tuple[float, ...] = ()
        stamps: tuple[float, ...] = ()
        source: Any
        if kind is MediaKind.IMAGE:
            source, rgb = load_image(path)
            loaded = time.perf_counter()
            item = self.image_item(rgb, settings)
            frames: tuple[np.ndarray, ...] = (rgb,) if options.keep_frames else ()
        else:
            if self.video_item is None or self.sample_indices is None:
                raise InputError(f"{self.name} models read images only")
            source, stack, indices = self._decode(path, settings, options.on_frame)
            if options.strict and source.warnings:
                raise InputError(
                    source.warnings[0], hint="without --strict mmctl uses the frames that decode"
                )
            loaded = time.perf_counter()
            item = self.video_item(stack, settings)
            times = tuple(float(i) / source.source_fps for i in indices)
            if self.timestamps is not None:
                stamps = tuple(self.timestamps(indices, source.source_fps))
            frames = tuple(stack) if options.keep_frames else ()
        end = time.perf_counter()
        resized = item.resized or (int(item.pixels.shape[-2]), int(item.pixels.shape[-1]))
        return Preprocessed(
            kind=kind,
            family=self.name,
            params=settings,
            pixel_format=fmt,
            pixel_values=as_format(item.pixels, fmt),
            grid_thw=None,
            resized=resized,
            source=source,
            frame_indices=indices,
            frame_times=times,
            patch_times=stamps,
            num_tokens=item.tokens,
            timings=Timings(decode_s=loaded - start, preprocess_s=end - loaded),
            frames=frames,
            item_tensors=item.tensors,
            extra=item.extra,
            flat_rows=item.rows,
        )

    def _decode(
        self, path: Path, settings: Any, on_frame: FrameCallback | None
    ) -> tuple[Any, np.ndarray, np.ndarray]:
        from mmctl.media.video import decode_sampled

        assert self.sample_indices is not None, "checked by preprocess"
        sample = self.sample_indices
        frames: list[np.ndarray] = []
        wanted: dict[str, int] = {}

        def sampler(total: int, fps: float) -> np.ndarray:
            indices = sample(total, fps, settings)
            wanted["count"] = len(indices)
            return indices

        def sink(pos: int, rgb: np.ndarray) -> None:
            if pos == 0:
                frames.clear()  # a second pass (the frame count was mispredicted)
            frames.append(rgb)
            if on_frame is not None:
                on_frame(pos + 1, wanted.get("count", pos + 1))

        info, indices = decode_sampled(path, sampler, sink)
        if not frames:
            raise InputError(f"{path}: the video decoded to no frames")
        return info, np.stack(frames), np.asarray(indices, dtype=np.int64)


#: ``vllm/multimodal/media/video.py`` ``VideoMediaIO(num_frames=32)``: the frames
#: vLLM's default loader keeps of a clip.
LOADER_FRAMES = 32


def loader_indices(
    total_frames: int, source_fps: float, num_frames: int = LOADER_FRAMES, fps: float = -1.0
) -> np.ndarray:
    """int64 indices of the frames vLLM's default (OpenCV) loader keeps
    (``VideoBackend.compute_frames_index_to_sample``): ``min(num_frames, total)``
    frames (every frame when ``num_frames <= 0``), fewer when a target ``fps``
    (``--media-io-kwargs``) asks for ``floor(duration * fps)``, at least one;
    every frame when that is all of them, else ``np.linspace(0, total - 1, n,
    dtype=int)`` — truncated, not rounded.

    ``total_frames <= 0`` is refused: vLLM's rule would ask for frame 0 of nothing.
    """
    if total_frames <= 0:
        raise InputError(f"a video with {total_frames} frames has nothing to sample")
    count = total_frames if num_frames <= 0 else min(num_frames, total_frames)
    if fps > 0:
        duration = total_frames / source_fps if source_fps > 0 else 0.0
        count = min(count, math.floor(duration * fps))
    count = max(1, count)
    if count == total_frames:
        return np.arange(total_frames, dtype=np.int64)
    return np.linspace(0, total_frames - 1, count, dtype=int).astype(np.int64)


def as_format(pixels: np.ndarray, fmt: PixelFormat) -> np.ndarray:
    """Normalized float32 pixels in the wire format (bf16 as uint16 bit patterns)."""
    from mmctl.preprocessing.pixels import float32_to_bfloat16_bits

    if fmt is PixelFormat.FLOAT32:
        return np.ascontiguousarray(pixels, dtype=np.float32)
    if fmt is PixelFormat.BFLOAT16:
        return float32_to_bfloat16_bits(np.ascontiguousarray(pixels, dtype=np.float32))
    return pixels.astype(np.float16)


# ---- the prompt -------------------------------------------------------------------


def embed_run(item: ItemFacts, model: ModelView) -> list[int]:
    """The replacement of most placeholders: the item's run of its embedding token."""
    return [model.token_ids.embed(item.kind)] * item.tokens


def no_frames(item: ItemFacts, model: ModelView) -> Frames | None:
    return None  # images only


def no_chat_format(name: str) -> Callable[[str, str | None], str]:
    def refuse(body: str, system: str | None) -> str:
        raise InputError(
            f"the model folder has no chat template that writes {name}'s media "
            "placeholders (chat_template.jinja, or chat_template in tokenizer_config.json)",
            hint="add the checkpoint's template, or --no-chat to send the text as it is",
        )

    return refuse


@dataclass(frozen=True)
class RunPrompt:
    """vLLM's ``PromptReplacement`` for a family whose placeholder token the chat
    template writes once per item: that token becomes ``replacement(item)``."""

    name: str
    replacement: Callable[[ItemFacts, ModelView], list[int]] = embed_run
    #: A chat template that names all of these writes this family's placeholders.
    media_words: tuple[str, ...] = ("image",)
    #: mmctl's own chat format for folders without such a template (default: refuse).
    chat: Callable[[str, str | None], str] | None = None
    default_system: str | None = None
    check_name: str = "placeholder_spans"
    #: How a video item's run divides into frames (a family that reads video says).
    frame_runs: Callable[[ItemFacts, ModelView], Frames | None] = no_frames
    #: What one item's placeholder token is written as in mmctl's own prompt
    #: (Gemma 4's template sets each on a line of its own).
    wrap: str = "{}"
    #: ``span_problem(span_ids, item, model)``: what in a span vLLM's model would
    #: not read as its item, or ``None``; default: the span must be exactly the
    #: item's replacement (a family whose replacement needs what a received
    #: request does not carry — Gemma 4's timestamps — checks its structure).
    span_problem: Callable[[np.ndarray, ItemFacts, ModelView], str | None] | None = None

    def knows_media(self, template: str) -> bool:
        return all(word in template for word in self.media_words)

    def frames(self, item: ItemFacts, model: ModelView) -> Frames | None:
        return self.frame_runs(item, model)

    def placeholder_text(self, kind: MediaKind, model: ModelView) -> str:
        token = model.tokenizer.id_to_token(model.token_ids.placeholder(kind))
        if token is None:
            raise InputError(
                f"the tokenizer ({model.tokenizer.label}) has no token "
                f"{model.token_ids.placeholder(kind)} (config.json's {kind.value} token)"
            )
        return self.wrap.format(token)

    def chat_format(self, body: str, system: str | None) -> str:
        return (self.chat or no_chat_format(self.name))(body, system)

    def expand(
        self, ids: Sequence[int], items: Sequence[ItemFacts], model: ModelView, layout: LayoutKind
    ) -> Layout:
        from mmctl.prompt.layout import replace_placeholders

        if layout is not LayoutKind.VLLM:
            raise UsageError(f"--layout {layout.value} is a Qwen3-VL video layout")
        return replace_placeholders(
            ids, items, model.token_ids, lambda item: self.replacement(item, model)
        )

    def check(self, layout: Layout, items: Sequence[ItemFacts], model: ModelView) -> LayoutCheck:
        """Each span is exactly the item's replacement: the embedding positions the
        servicer marks (``im_token_id`` inside the span) are the item's features."""
        ids = layout.ids
        for span, item in zip(layout.spans, items, strict=True):
            n = span.item + 1
            outside = span_outside(span, len(ids))
            if outside is not None:
                return outside
            got = ids[span.offset : span.end]
            if self.span_problem is not None:
                problem = self.span_problem(got, item, model)
                if problem is not None:
                    return LayoutCheck(False, f"item {n}: {problem}", n)
                continue
            want = np.asarray(self.replacement(item, model), dtype=np.int64)
            embed = model.token_ids.embed(item.kind)
            if len(got) != len(want) or not np.array_equal(got, want):
                held = int(np.count_nonzero(got == embed))
                at = _first_difference(got, want)
                return LayoutCheck(
                    False,
                    f"item {n}: its span of {len(got)} tokens holds {held} embedding tokens "
                    f"({embed}); the {item.kind.value} needs {item.tokens} in a run of "
                    f"{len(want)} tokens (first difference at token {span.offset + at})",
                    n,
                )
        return LayoutCheck(True)


def _first_difference(got: np.ndarray, want: np.ndarray) -> int:
    n = min(len(got), len(want))
    diff = np.flatnonzero(got[:n] != want[:n])
    return int(diff[0]) if len(diff) else n


# ---- the wire ---------------------------------------------------------------------


def flat_pixels(content: str, sizes: str) -> WireField:
    """A flat ``[Σ rows, 3, S, S]`` pixel tensor split per item by ``sizes``."""
    return WireField(
        "pixel_values", FieldLayout.FLAT, PIXELS, PIXELS, (3, "S", "S"), content, sizes=sizes
    )


def stack(items: Sequence[np.ndarray]) -> np.ndarray:
    """Items batched one per row (their shapes equal)."""
    return np.stack(items)


def concatenate(items: Sequence[np.ndarray]) -> np.ndarray:
    """Items' rows one after another (a flat tensor split by a sizes tensor)."""
    return items[0] if len(items) == 1 else np.concatenate(items)


@dataclass(frozen=True)
class TileWire:
    #: The field table per modality (vLLM's ``_get_mm_fields_config``).
    table: Mapping[MediaKind, tuple[WireField, ...]]
    #: How the HF processor joins a modality's items (default: one per row).
    batch: Mapping[MediaKind, Callable[[Sequence[np.ndarray]], np.ndarray]] = field(
        default_factory=dict
    )

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        return self.table[kind]

    def batch_pixels(self, kind: MediaKind, items: Sequence[np.ndarray]) -> np.ndarray:
        return self.batch.get(kind, stack)(items)


# ---- the stub's contract ----------------------------------------------------------


def first_tile(tiles: np.ndarray, item: ItemFacts) -> np.ndarray:
    return tiles[0]


def flat_expected(
    cls: type[Any],
) -> Callable[[MediaKind, Sequence[ItemFacts], ModelView], tuple[int | str, ...]]:
    """:attr:`TileContract.expected` of a flat pixel tensor: the items' rows of
    ``[3, S, S]`` tiles, ``S`` the settings' (``cls``) ``image_size``."""

    def expected(
        kind: MediaKind, items: Sequence[ItemFacts], model: ModelView
    ) -> tuple[int | str, ...]:
        side = settings_of(model, cls).image_size
        return (sum(int(it.rows or 0) for it in items), 3, side, side)

    return expected


def last_tile(tiles: np.ndarray, item: ItemFacts) -> np.ndarray:
    """Llama 4's global tile, InternVL's thumbnail (each the only one of a one-tile image)."""
    return tiles[-1]


def flat_tiles(pixels: np.ndarray, items: Sequence[ItemFacts]) -> list[np.ndarray]:
    """Each item's share of a flat pixel tensor: its ``rows``, in order."""
    bounds = np.cumsum([0, *[int(it.rows or 0) for it in items]])
    return [pixels[a:b] for a, b in itertools.pairwise(bounds.tolist())]


@dataclass(frozen=True)
class TileContract:
    """How a family's items are read back from the tensors a worker receives."""

    name: str
    #: ``read(batch, model)``: the batch's items.
    read: Callable[[Received, ModelView], list[ItemFacts]]
    #: ``expected(kind, items, model)``: the pixel tensor's shape vLLM's schema takes.
    expected: Callable[[MediaKind, Sequence[ItemFacts], ModelView], tuple[int | str, ...]]
    #: Each item's ``[k, 3, S, S]`` share of the batch's pixel tensor (default: its row).
    item_tiles: Callable[[np.ndarray, Sequence[ItemFacts]], list[np.ndarray]] | None = None
    #: The tile of an image that shows all of it (default: the first).
    whole_image: Callable[[np.ndarray, ItemFacts], np.ndarray] = first_tile

    def received_items(self, batch: Received, model: ModelView) -> list[ItemFacts]:
        return self.read(batch, model)

    def check_received(self, batch: Received, model: ModelView) -> None:
        from mmctl.modality import pixel_key

        if batch.raw:
            raise ContractError(
                f"holds raw uint8 pixels; vLLM normalizes {self.name} pixels in its processor "
                "(no device normalization for this model)",
                "pixel_values",
            )
        items = self.received_items(batch, model)
        want = self.expected(batch.kind, items, model)
        got = tuple(batch.tensors[pixel_key(batch.kind)].shape)
        if len(got) != len(want) or any(
            isinstance(w, int) and w != g for w, g in zip(want, got, strict=False)
        ):
            shown = ", ".join(str(w) for w in want)
            raise ContractError(
                f"has shape {list(got)}; vLLM's {self.name} input schema for these "
                f"{batch.count} item(s) is [{shown}]",
                "pixel_values",
            )

    def unit_means(
        self, kind: MediaKind, pixels: np.ndarray, items: Sequence[ItemFacts], model: ModelView
    ) -> list[list[np.ndarray]]:
        """Per item: its sampled pixels of each frame (video) or of its whole-image
        tile (the base tile, or Llama 4's global one), as ``[k, 3]`` rows."""
        if self.item_tiles is not None:
            shares = self.item_tiles(pixels, items)
        else:
            shares = [pixels[n].reshape(-1, *pixels.shape[-3:]) for n in range(len(items))]
        out = []
        for n, tiles in enumerate(shares):
            units = tiles if kind is MediaKind.VIDEO else [self.whole_image(tiles, items[n])]
            out.append([_sampled(u) for u in units])
        return out


def _sampled(tile: np.ndarray) -> np.ndarray:
    """A ``[3, S, S]`` tile's pixels on a stride, as ``[k, 3]`` rows."""
    return np.asarray(tile[:, ::COLOUR_STRIDE, ::COLOUR_STRIDE]).reshape(3, -1).T


def settings_of(model: ModelView, cls: type[Any]) -> Any:
    """The model's settings, checked to be the family's own class."""
    found = model.params
    assert isinstance(found, cls), f"this family resolves {cls.__name__}"
    return found
