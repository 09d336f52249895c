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

from mmctl.choices import LayoutKind, PixelFormat, prompt_text
from mmctl.errors import InputError
from mmctl.media.probe import MediaKind, check_readable, media_kind
from mmctl.models.model import Model, WorkerModel
from mmctl.models.registry import refuse_kind
from mmctl.prompt.chat import Rendered, render
from mmctl.request.build import MediaItem, RequestPlan, Sampling, make_batches
from mmctl.request.hashing import file_digest, item_hash
from mmctl.request.limits import check_item_limits
from mmctl.request.pixel_cache import PixelCache, Pixels, lookup, size_of
from mmctl.timing import Timeline
from mmctl.values.items import Allocator, ItemFacts, ItemOptions, Preprocessed, empty
from mmctl.values.layout import Layout, LayoutCheck


@dataclass
class Composed:
    items: list[MediaItem]
    rendered: Rendered
    prompt_ids: list[int]  # before expansion
    layout: Layout
    check: LayoutCheck
    plan: RequestPlan
    #: Consecutive phases (``decode_s``, ``hash_s``, ``tokenize_s``), seconds.
    timings: dict[str, float] = field(default_factory=dict)
    #: Busy time of resize + normalize + patchify, inside ``decode_s`` (for
    #: video it runs on another thread, overlapped with decoding).
    preprocess_busy_s: float = 0.0
    #: Per item, how the pixel cache answered: ``hit``, ``shared``, ``miss``, ``off``.
    cached: list[str] = field(default_factory=list)

    @property
    def cached_bytes(self) -> int:
        """Bytes of this request's tensors that came from the pixel cache."""
        return sum(
            size_of(it.pre)
            for it, how in zip(self.items, self.cached, strict=False)
            if how in ("hit", "shared")
        )

    #: What the model's settings resolver could not take into account.
    model_warnings: tuple[str, ...] = ()

    @property
    def warnings(self) -> list[str]:
        return [*self.model_warnings, *(w for it in self.items for w in it.pre.warnings)]


def lay_out(
    model: Model, prompt_ids: Sequence[int], items: Sequence[ItemFacts], kind: LayoutKind
) -> tuple[Layout, LayoutCheck]:
    """The family's expansion of the prompt, and its check of the result."""
    layout = model.spec.prompt.expand(prompt_ids, items, model, kind)
    return layout, model.spec.prompt.check(layout, items, model)


def compose(
    media: Sequence[Path],
    prompt: str | None,
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
    cache: PixelCache[Pixels] | None = None,
) -> Composed:
    """Everything a request needs. ``timeline`` gets the laps ``hash_s``
    (the medium's digest), ``decode_s`` (decode + preprocess) or, when
    ``cache`` had the pixels, ``pixel_cache_s`` — per item — and ``tokenize_s``.
    ``kinds``: the media's kinds, from a caller that has checked the files
    (``mmctl.media.probe.check_media``); without them each file is checked here."""
    timeline = timeline or Timeline()
    if kinds is None:
        kinds = []
        for path in media:
            check_readable(path)
            kinds.append(media_kind(path))
    for kind in kinds:
        refuse_kind(model.spec, kind)
    if item_limits:
        check_item_limits([k.value for k in kinds], item_limits, "the limit")
    items: list[MediaItem] = []
    cached: list[str] = []
    busy = 0.0
    for path, kind in zip(media, kinds, strict=True):
        digest = file_digest(path)
        timeline.lap("hash_s")

        def make(path: Path = path, kind: MediaKind = kind, digest: str = digest) -> Pixels:
            pre: Preprocessed = model.spec.processor.preprocess(
                path,
                kind,
                model.params,
                pixel_format,
                ItemOptions(on_frame=on_frame, allocate=allocate or empty, strict=strict),
            )
            return Pixels(pre, item_hash(pre, digest))

        pixels, how = lookup(cache, digest, kind, model, pixel_format, make, strict)
        if how in ("miss", "off"):
            busy += pixels.pre.timings.preprocess_s + pixels.pre.timings.overlapped_s
            timeline.lap("decode_s")
        else:
            timeline.lap("pixel_cache_s")
        items.append(MediaItem(str(path), pixels.pre, pixels.content_hash))
        cached.append(how)
    composed = compose_items(
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
    composed.cached = cached
    return composed


def render_prompt(
    kinds: Sequence[MediaKind],
    prompt: str | None,
    model: Model | WorkerModel,
    *,
    system: str | None = None,
    chat: bool = True,
    allow_special_tokens: bool = False,
) -> tuple[Rendered, list[int]]:
    """One user turn: a placeholder per medium (``kinds``, in order), then the
    prompt text (the default one for ``None``); its ids, by the model's tokenizer."""
    text = prompt_text(prompt)
    parts: list[MediaKind | str] = [*kinds, text] if text else list(kinds)
    rendered = render(
        parts,
        model.tokenizer,
        model.source,
        model.chat,
        system=system,
        chat=chat,
        allow_special_tokens=allow_special_tokens,
    )
    return rendered, model.tokenizer.encode(rendered.text)


def compose_items(
    items: list[MediaItem],
    prompt: str | None,
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
    prompt = prompt_text(prompt)
    rendered, prompt_ids = render_prompt(
        [it.kind for it in items], prompt, model, system=system, chat=chat,
        allow_special_tokens=allow_special_tokens,
    )  # fmt: skip
    try:
        layout, check = lay_out(model, prompt_ids, [it.pre.facts for it in items], layout_kind)
    except InputError as err:
        raise _blame_prompt(err, model, [prompt, system or ""]) from None
    batches = make_batches(items, layout, model)
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
        model_warnings=model.warnings,
    )


def _blame_prompt(err: InputError, model: Model, texts: list[str]) -> InputError:
    """A placeholder mismatch says when the user's own text holds placeholders
    (possible only with ``allow_special_tokens``)."""
    tok = model.tokenizer
    pads = [tok.id_to_token(model.token_ids.placeholder(k)) for k in model.spec.modalities]
    written = sum(text.count(p) for text in texts for p in pads if p)
    if not written:
        return err
    return InputError(
        f"{err.message}: {written} of them written in the prompt text itself",
        hint="remove the placeholder tokens from the prompt; mmctl adds one per media item",
    )
