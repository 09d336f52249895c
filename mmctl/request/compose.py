"""Media files + prompt → everything a request needs, in the pipeline's order.

media → preprocess → chat text → tokens → layout (expansion) → mrope walk →
modality batches → :class:`~mmctl.request.build.RequestPlan`. Used by
``inspect-tokens``, ``build`` and ``send``; each stage is a lap of the
caller's :class:`~mmctl.timing.Timeline`, for the send command's breakdown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mmctl.choices import LayoutKind, PixelFormat
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind, check_readable, media_kind
from mmctl.models.model import Model
from mmctl.preprocessing.pipeline import Allocator, Preprocessed, empty, preprocess
from mmctl.prompt.chat import Rendered, render
from mmctl.prompt.layout import Layout, LayoutItem, expand
from mmctl.prompt.mrope import WalkResult, walk
from mmctl.request.build import MediaItem, RequestPlan, Sampling, make_batches
from mmctl.request.hashing import item_hash
from mmctl.request.limits import check_item_limits
from mmctl.timing import Timeline


@dataclass
class Composed:
    items: list[MediaItem]
    rendered: Rendered
    prompt_ids: list[int]  # before expansion
    layout: Layout
    check: WalkResult
    plan: RequestPlan
    #: Consecutive phases (``decode_s``, ``hash_s``, ``tokenize_s``), seconds.
    timings: dict[str, float] = field(default_factory=dict)
    #: Busy time of resize + normalize + patchify, inside ``decode_s`` (for
    #: video it runs on another thread, overlapped with decoding).
    preprocess_busy_s: float = 0.0

    @property
    def warnings(self) -> list[str]:
        return [w for it in self.items for w in it.pre.warnings]


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


def check_layout(model: Model, layout: Layout, grids: Sequence[tuple[int, int, int]]) -> WalkResult:
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
    allow_special_tokens: bool = False,
    sampling: Sampling | None = None,
    stream: bool = True,
    request_id: str | None = None,
    item_limits: dict[str, int] | None = None,
    strict: bool = False,
    on_frame: Callable[[int, int], None] | None = None,
    allocate: Allocator | None = None,
    timeline: Timeline | None = None,
    kinds: Sequence[MediaKind] | None = None,
) -> Composed:
    """Everything a request needs. ``timeline`` gets the laps ``decode_s``
    (decode + preprocess, per item), ``hash_s`` and ``tokenize_s``.
    ``kinds``: the media's kinds, from a caller that has checked the files
    (``mmctl.media.probe.check_media``); without them each file is checked here."""
    timeline = timeline or Timeline()
    if kinds is None:
        kinds = []
        for path in media:
            check_readable(path)
            kinds.append(media_kind(path))
    if item_limits:
        check_item_limits([k.value for k in kinds], item_limits, "the limit")
    items: list[MediaItem] = []
    busy = 0.0
    for path, kind in zip(media, kinds, strict=True):
        pre: Preprocessed = preprocess(
            path,
            model.spec,
            model.params,
            pixel_format,
            kind=kind,
            on_frame=on_frame,
            strict=strict,
            allocate=allocate or empty,
        )
        busy += pre.timings.preprocess_s
        timeline.lap("decode_s")
        items.append(MediaItem(str(path), pre, item_hash(pre, path)))
        timeline.lap("hash_s")
    return compose_items(
        items,
        prompt,
        model,
        layout_kind=layout_kind,
        system=system,
        chat=chat,
        allow_special_tokens=allow_special_tokens,
        sampling=sampling,
        stream=stream,
        request_id=request_id,
        timeline=timeline,
        preprocess_busy_s=busy,
    )


def compose_items(
    items: list[MediaItem],
    prompt: str,
    model: Model,
    *,
    layout_kind: LayoutKind = LayoutKind.VLLM,
    system: str | None = None,
    chat: bool = True,
    allow_special_tokens: bool = False,
    sampling: Sampling | None = None,
    stream: bool = True,
    request_id: str | None = None,
    timeline: Timeline | None = None,
    preprocess_busy_s: float = 0.0,
) -> Composed:
    """The request for media items already preprocessed (the prompt, its
    layout, the checks, the batches); ``timeline`` gets the lap ``tokenize_s``."""
    timeline = timeline or Timeline()
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
        allow_special_tokens=allow_special_tokens,
    )
    prompt_ids = model.tokenizer.encode(rendered.text)
    try:
        layout, check = lay_out(model, prompt_ids, items, layout_kind)
    except InputError as err:
        raise _blame_prompt(err, model, [prompt, system or ""]) from None
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
    timeline.lap("tokenize_s")
    return Composed(
        items,
        rendered,
        prompt_ids,
        layout,
        check,
        plan,
        timings=dict(timeline.phases),
        preprocess_busy_s=preprocess_busy_s,
    )


def _blame_prompt(err: InputError, model: Model, texts: list[str]) -> InputError:
    """A placeholder mismatch says when the user's own text holds placeholders
    (possible only with ``allow_special_tokens``)."""
    tok = model.tokenizer
    pads = [
        tok.id_to_token(i) for i in (model.token_ids.image_token_id, model.token_ids.video_token_id)
    ]
    written = sum(text.count(p) for text in texts for p in pads if p)
    if not written:
        return err
    return InputError(
        f"{err.message}: {written} of them written in the prompt text itself",
        hint="remove the placeholder tokens from the prompt; mmctl adds one per media item",
    )
