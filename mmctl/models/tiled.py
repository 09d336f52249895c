"""What the tile families (LLaVA-1.5, LLaVA-NeXT, LLaVA-OneVision, Llama 4)
share behind :class:`~mmctl.models.family.Family`.

Their items are channel-first float tiles as the HF processor returns them
(``[3, S, S]`` for LLaVA-1.5, ``[tiles, 3, S, S]`` for anyres and Llama 4,
``[frames, 3, S, S]`` for a OneVision video), normalized on the client: vLLM
normalizes only the Qwen families on the device, so raw uint8 is refused.
Each item's placeholder becomes one run of tokens (vLLM's
``PromptReplacement``; :func:`mmctl.prompt.layout.replace_placeholders`),
and the check of a laid-out prompt is that every span is exactly that run.

A family module subclasses :class:`TileFamily` with what differs: its
settings, its pixels and token counts (its own pure functions), its field
table, the replacement of one placeholder, and how an item is read back from
the tensors a worker receives.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mmctl.choices import LayoutKind, PixelFormat
from mmctl.errors import InputError, UsageError
from mmctl.media.probe import MediaKind
from mmctl.models.family import ContractError, Frames, ItemFacts, Tokens
from mmctl.models.fields import WireField
from mmctl.prompt.mrope import WalkResult

if TYPE_CHECKING:
    from mmctl.models.base import ModelFiles, VisionOverrides
    from mmctl.models.model import Model
    from mmctl.preprocessing.pipeline import Allocator, FrameCallback, Preprocessed
    from mmctl.prompt.layout import Layout

#: One unit's pixels are sampled on this stride for the stub's colour answer.
COLOUR_STRIDE = 8


class FixedVision:
    """Settings read from the model folder only: the Qwen sampling/budget flags
    (``--fps``, ``--min-pixels``, …) have no meaning for these processors.
    ``OVERRIDABLE``: the flags a family does take (OneVision's ``--num-frames``)."""

    OVERRIDABLE: tuple[str, ...] = ()

    def overridden(self, overrides: VisionOverrides) -> Any:
        given = overrides.changes()
        refused = [k for k in given if k not in self.OVERRIDABLE]
        if refused:
            flags = ", ".join(f"--{k.replace('_', '-')}" for k in refused)
            raise UsageError(
                f"{flags}: this model's processor has no such setting (they shape Qwen-VL's "
                "sampling and pixel budget)",
                hint="its settings come from the model folder's processor configs",
            )
        return replace(self, **given) if given else self  # type: ignore[type-var]

    def settings(self) -> dict[str, Any]:
        return {key: _plain(value) for key, value in asdict(self).items()}  # type: ignore[call-overload]


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


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


@dataclass(frozen=True)
class Item:
    """One item's pixels and what its prompt expansion and batch need."""

    pixels: np.ndarray  # float32, the HF processor's shape for one item
    tokens: int  # embedding positions
    tensors: Mapping[str, np.ndarray] = field(default_factory=dict)  # its row of each other tensor
    extra: Mapping[str, Any] = field(default_factory=dict)
    rows: int | None = None  # its share of a flat pixel tensor


class TileFamily:
    """The shared half of the tile families (see the module docstring)."""

    name: str
    aliases: tuple[str, ...]
    model_types: tuple[str, ...]
    modalities: tuple[MediaKind, ...] = (MediaKind.IMAGE,)
    worker_pixels: PixelFormat = PixelFormat.FLOAT32
    device_normalize: bool = False
    default_system: str | None = None
    #: Every span is exactly its item's replacement (:meth:`check`).
    layout_check: str = "placeholder_spans"

    # ---- what a family module provides --------------------------------------

    def resolve(self, files: ModelFiles) -> Any:
        """The family's ``Vision`` from the folder's processor files and config."""
        raise NotImplementedError

    def image_item(self, rgb: np.ndarray, vision: Any) -> Item:
        raise NotImplementedError

    def video_item(self, frames: np.ndarray, vision: Any) -> Item:
        raise InputError(f"{self.name} models read images only")

    def sample_indices(self, total_frames: int, vision: Any) -> np.ndarray:
        raise InputError(f"{self.name} models read images only")

    def replacement(self, item: ItemFacts, model: Model) -> list[int]:
        """The tokens one placeholder becomes (its span)."""
        return [model.token_ids.embed(item.kind)] * item.tokens

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        raise NotImplementedError

    def batch_pixels(self, kind: MediaKind, items: Sequence[np.ndarray]) -> np.ndarray:
        return np.stack(items)

    def received_items(
        self, kind: MediaKind, tensors: Mapping[str, np.ndarray], count: int, model: Model
    ) -> list[ItemFacts]:
        raise NotImplementedError

    def expected_pixels(
        self, kind: MediaKind, items: Sequence[ItemFacts], model: Model
    ) -> tuple[int | str, ...]:
        """The pixel tensor's shape vLLM's TensorSchema takes for these items."""
        raise NotImplementedError

    def tokens(self, config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> Tokens:
        raise NotImplementedError

    def matches(self, config: Mapping[str, Any]) -> bool:
        return config.get("model_type") in self.model_types

    # ---- the family interface -----------------------------------------------

    def vision(self, files: ModelFiles) -> tuple[Any, dict[str, str]]:
        vision = self.resolve(files)
        shipped = [
            name
            for name, value in (
                ("preprocessor_config.json", files.preprocessor_config),
                ("processor_config.json", files.processor_config),
                ("video_preprocessor_config.json", files.video_preprocessor_config),
            )
            if value
        ]
        origin = (
            f"{' + '.join(shipped)} + config.json"
            if shipped
            else f"published {self.name} checkpoint (no processor config)"
        )
        return vision, dict.fromkeys(vision.settings(), origin)

    def preprocess(
        self,
        path: Path,
        kind: MediaKind,
        model: Model,
        pixel_format: PixelFormat,
        *,
        keep_frames: bool = False,
        on_frame: FrameCallback | None = None,
        allocate: Allocator | None = None,
        strict: bool = False,
    ) -> Preprocessed:
        from mmctl.media.image import load_image
        from mmctl.preprocessing.pipeline import Preprocessed, Timings

        if pixel_format is PixelFormat.UINT8:
            raise UsageError(
                f"uint8 pixels: vLLM normalizes {self.name} pixels in its processor, not on the "
                "device, so its workers take normalized floats",
                hint="--pixel-dtype float32, bfloat16 or float16",
            )
        start = time.perf_counter()
        vision = model.params
        indices = np.zeros(0, dtype=np.int64)
        times: tuple[float, ...] = ()
        if kind is MediaKind.IMAGE:
            source: Any
            source, rgb = load_image(path)
            loaded = time.perf_counter()
            item = self.image_item(rgb, vision)
            frames: tuple[np.ndarray, ...] = (rgb,) if keep_frames else ()
        else:
            source, stack, indices = self._decode(path, vision, on_frame)
            if strict and source.warnings:
                raise InputError(
                    source.warnings[0], hint="without --strict mmctl uses the frames that decode"
                )
            loaded = time.perf_counter()
            item = self.video_item(stack, vision)
            times = tuple(float(i) / source.source_fps for i in indices)
            frames = tuple(stack) if keep_frames else ()
        end = time.perf_counter()
        side = int(item.pixels.shape[-1])
        return Preprocessed(
            kind=kind,
            family=self.name,
            params=vision,
            pixel_format=pixel_format,
            pixel_values=as_format(item.pixels, pixel_format),
            grid_thw=None,
            resized=(int(item.pixels.shape[-2]), side),
            source=source,
            frame_indices=indices,
            frame_times=times,
            patch_times=(),
            num_tokens=item.tokens,
            timings=Timings(
                decode_s=loaded - start, preprocess_s=end - loaded, total_s=end - start
            ),
            frames=frames,
            item_tensors=item.tensors,
            extra=item.extra,
            flat_rows=item.rows,
        )

    def _decode(
        self, path: Path, vision: Any, on_frame: FrameCallback | None
    ) -> tuple[Any, np.ndarray, np.ndarray]:
        from mmctl.media.video import decode_sampled

        frames: list[np.ndarray] = []
        wanted: dict[str, int] = {}

        def sampler(total: int, fps: float) -> np.ndarray:
            indices = self.sample_indices(total, vision)
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

    def knows_media(self, template: str) -> bool:
        return "image" in template

    def placeholder_text(self, kind: MediaKind, model: Model) -> str:
        token = model.tokenizer.id_to_token(model.token_ids.placeholder(kind))
        if token is None:
            raise InputError(
                f"the tokenizer ({model.tokenizer.label}) has no token "
                f"{model.token_ids.placeholder(kind)} (config.json's {kind.value} token)"
            )
        return token

    def chat_format(self, body: str, system: str | None) -> str:
        raise InputError(
            f"the model folder has no chat template that writes {self.name}'s media "
            "placeholders (chat_template.jinja, or chat_template in tokenizer_config.json)",
            hint="add the checkpoint's template, or --no-chat to send the text as it is",
        )

    def expand(
        self,
        prompt_ids: Sequence[int],
        items: Sequence[ItemFacts],
        model: Model,
        layout: LayoutKind,
    ) -> Layout:
        from mmctl.prompt.layout import replace_placeholders

        if layout is not LayoutKind.VLLM:
            raise UsageError(f"--layout {layout.value} is a Qwen3-VL video layout")
        return replace_placeholders(
            prompt_ids, items, model.token_ids, lambda item: self.replacement(item, model)
        )

    def check(self, layout: Layout, items: Sequence[ItemFacts], model: Model) -> WalkResult:
        """Each span is exactly the item's replacement: the embedding positions the
        servicer marks (``im_token_id`` inside the span) are the item's features."""
        ids = layout.ids
        for span, item in zip(layout.spans, items, strict=True):
            n = span.item + 1
            if span.offset < 0 or span.end > len(ids):
                return WalkResult(
                    False,
                    f"item {n}: placeholder span [{span.offset}, {span.end}) lies outside the "
                    f"prompt of {len(ids)} tokens",
                    n,
                )
            want = np.asarray(self.replacement(item, model), dtype=np.int64)
            got = ids[span.offset : span.end]
            embed = model.token_ids.embed(item.kind)
            if len(got) != len(want) or not np.array_equal(got, want):
                held = int(np.count_nonzero(got == embed))
                at = _first_difference(got, want)
                return WalkResult(
                    False,
                    f"item {n}: its span of {len(got)} tokens holds {held} embedding tokens "
                    f"({embed}); the {item.kind.value} needs {item.tokens} in a run of "
                    f"{len(want)} tokens (first difference at token {span.offset + at})",
                    n,
                )
        return WalkResult(True)

    def frames(self, item: ItemFacts, model: Model) -> Frames | None:
        return None  # images only; a family that reads video says how its frames lie

    def check_received(
        self,
        kind: MediaKind,
        tensors: Mapping[str, np.ndarray],
        count: int,
        model: Model,
        raw: bool,
    ) -> None:
        from mmctl.modality import pixel_key

        if raw:
            raise ContractError(
                f"holds raw uint8 pixels; vLLM normalizes {self.name} pixels in its processor "
                "(no device normalization for this model)",
                "pixel_values",
            )
        items = self.received_items(kind, tensors, count, model)
        want = self.expected_pixels(kind, items, model)
        got = tuple(tensors[pixel_key(kind)].shape)
        if len(got) != len(want) or any(
            isinstance(w, int) and w != g for w, g in zip(want, got, strict=False)
        ):
            shown = ", ".join(str(w) for w in want)
            raise ContractError(
                f"has shape {list(got)}; vLLM's {self.name} input schema for these "
                f"{count} item(s) is [{shown}]",
                "pixel_values",
            )

    def unit_means(
        self, kind: MediaKind, pixels: np.ndarray, items: Sequence[ItemFacts], model: Model
    ) -> list[list[np.ndarray]]:
        """Per item: its sampled pixels of each frame (video) or of its whole-image
        tile (the base tile, or Llama 4's global one), as ``[k, 3]`` rows."""
        out = []
        for n, tiles in enumerate(self.item_tiles(kind, pixels, items)):
            units = tiles if kind is MediaKind.VIDEO else [self.whole_image(tiles, items[n])]
            out.append([_sampled(u) for u in units])
        return out

    def item_tiles(
        self, kind: MediaKind, pixels: np.ndarray, items: Sequence[ItemFacts]
    ) -> list[np.ndarray]:
        """Each item's ``[k, 3, S, S]`` share of the batch's pixel tensor."""
        return [pixels[n].reshape(-1, *pixels.shape[-3:]) for n in range(len(items))]

    def whole_image(self, tiles: np.ndarray, item: ItemFacts) -> np.ndarray:
        return tiles[0]


def as_format(pixels: np.ndarray, fmt: PixelFormat) -> np.ndarray:
    """Normalized float32 pixels in the wire format (bf16 as uint16 bit patterns)."""
    from mmctl.preprocessing.pixels import float32_to_bfloat16_bits

    if fmt is PixelFormat.FLOAT32:
        return np.ascontiguousarray(pixels, dtype=np.float32)
    if fmt is PixelFormat.BFLOAT16:
        return float32_to_bfloat16_bits(np.ascontiguousarray(pixels, dtype=np.float32))
    return pixels.astype(np.float16)


def table_rows(
    tensors: Mapping[str, np.ndarray], key: str, count: int, width: int
) -> list[tuple[int, ...]]:
    """A batched int tensor's rows, checked to be ``[count, width]``."""
    if key not in tensors:
        raise ContractError(f"carries no {key} tensor")
    array = np.asarray(tensors[key])
    if list(array.shape) != [count, width]:
        raise ContractError(
            f"has shape {list(array.shape)}; {count} placeholder(s) need [{count}, {width}]", key
        )
    return [tuple(int(v) for v in row) for row in array.reshape(count, width).tolist()]


def _sampled(tile: np.ndarray) -> np.ndarray:
    """A ``[3, S, S]`` tile's pixels on a stride, as ``[k, 3]`` rows."""
    return np.asarray(tile[:, ::COLOUR_STRIDE, ::COLOUR_STRIDE]).reshape(3, -1).T


def _first_difference(got: np.ndarray, want: np.ndarray) -> int:
    n = min(len(got), len(want))
    diff = np.flatnonzero(got[:n] != want[:n])
    return int(diff[0]) if len(diff) else n
