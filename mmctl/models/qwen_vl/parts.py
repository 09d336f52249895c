"""The family interface the Qwen-VL families share, parametrised by what
differs between them (a :class:`~mmctl.models.qwen_vl.variant.QwenVariant`).

Processor: :mod:`.pipeline`. Prompt: ``<|vision_start|><|X_pad|><|vision_end|>``
per item, expanded by :mod:`.layout`, checked by vLLM's mrope walk
(:mod:`mmctl.prompt.mrope`). Wire: pixels flat by per-item row counts, the
grid batched and kept on the CPU (:func:`qwen_fields`). Contract: items read
back from their grid rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mmctl.choices import LayoutKind, PixelFormat, PruningMethod
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind
from mmctl.models.family import Family, ModelView, TokenReader
from mmctl.models.qwen_vl.settings import PatchSteps, QwenVision, TokenIds
from mmctl.models.qwen_vl.variant import PatchVariant, QwenVariant
from mmctl.values.fields import GRID, PIXELS, ROWS, FieldLayout, WireField, by_value
from mmctl.values.items import Frames, ItemFacts, ItemOptions, Preprocessed
from mmctl.values.layout import Layout, LayoutCheck
from mmctl.values.received import ContractError, Received


def qwen_fields(kind: MediaKind, extra: tuple[WireField, ...] = ()) -> tuple[WireField, ...]:
    """The Qwen-VL batch (Qwen2-VL, Qwen2.5-VL, Qwen3-VL alike): pixels flat by
    the per-item row counts, the grid batched and kept on the CPU."""
    name = kind.value
    return (
        WireField(
            "pixel_values",
            FieldLayout.FLAT,
            PIXELS,
            PIXELS,
            ("P",),
            "[Σ rows, C·Tp·P·P] patchified pixels, dtype negotiated",
            sizes=f"patches_per_{name}",
        ),
        WireField(
            f"{name}_grid_thw",
            FieldLayout.BATCHED,
            GRID,
            "int64",
            (3,),
            "[items, 3] patch grid (t, h, w) per item",
            keep_on_cpu=True,
        ),
        WireField(
            f"patches_per_{name}",
            FieldLayout.BATCHED,
            ROWS,
            "int64",
            (),
            "[items] pixel rows per item, t·h·w (the flat sizes)",
        ),
        *extra,
    )


def vision(model: ModelView) -> QwenVision:
    settings = model.params
    assert isinstance(settings, QwenVision), "a Qwen family resolves QwenVision"
    return settings


def patch_settings(model: ModelView) -> PatchSteps:
    """The settings of a patchified family (Qwen-VL's, GLM's)."""
    settings = model.params
    assert isinstance(settings, PatchSteps), "a patchified family resolves PatchSteps"
    return settings


def token_ids(model: ModelView) -> TokenIds:
    ids = model.token_ids
    assert isinstance(ids, TokenIds), "a Qwen family resolves TokenIds"
    return ids


@dataclass(frozen=True)
class QwenProcessor:
    variant: PatchVariant[Any]
    #: vLLM 0.33 normalizes Qwen2.5-VL and Qwen3-VL pixels on the device by
    #: default, so a default worker takes raw uint8.
    worker_pixels: PixelFormat = PixelFormat.UINT8
    device_normalize: bool = True

    def preprocess(
        self, path: Path, kind: MediaKind, settings: Any, fmt: PixelFormat, options: ItemOptions
    ) -> Preprocessed:
        from mmctl.models.qwen_vl.pipeline import preprocess

        return preprocess(path, self.variant, settings, fmt, kind=kind, options=options)


@dataclass(frozen=True)
class QwenPrompt:
    variant: QwenVariant
    default_system: str | None = None
    #: vLLM's mrope position pass walks each video span (ARCHITECTURE §5.5).
    check_name: str = "mrope_walk"

    def knows_media(self, template: str) -> bool:
        return "vision_start" in template or "video" in template

    def placeholder_text(self, kind: MediaKind, model: ModelView) -> str:
        """``<|vision_start|><|video_pad|><|vision_end|>`` (or the image one), from the ids."""
        ids = token_ids(model)
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
        self, ids: Sequence[int], items: Sequence[ItemFacts], model: ModelView, layout: LayoutKind
    ) -> Layout:
        from mmctl.models.qwen_vl.layout import expand

        return expand(
            ids,
            items,
            spec=self.variant,
            token_ids=token_ids(model),
            tokenizer=model.tokenizer,
            merge_size=vision(model).merge_size,
            kind=layout,
            pruning=model.pruning,
        )

    def frames(self, item: ItemFacts, model: ModelView) -> Frames | None:
        if item.kind is not MediaKind.VIDEO or model.pruning.enabled:
            return None  # pruned, the runs are no longer one per frame
        t, h, w = item.grid
        merge = vision(model).merge_size
        return Frames(t, h * w // (merge * merge))  # one run per temporal patch

    def check(self, layout: Layout, items: Sequence[ItemFacts], model: ModelView) -> LayoutCheck:
        from mmctl.prompt.mrope import walk

        return walk(
            layout.ids,
            layout.spans,
            [it.grid for it in items],
            token_ids(model),
            vision(model).merge_size,
            per_frame_markers=self.variant.per_frame_markers,
            pruning=model.pruning,
        )


@dataclass(frozen=True)
class QwenWire:
    #: The field table per modality (vLLM's ``_get_mm_fields_config``).
    table: Mapping[MediaKind, tuple[WireField, ...]]

    def fields(self, kind: MediaKind) -> tuple[WireField, ...]:
        return self.table[kind]

    def batch_pixels(self, kind: MediaKind, items: Sequence[np.ndarray]) -> np.ndarray:
        return items[0] if len(items) == 1 else np.concatenate(items)


@dataclass(frozen=True)
class QwenContract:
    wire: QwenWire
    #: What a pruned video's span holds (the Qwen-VL families; GLM's model does not prune).
    variant: QwenVariant | None = None

    def received_items(self, batch: Received, model: ModelView) -> list[ItemFacts]:
        kind, tensors, count = batch.kind, batch.tensors, batch.count
        key = by_value(self.wire.fields(kind), GRID).key
        if key not in tensors:
            raise ContractError(f"carries no {key} tensor")
        rows = np.asarray(tensors[key])
        if list(rows.shape) != [count, 3]:
            raise ContractError(
                f"has shape {list(rows.shape)}; {count} placeholder(s) need [{count}, 3]", key
            )
        merge = patch_settings(model).merge_size
        pruned = kind is MediaKind.VIDEO and model.pruning.enabled
        markers = self.variant is not None and self.variant.per_frame_markers
        times = self._times(tensors, count) if pruned and markers else None
        out = []
        for n, (t, h, w) in enumerate(rows.reshape(-1, 3).tolist()):
            grid = (int(t), int(h), int(w))
            tokens = t * h * w // (merge * merge)
            if pruned:
                tokens = model.pruning.retained(h * w // (merge * merge), t)
            patch_times: tuple[float, ...] = ()
            if times is not None:
                patch_times = tuple(times[n])
                if len(patch_times) != t:
                    raise ContractError(
                        f"row {n} holds {len(patch_times)} times for a video of {t} temporal "
                        "patches; vLLM's model asserts one per patch under video pruning",
                        "timestamps",
                    )
                tokens = self._whole_span(tokens, patch_times, model)
            extra = {"unpruned_tokens": t * h * w // (merge * merge)} if pruned else {}
            out.append(ItemFacts(kind, tokens, grid, patch_times, extra, rows=t * h * w))
        return out

    @staticmethod
    def _times(tensors: Mapping[str, np.ndarray], count: int) -> list[list[float]]:
        if "timestamps" not in tensors:
            raise ContractError(
                "carries no timestamps; vLLM's Qwen3-VL model reads each video's times under "
                "video pruning (it asserts them)"
            )
        times = np.asarray(tensors["timestamps"], dtype=np.float64)
        if times.ndim != 2 or times.shape[0] != count:
            raise ContractError(
                f"has shape {list(times.shape)}; {count} video(s) need [{count}, t]", "timestamps"
            )
        return times.tolist()

    def _whole_span(self, kept: int, times: Sequence[float], model: ModelView) -> int:
        """A pruned Qwen3-VL video's embedding positions: its whole span, which
        the model builds from the times it reads (``get_video_repl``)."""
        assert self.variant is not None, "only a Qwen-VL family's video is pruned"
        labels = sum(len(model.tokenizer.encode_cached(self.variant.frame_label(s))) for s in times)
        return labels + 2 * len(times) + kept

    def check_received(self, batch: Received, model: ModelView) -> None:
        """vLLM's Qwen-VL input validation: ``[Σ t·h·w, C·Tp·P·P]`` pixels, one
        valid grid row per item (checked here; the sizes in :mod:`worker.checks`)."""
        from mmctl.modality import pixel_key

        p = patch_settings(model)
        items = self.received_items(batch, model)
        pixels = batch.tensors[pixel_key(batch.kind)]
        want_dim = 3 * p.temporal_patch_size * p.patch_size * p.patch_size
        if pixels.ndim != 2 or pixels.shape[1] != want_dim:
            raise ContractError(
                f"has shape {list(pixels.shape)}; patches of this model have "
                f"3*{p.temporal_patch_size}*{p.patch_size}*{p.patch_size} = {want_dim} features",
                "pixel_values",
            )
        grids = [it.grid for it in items]
        rows = sum(int(np.prod(g)) for g in grids)
        key = by_value(self.wire.fields(batch.kind), GRID).key
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
        self, kind: MediaKind, pixels: np.ndarray, items: Sequence[ItemFacts], model: ModelView
    ) -> list[list[np.ndarray]]:
        """Per item, per temporal patch: the mean of each patch row's channels."""
        out: list[list[np.ndarray]] = []
        start = 0
        for item in items:
            t, h, w = item.grid
            per_t = h * w
            units = []
            for i in range(t):
                rows = pixels[start + i * per_t : start + (i + 1) * per_t]
                units.append(rows.reshape(rows.shape[0], 3, -1).mean(axis=2))
            out.append(units)
            start += t * per_t
        return out


