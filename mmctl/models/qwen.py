"""What the Qwen-VL families (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) share behind
:class:`~mmctl.models.family.Family`: patchified pixels with a ``(t, h, w)``
grid (:mod:`mmctl.preprocessing.pipeline`), ``<|vision_start|>`` /
``<|vision_end|>`` around each placeholder (:mod:`mmctl.prompt.layout`) and
vLLM's mrope walk over the laid-out prompt (:mod:`mmctl.prompt.mrope`).

:mod:`mmctl.models.qwen3_vl` and :mod:`mmctl.models.qwen2_vl` hold what
differs: sizes, sampling, frame times and the per-video tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mmctl.choices import LayoutKind, PixelFormat
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models.base import ModelFiles, TokenIds, VisionParams
from mmctl.models.family import ContractError, Frames, ItemFacts, Vision
from mmctl.models.fields import GRID, WireField, by_value

if TYPE_CHECKING:
    from mmctl.models.model import Model
    from mmctl.models.processor_config import ProcessorClass
    from mmctl.preprocessing.pipeline import Allocator, FrameCallback, Preprocessed
    from mmctl.prompt.layout import Layout
    from mmctl.prompt.mrope import WalkResult

#: ``config.json`` keys of the vision token ids (top level, or ``text_config``).
TOKEN_KEYS = ("vision_start_token_id", "vision_end_token_id", "image_token_id", "video_token_id")
#: vLLM's Qwen-VL models read images and video, any number of each.
MODALITIES = (MediaKind.IMAGE, MediaKind.VIDEO)


def token_ids_from_config(config: Mapping[str, Any], defaults: TokenIds) -> tuple[TokenIds, str]:
    """The vision token ids of ``config.json``; the family's own when there is none.

    A config.json that names some of them but not all is an error: guessing
    the rest would silently build a prompt the model cannot read.
    """
    if not config:
        return defaults, "family defaults (no config.json)"
    source = config if any(k in config for k in TOKEN_KEYS) else config.get("text_config") or {}
    missing = [k for k in TOKEN_KEYS if not isinstance(source.get(k), int)]
    if missing:
        raise InputError(
            f"config.json lacks {', '.join(missing)}",
            hint="pass --family to use the family's published ids only if you are sure they match",
        )
    return TokenIds(**{k: int(source[k]) for k in TOKEN_KEYS}), "config.json"


class QwenFamily:
    """The shared half of the Qwen families; subclasses are frozen dataclasses
    that add ``name``, ``params``, ``token_ids`` and the sizing/sampling methods."""

    name: str
    aliases: tuple[str, ...]
    model_types: tuple[str, ...]
    params: VisionParams
    token_ids: TokenIds
    per_frame_markers: bool
    worker_pixels: PixelFormat
    image_processor: ProcessorClass
    video_processor: ProcessorClass
    default_system: str | None
    modalities: tuple[MediaKind, ...] = MODALITIES
    #: vLLM 0.33 normalizes Qwen2.5-VL and Qwen3-VL pixels on the device by default.
    device_normalize: bool = True
    #: vLLM's mrope position pass walks each video span (ARCHITECTURE §5.5).
    layout_check: str = "mrope_walk"

    # ---- what a subclass provides -------------------------------------------

    def matches(self, config: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        raise NotImplementedError

    def sample_indices(
        self, total_frames: int, source_fps: float, params: VisionParams
    ) -> np.ndarray:
        raise NotImplementedError

    def video_frame_times(
        self, indices: np.ndarray, source_fps: float, params: VisionParams
    ) -> list[float]:
        raise NotImplementedError

    def video_size(
        self, num_frames: int, height: int, width: int, params: VisionParams
    ) -> tuple[int, int]:
        raise NotImplementedError

    def image_size(self, height: int, width: int, params: VisionParams) -> tuple[int, int]:
        raise NotImplementedError

    def frame_label(self, seconds: float) -> str:
        raise NotImplementedError

    def video_tensors(
        self, indices: np.ndarray, total_frames: int, source_fps: float, params: VisionParams
    ) -> dict[str, np.ndarray]:
        raise NotImplementedError

    # ---- the family interface -----------------------------------------------

    def vision(self, files: ModelFiles) -> tuple[Vision, dict[str, str]]:
        from mmctl.models.processor_config import resolve_params

        if files.config and not self.matches(files.config):
            # --family forced over another family's files: their vision sizes
            # (P=16 vs 14, mean/std) would be wrong for it; keep the family's own.
            origin = f"{self.name} published default (--family over other files)"
            return self.params, dict.fromkeys(self.params.settings(), origin)
        return resolve_params(self, files)

    def tokens(self, config: Mapping[str, Any], vocab: Callable[[str], int | None]) -> TokenIds:
        return token_ids_from_config(config, self.token_ids)[0]

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
        from mmctl.preprocessing.pipeline import empty, preprocess

        return preprocess(
            path,
            self,
            qwen_params(model),
            pixel_format,
            kind=kind,
            keep_frames=keep_frames,
            on_frame=on_frame,
            allocate=allocate or empty,
            strict=strict,
        )

    def knows_media(self, template: str) -> bool:
        return "vision_start" in template or "video" in template

    def placeholder_text(self, kind: MediaKind, model: Model) -> str:
        """``<|vision_start|><|video_pad|><|vision_end|>`` (or the image one), from the ids."""
        ids = qwen_tokens(model)
        pad = ids.placeholder(kind)
        found = [
            model.tokenizer.id_to_token(i)
            for i in (ids.vision_start_token_id, pad, ids.vision_end_token_id)
        ]
        names = [n for n in found if n is not None]
        if len(names) != len(found):
            raise InputError(
                f"the tokenizer ({model.tokenizer.label}) lacks the vision tokens of config.json "
                f"({ids.vision_start_token_id}, {pad}, {ids.vision_end_token_id})"
            )
        return "".join(names)

    def chat_format(self, body: str, system: str | None) -> str:
        """What the Qwen2.5-VL and Qwen3-VL templates produce for one user turn."""
        turns = [f"<|im_start|>system\n{system}<|im_end|>\n"] if system else []
        turns.append(f"<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n")
        return "".join(turns)

    def expand(
        self,
        prompt_ids: Sequence[int],
        items: Sequence[ItemFacts],
        model: Model,
        layout: LayoutKind,
    ) -> Layout:
        from mmctl.prompt.layout import expand

        return expand(
            prompt_ids,
            items,
            spec=self,
            token_ids=qwen_tokens(model),
            tokenizer=model.tokenizer,
            merge_size=qwen_params(model).merge_size,
            kind=layout,
        )

    def check(self, layout: Layout, items: Sequence[ItemFacts], model: Model) -> WalkResult:
        from mmctl.prompt.mrope import walk

        return walk(
            layout.ids,
            layout.spans,
            [_grid(it) for it in items],
            qwen_tokens(model),
            qwen_params(model).merge_size,
            per_frame_markers=self.per_frame_markers,
        )

    def frames(self, item: ItemFacts, model: Model) -> Frames | None:
        if item.kind is not MediaKind.VIDEO:
            return None
        t, h, w = _grid(item)
        merge = qwen_params(model).merge_size
        return Frames(t, h * w // (merge * merge))  # one run per temporal patch

    def batch_pixels(self, kind: MediaKind, items: Sequence[np.ndarray]) -> np.ndarray:
        return items[0] if len(items) == 1 else np.concatenate(items)

    def received_items(
        self, kind: MediaKind, tensors: Mapping[str, np.ndarray], count: int, model: Model
    ) -> list[ItemFacts]:
        key = by_value(self.fields(kind), GRID).key
        if key not in tensors:
            raise ContractError(f"carries no {key} tensor")
        rows = np.asarray(tensors[key])
        if list(rows.shape) != [count, 3]:
            raise ContractError(
                f"has shape {list(rows.shape)}; {count} placeholder(s) need [{count}, 3]", key
            )
        merge = qwen_params(model).merge_size
        out = []
        for t, h, w in rows.reshape(-1, 3).tolist():
            grid = (int(t), int(h), int(w))
            out.append(ItemFacts(kind, t * h * w // (merge * merge), grid, rows=t * h * w))
        return out

    def check_received(
        self,
        kind: MediaKind,
        tensors: Mapping[str, np.ndarray],
        count: int,
        model: Model,
        raw: bool,
    ) -> None:
        """vLLM's Qwen-VL input validation: ``[Σ t·h·w, C·Tp·P·P]`` pixels, one
        valid grid row per item (checked here; the sizes in :mod:`worker.checks`)."""
        p = qwen_params(model)
        items = self.received_items(kind, tensors, count, model)
        pixels = tensors[_pixel_key(kind)]
        want_dim = 3 * p.temporal_patch_size * p.patch_size * p.patch_size
        if pixels.ndim != 2 or pixels.shape[1] != want_dim:
            raise ContractError(
                f"has shape {list(pixels.shape)}; patches of this model have "
                f"3*{p.temporal_patch_size}*{p.patch_size}*{p.patch_size} = {want_dim} features",
                "pixel_values",
            )
        grids = [_grid(it) for it in items]
        rows = sum(int(np.prod(g)) for g in grids)
        key = by_value(self.fields(kind), GRID).key
        if pixels.shape[0] != rows:
            raise ContractError(
                f"has {pixels.shape[0]} rows, {key} {[list(g) for g in grids]} "
                f"needs sum(t*h*w) = {rows}; the real worker would fail in the engine with a "
                "shape mismatch",
                "pixel_values",
            )
        for grid in grids:
            _, h, w = grid
            if min(grid) < 1 or h % p.merge_size or w % p.merge_size:
                raise ContractError(f"row {list(grid)} is not a valid grid", key)

    def unit_means(
        self, kind: MediaKind, pixels: np.ndarray, items: Sequence[ItemFacts], model: Model
    ) -> list[list[np.ndarray]]:
        """Per item, per temporal patch: the mean of each patch row's channels."""
        out: list[list[np.ndarray]] = []
        start = 0
        for item in items:
            t, h, w = _grid(item)
            per_t = h * w
            units = []
            for i in range(t):
                rows = pixels[start + i * per_t : start + (i + 1) * per_t]
                units.append(rows.reshape(rows.shape[0], 3, -1).mean(axis=2))
            out.append(units)
            start += t * per_t
        return out


def qwen_params(model: Model) -> VisionParams:
    params = model.params
    assert isinstance(params, VisionParams), "a Qwen family resolves VisionParams"
    return params


def qwen_tokens(model: Model) -> TokenIds:
    ids = model.token_ids
    assert isinstance(ids, TokenIds), "a Qwen family resolves TokenIds"
    return ids


def _grid(item: ItemFacts) -> tuple[int, int, int]:
    return item.grid


def _pixel_key(kind: MediaKind) -> str:
    from mmctl.modality import pixel_key

    return pixel_key(kind)
