"""Media files + prompt → everything a request needs, in the pipeline's order.

media → preprocess → chat text → tokens → layout (expansion) → mrope walk →
modality batches → :class:`~mmctl.request.build.RequestPlan`. Used by
``inspect-tokens``, ``build`` and ``send``; each stage's timing is kept for
the send command's breakdown.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mmctl.media.probe import MediaKind, check_readable, media_kind
from mmctl.models.model import Model
from mmctl.preprocess.pipeline import Allocator, Preprocessed, preprocess
from mmctl.preprocess.pixels import PixelFormat
from mmctl.prompt.chat import Rendered, render
from mmctl.prompt.layout import Layout, LayoutItem, LayoutKind, expand
from mmctl.prompt.mrope import WalkResult, walk
from mmctl.request.build import MediaItem, RequestPlan, Sampling, make_batches
from mmctl.request.hashing import item_hash
from mmctl.request.limits import check_item_limits


@dataclass
class Composed:
    items: list[MediaItem]
    rendered: Rendered
    prompt_ids: list[int]  # before expansion
    layout: Layout
    check: WalkResult
    plan: RequestPlan
    timings: dict[str, float] = field(default_factory=dict)


def layout_items(items: Sequence[MediaItem]) -> list[LayoutItem]:
    return [LayoutItem(it.kind, it.pre.grid_thw, it.pre.patch_times) for it in items]


def lay_out(
    model: Model, prompt_ids: Sequence[int], items: Sequence[MediaItem], kind: LayoutKind
) -> tuple[Layout, WalkResult]:
    layout = expand(
        prompt_ids,
        layout_items(items),
        spec=model.spec,
        token_ids=model.token_ids,
        tokenizer=model.tokenizer,
        merge_size=model.merge_size,
        kind=kind,
    )
    return layout, check_layout(model, layout, [it.pre.grid_thw for it in items])


def check_layout(model: Model, layout: Layout, grids) -> WalkResult:
    return walk(
        layout.ids,
        layout.spans,
        grids,
        model.token_ids,
        model.merge_size,
        per_frame_markers=model.spec.per_frame_markers,
    )


def compose(
    media: Sequence[Path],
    prompt: str,
    model: Model,
    *,
    pixel_format: PixelFormat = PixelFormat.FLOAT32,
    layout_kind: LayoutKind = LayoutKind.VLLM,
    system: str | None = None,
    chat: bool = True,
    sampling: Sampling | None = None,
    stream: bool = True,
    request_id: str | None = None,
    item_limits: dict[str, int] | None = None,
    on_frame: Callable[[int, int], None] | None = None,
    allocate: Allocator | None = None,
) -> Composed:
    timings: dict[str, float] = {"decode_s": 0.0, "preprocess_s": 0.0}
    kinds = []
    for path in media:
        check_readable(path)
        kinds.append(media_kind(path))
    if item_limits:
        check_item_limits([k.value for k in kinds], item_limits, "the limit")
    items: list[MediaItem] = []
    for path, kind in zip(media, kinds, strict=True):
        extra = {"allocate": allocate} if allocate is not None else {}
        pre: Preprocessed = preprocess(
            path, model.spec, model.params, pixel_format, kind=kind, on_frame=on_frame, **extra
        )
        timings["decode_s"] += pre.timings.decode_s
        timings["preprocess_s"] += pre.timings.preprocess_s
        started = time.perf_counter()
        items.append(MediaItem(str(path), pre, item_hash(pre, path)))
        timings["hash_s"] = timings.get("hash_s", 0.0) + time.perf_counter() - started
    started = time.perf_counter()
    parts: list[MediaKind | str] = [it.kind for it in items]
    if prompt:
        parts.append(prompt)
    rendered = render(
        parts,
        tokenizer=model.tokenizer,
        token_ids=model.token_ids,
        source=model.source,
        system=system,
        default_system=model.spec.default_system,
        chat=chat,
    )
    prompt_ids = model.tokenizer.encode(rendered.text)
    layout, check = lay_out(model, prompt_ids, items, layout_kind)
    batches = make_batches(items, layout, model.spec, model.token_ids)
    plan = RequestPlan(
        text=rendered.text,
        input_ids=layout.ids,
        batches=batches,
        sampling=sampling or Sampling(),
        stream=stream,
    )
    if request_id:
        plan.request_id = request_id
    timings["tokenize_s"] = time.perf_counter() - started
    return Composed(items, rendered, prompt_ids, layout, check, plan, timings)