def qwen_tokens(config: Mapping[str, Any], vocab: Any) -> TokenIds:
    """A Qwen family's special ids (:class:`~mmctl.models.family.TokenReader`)."""
    return TokenIds.from_config(config)


def qwen_family(
    variant: QwenVariant,
    settings: type[QwenVision],
    video_field: WireField,
    *,
    aliases: tuple[str, ...],
    model_types: tuple[str, ...],
    architectures: tuple[str, ...],
    default_system: str | None = None,
    tokens: TokenReader = qwen_tokens,
    video_pruning: tuple[tuple[str, tuple[PruningMethod, ...]], ...] = (),
) -> Family:
    """A Qwen-VL family: the shared parts around its variant, its settings and
    the per-video tensor its video batch adds."""
    wire = QwenWire(
        {
            MediaKind.IMAGE: qwen_fields(MediaKind.IMAGE),
            MediaKind.VIDEO: qwen_fields(MediaKind.VIDEO, (video_field,)),
        }
    )
    return Family(
        name=variant.name,
        aliases=aliases,
        model_types=model_types,
        architectures=architectures,
        modalities=(MediaKind.IMAGE, MediaKind.VIDEO),
        settings=settings,
        tokens=tokens,
        processor=QwenProcessor(variant),
        prompt=QwenPrompt(variant, default_system),
        wire=wire,
        contract=QwenContract(wire, variant),
        video_pruning=video_pruning,
    )
